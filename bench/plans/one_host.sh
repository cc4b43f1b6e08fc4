# Sourced by the sweep plans (BUDGET set first): every call of one comparison must run on one GPU,
# and each call gets the seconds left of its BUDGET.
T0=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
one_host() {  # one_host OUT: record this call's GPU in OUT/host.txt; stop if OUT began on another
    mkdir -p "$1"
    # With CUDA_VISIBLE_DEVICES (one cell per GPU of a multi-GPU host) the GPU it names.
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader ${CUDA_VISIBLE_DEVICES:+-i "$CUDA_VISIBLE_DEVICES"} >> "$1/host.txt"
    if [ "$(sort -u "$1/host.txt" | wc -l)" -gt 1 ]; then
        echo "$1 began on another GPU ($1/host.txt): start it again in a new OUT"; exit 2
    fi
}
