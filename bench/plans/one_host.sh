# Sourced by the sweep plans (BUDGET set first): every call of one comparison must run on one GPU,
# and each call gets the seconds left of its BUDGET.
T0=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
one_host() {  # one_host OUT: record this call's GPU in OUT/host.txt; stop if OUT began on another
    mkdir -p "$1"
    # With CUDA_VISIBLE_DEVICES (one cell per GPU of a multi-GPU host) the GPU it names.
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader ${CUDA_VISIBLE_DEVICES:+-i "$CUDA_VISIBLE_DEVICES"} >> "$1/host.txt"
    gpu_free || exit 2
    if [ "$(sort -u "$1/host.txt" | wc -l)" -gt 1 ]; then
        echo "$1 began on another GPU ($1/host.txt): start it again in a new OUT"; exit 2
    fi
}
gpu_free() {  # no other process on this call's GPU(s): a server left by an earlier step holds its memory
    local busy i
    for i in $(seq 15); do  # a server just stopped may take seconds to let its memory go
        busy=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader \
            ${CUDA_VISIBLE_DEVICES:+-i "$CUDA_VISIBLE_DEVICES"} 2>/dev/null)
        [ -z "$busy" ] && return 0
        sleep 2
    done
    echo "GPU busy before this plan: pid, memory = $(echo $busy): stop it (a server left behind?) and run again"
    return 1
}
