#!/bin/bash
# Issue 5 goodput sweep on the GPU host: Mooncake conversation slice, inputs <= 8000 tokens,
# Poisson arrivals (the trace's own timestamps are rounded to 3 s: bursts), Llama-3.1-8B shape.
# Resumable: run it again (each call within one <= 10-minute device command) until the report
# has every system; finished points and recorded failed starts are skipped.
#   bash bench/plans/h200_conv8k_poisson.sh [seconds available, default 560]
# Through the device tool, each piece is one command on a copy of this working tree, so bring
# the results back before the next piece (they are what makes it resume):
#   run: bash .gpu/install.sh | grep -q '^\[gpu-env\] complete' && source .gpu/env.sh &&
#        bash bench/plans/h200_conv8k_poisson.sh 540; tar czf $OUT/res.tgz bench/results/conv8k_poisson_h200
#   (install.sh exits 0 even when the machine went cold and lacks the wheels: the grep stops the
#   piece there instead of recording a failed start for every system)
#   here: tar xzf <files_at>/res.tgz    (then the next piece)
# The finished sweep's raw files are xz-compressed in the repository (carry limit): to resume or
# add points, first run  xz -dk bench/results/conv8k_poisson_h200/*.xz
# After a piece: python -m bench.timeline_profile "$OUT" --rate R shows where a mux point's time went.
# sglang_mux.sim --arrival poisson predicts the mux passes up to 4 req/s and fails at 6.
set -u
BUDGET=${1:-560}
T0=$(date +%s)
OUT=${SWEEP_OUT:-bench/results/conv8k_poisson_h200}
# --enable-metrics for every system (same overhead): the mux points then keep their sglang_mux counters
SA="--attention-backend triton --sampling-backend pytorch --grammar-backend none --enable-metrics"
COMMON=(--workload conversation --arrival poisson --input-cap 8000 --duration-s 45 --drain-s 40
        --out "$OUT" --model-path launch/models/llama-3.1-8b --server-args "$SA" --no-progress)
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
step() {  # step SYSTEMS RATES
    local l; l=$(left)
    if [ "$l" -lt 120 ]; then echo "budget: ${l}s left, stopping before $1"; exit 0; fi
    python -m bench.run --systems "$1" --rates "$2" --time-budget-s "$l" "${COMMON[@]}" 2>&1 \
        | grep -v "^\[bench.run .*\] .*@ .*: [0-9]* requests over" | tail -n 6
}
step_down() {  # step_down SYSTEM TESTED LOWER: run LOWER only when TESTED was run and failed
    local f="$OUT/$1__$2.jsonl"
    [ -f "$f" ] || return 0
    python -c "import sys, argparse; from pathlib import Path; from bench.run import point_passes; from bench import metrics
sys.exit(0 if point_passes(Path('$f'), argparse.Namespace(tbt_slo_ms=metrics.DEFAULT_TBT_SLO_MS, ttft_slo_ms=metrics.DEFAULT_TTFT_SLO_MS)) else 1)" \
        || step "$1" "$3"
}
# Each system starts at the rate it passed with trace arrivals (session 2) and climbs until it
# fails; only if that first rate fails is the next lower one run (step_down) -- a server start and
# a point cost ~60 s each, and the whole sweep has to fit about 25 minutes of device time.
step mux 3,4,5,6
step sglang-chunked-2048-nomix 2,3,4
step sglang 2,3,4
step mux-fixed-48 3,4,5
step sglang-chunked-512-nomix 2,3,4
step sglang-chunked-2048 1
step sglang-pdmux 1
# Session 4: settle both claims first. Every chunked budget at 1.75: if all fail there, best
# chunked < 1.75 and a mux pass at 3.5 makes the 2x claim hold; the mux and the fixed partition
# at 3.5 and 3.75 (3.25 only when 3.5 fails) decide "mux >= best fixed".
step mux 3.5,3.75
step_down mux 3.5 3.25
step sglang-chunked-2048-nomix 1.75
step mux-fixed-48 3.5,3.75
step_down mux-fixed-48 3.5 3.25
step sglang-chunked-512-nomix 1.75
step sglang 1.75
# Session 4b: both chunked budgets passed 1.75 and the mux [3.5, 3.75): the 2x claim sits at the
# edge (1.75x-2.14x). A pass at 1.875 decides it against the mux (3.75 <= 2 x 1.875).
step sglang-chunked-512-nomix 1.875
step sglang-chunked-2048-nomix 1.875
step mux 3.625
# "best fixed partition": the sweep so far had D48 only; D32 gives prefill 100 SMs, D64 68.
step mux-fixed-32 3.5,3.75
step mux-fixed-64 3.5
# Session 3: the baselines all failed at 2 and the mux passed 3, so 1.5 decides "mux >= 2x best chunked".
step sglang-chunked-2048-nomix 1.5
step sglang-chunked-512-nomix 1.5
step sglang 1.5
step_down mux 3 2
step_down sglang-chunked-2048-nomix 2 1
step_down sglang 2 1
step_down mux-fixed-48 3 2
step_down sglang-chunked-512-nomix 2 1
python -m bench.report "$OUT" > "$OUT/report.md" && python -m bench.plots "$OUT" >/dev/null 2>&1
tail -n 25 "$OUT/report.md"
echo "sweep: pieces done so far are in $OUT (re-run to continue; finished points are skipped)"
