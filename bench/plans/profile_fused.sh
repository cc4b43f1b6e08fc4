#!/bin/bash
# Where a fused iteration's launch time goes: the hybrid and chunked prefill 1024 + mixed, each served
# at one rate of sharegpt at TBT 30 (where session 44's hybrid missed on 28-ms fused_launch laps,
# bench/results/x4_s44_2026-11-27/), with SGLang's torch profiler on for PROFILE_S seconds in the
# middle of the point (POST /start_profile, /stop_profile: CPU and GPU activity). Each trace is
# tabled by bench.analysis.profile_summary (CUDA runtime calls: launches against synchronisations
# and blocking copies) into OUT/<system>.profile.md; the trace itself is kept if under 12 MB.
# Run on one GPU, beside other cells:
#   bash bench/plans/per_gpu.sh 3 bash bench/plans/profile_fused.sh /tmp/res/prof
# RATE (default 33), SYSTEMS, PROFILE_S (default 2), WAIT_S (after the server is up, default 25: its
# warm-up requests, the cache flush and ~10 s of the point) change it. ~4-5 minutes a system.
# Writing the trace holds the scheduler ~9 s per profiled second (session 45: 36 s for 4 s), so the
# point fails on timeouts: read the profile and the timeline before it, not the point's verdict.
set -u
OUT=${1:?usage: profile_fused.sh OUT}
BUDGET=0; source "$(dirname "$0")/one_host.sh"  # healthy
mkdir -p "$OUT"
PORT=${PORT:-30000}
URL=http://127.0.0.1:$PORT
for sys in ${SYSTEMS:-mux-hybrid sglang-chunked-1024}; do
    prof=$OUT/trace_$sys
    mkdir -p "$prof"
    SGLANG_TORCH_PROFILER_DIR=$prof python -m bench.run --systems "$sys" --rates "${RATE:-33}" --workload sharegpt \
        --tbt-slo-ms 30 --seed 0 --arrival poisson --duration-s 45 --drain-s 30 --client-procs 12 --port "$PORT" \
        --server-args "--sampling-backend pytorch --grammar-backend none --enable-metrics" --no-progress \
        --model-path launch/models/llama-3.1-8b --out "$OUT/run" > "$OUT/$sys.run.log" 2>&1 &
    run=$!
    for _ in $(seq 1 120); do healthy "$URL" && break; sleep 3; done
    sleep "${WAIT_S:-25}"
    curl -s -X POST "$URL/start_profile" -H 'Content-Type: application/json' \
        -d "{\"output_dir\": \"$prof\", \"activities\": [\"CPU\", \"GPU\"]}" > "$OUT/$sys.start.txt" 2>&1
    sleep "${PROFILE_S:-2}"
    curl -s -X POST "$URL/stop_profile" > "$OUT/$sys.stop.txt" 2>&1
    wait $run
    t=$(ls -S "$prof"/*.trace.json* 2>/dev/null | head -n 1)
    if [ -n "$t" ]; then
        python -m bench.analysis.profile_summary "$t" > "$OUT/$sys.profile.md" 2>&1
        [ "$(stat -c %s "$t")" -lt 12000000 ] || rm -f "$prof"/*.trace.json*
    else
        echo "no trace in $prof (start: $(cat "$OUT/$sys.start.txt"), stop: $(cat "$OUT/$sys.stop.txt"))" > "$OUT/$sys.profile.md"
    fi
done
