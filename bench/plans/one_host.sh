# Sourced by the plans: one_host / gpu_free (every call of one comparison on one GPU; BUDGET set first
# for left: the seconds left of it), healthy URL, muxoff_pairs (--disable-mux against SGLang).
T0=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
one_host() {  # one_host OUT: record this call's GPU in OUT/host.txt; stop if OUT began on another
    mkdir -p "$1"
    # With CUDA_VISIBLE_DEVICES (one cell per GPU of a multi-GPU host) the GPU(s) it names; a call's
    # GPUs on one line (a TP server's several), so that a resumed call compares the same set.
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader ${CUDA_VISIBLE_DEVICES:+-i "$CUDA_VISIBLE_DEVICES"} \
        | paste -sd ';' >> "$1/host.txt"
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
# The server's own process (serve.sh execs it) and its schedulers, by the start of their command
# lines: a pattern met anywhere also matches any shell whose command names it, the caller's too.
SERVER_PAT='^([^ ]*/)?python[0-9.]* -m sglang_mux.launch_server'
SERVER_TREE_PAT='^(([^ ]*/)?python[0-9.]* -m sglang_mux.launch_server|sglang::)'
server_pat_on() {  # server_pat_on PORT: the pattern of the server on that port only (others may run beside)
    echo "$SERVER_PAT .*--port $1( |\$)"
}
healthy() {  # healthy URL: the server there answers /health
    python -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + '/health', timeout=2)" "$1" 2> /dev/null
}
muxoff_pairs() {  # muxoff_pairs OUT PAIRS MIN_LEFT BENCH_RUN_ARGS...: --disable-mux against plain SGLang,
    # PAIRS pairs in alternating order (the second system of a pair runs on a warmer host), while
    # MIN_LEFT seconds remain; then their ratio (bench.analysis.muxoff_ratio)
    local out=$1 pairs=$2 min=$3 i order
    shift 3
    for i in $(seq "$pairs"); do
        order=$([ $((i % 2)) -eq 1 ] && echo sglang,mux-off || echo mux-off,sglang)
        [ "$(left)" -lt "$min" ] && { echo "budget: stopping before pair $i"; break; }
        python -m bench.run --systems "$order" --out "$out/pair$i" --time-budget-s "$(( $(left) - 20 ))" "$@" 2>&1 \
            | tail -n 2
        python -m bench.report "$out/pair$i" > "$out/pair$i/report.md"
    done
    python -m bench.analysis.muxoff_ratio "$out"
}
