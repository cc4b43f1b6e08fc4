#!/bin/bash
# Issue 16 on FA3 (SGLang's default attention backend on Hopper): the capped conversation point
# on an H100, every system with --attention-backend fa3 on the same workload and seed: the mux
# (with the FA3 table) against every chunked budget with and without mixed chunks, and plain
# SGLang. Mooncake conversation, inputs <= 8000 tokens, Poisson seed 0, 40 s per rate.
# Resumable: run it again (each piece within one <= 10-minute device command) until every system
# is in the report; finished points and recorded failed starts are skipped.
#   bash bench/plans/h100_fa3_conv8k.sh [seconds available, default 540]
# Systems are ordered by how likely they are to be the best baseline (the session-10 H100 run:
# chunked 512 with mixing passed 4 req/s, 2048 with mixing and the default failed 1.75), each
# climbing 4 -> 4.5 req/s and stopping at its first failure (stop-on-fail).
set -u
BUDGET=${1:-540}
T0=$(date +%s)
OUT=${SWEEP_OUT:-bench/results/conv8k_fa3_h100}
SA="--attention-backend fa3 --sampling-backend pytorch --grammar-backend none --enable-metrics"
COMMON=(--workload conversation --arrival poisson --input-cap 8000 --duration-s 40 --drain-s 30
        --out "$OUT" --model-path launch/models/llama-3.1-8b --server-args "$SA" --no-progress)
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
step() {  # step SYSTEMS RATES
    local l; l=$(left)
    if [ "$l" -lt 100 ]; then echo "budget: ${l}s left, stopping before $1"; exit 0; fi
    python -m bench.run --systems "$1" --rates "$2" --time-budget-s "$l" "${COMMON[@]}" 2>&1 \
        | grep -v "^\[bench.run .*\] .*@ .*: [0-9]* requests over" | tail -n 4
}
step mux 4,4.5
step sglang-chunked-512 4,4.5
step sglang-chunked-256 4,4.5
step sglang-chunked-512-nomix 4,4.5
step sglang-chunked-1024 4,4.5
step sglang-chunked-256-nomix 4,4.5
step sglang-chunked-1024-nomix 4,4.5
step sglang-chunked-2048-nomix 4,4.5
step sglang-chunked-2048 4,4.5
step sglang 4,4.5
