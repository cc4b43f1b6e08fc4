#!/bin/bash
# Issue 71 on one GPU: the paper's mixed traffic (MuxWise §4.4.3: half sharegpt, half loogle,
# shuffled; `bench.workloads`), seed 0, TBT 50, the length-aware TTFT rule (P99 of TTFT - 0.2 ms x
# prompt tokens <= 2 s, judged with the queue-drift test; bench.run stretches each point to >= 100
# requests). The hybrid with the server's defaults (length-aware TTFT SLO, so preemption and the
# fused yield fire) against chunked 512 + mixed (the simulator's best chunked on long prompts), the
# capped baseline (chunked 2048 + mixed, at most 512 tokens a request a step: bench/capped_prefill.py)
# and the dispatcher (spatial only), each system in turn on this GPU, one server each.
#   bash bench/plans/long_prompts.sh OUT BUDGET_S [RATES | search:LO,HI]
# (search:LO,HI bisects each system's goodput instead, bench.run --search, to +-5 %).
# The caller has sourced .gpu/env.sh. SYSTEMS overrides the list (comma-separated, in order),
# WORKLOAD the workload (default mixed; loogle is the other long-prompt cell).
# The mux systems run at --mem-fraction-static 0.75, the baselines at 0.85: one layer-wise prefill
# of a long prompt needs its activations beside the KV pool, and at 0.85 the mux holds 28,903
# tokens (its log says so and which fraction serves more; 0.75: 84,932 on the second H100), while
# chunked prefill holds one chunk. Served first (2026-12-06) all at 0.85:
# bench/results/long_prompts_h100_2026-12-06/.
# Device time on one H100 (estimated): a start 1-2 min, then at 0.5 req/s 100 requests over 200 s
# and their drain: ~5-6 min a system and a rate. A system that no longer fits BUDGET_S is skipped.
# The simulator's prediction (bench/results/sim_eager_yield_2026-12-06/, H100 FA3 table, the plan's
# own points, the yield at once behind long prompts and the park; first failure's last pass, highest pass):
# mixed, seed 0: the hybrid 0.9, 0.9, the capped baseline < 0.4, 0.6; seed 1: the hybrid 1.0, 1.0,
# the capped baseline 0.6, 0.6; loogle, seed 0: the hybrid 0.5, 0.7, every chunked < 0.2. Served on
# a third H100 before that rule (bench/results/long_prompts_h100_c_2026-12-06/): the hybrid 0.6 ✓,
# 0.7 ✗, 0.8 ✓, the capped baseline 0.7 ✗, each as the simulator then predicted.
set -u
OUT=${1:?usage: long_prompts.sh OUT BUDGET_S [RATES]}; BUDGET=${2:?BUDGET_S}; RATES=${3:-0.5}
case "$RATES" in search:*) PICK=(--search "${RATES#search:}");; *) PICK=(--rates "$RATES");; esac
cd "$(dirname "$0")/../.."
source bench/plans/one_host.sh
one_host "$OUT"
SA="--sampling-backend pytorch --grammar-backend none --enable-metrics"
for sys in $(echo "${SYSTEMS:-sglang-chunked-512,mux-hybrid,sglang-chunked-2048-cap512,mux}" | tr , ' '); do
    l=$(left)
    if [ "$l" -lt 330 ]; then  # a start and one 200-s point with its drain
        echo "budget: ${l}s left, stopping before $sys"; break; fi
    case $sys in mux*) mem=0.75;; *) mem=0.85;; esac
    python -m bench.run --systems "$sys" --workload "${WORKLOAD:-mixed}" "${PICK[@]}" --seed "${SEED:-0}" --arrival poisson \
        --mem-fraction-static "$mem" \
        --tbt-slo-ms 50 --ttft-slo-ms 2000 --ttft-slo-ms-per-token 0.2 --duration-s 45 --drain-s 60 \
        --attention-backend fa3 --server-args "$SA" --no-progress --no-stop-on-fail --time-budget-s "$l" \
        --out "$OUT" 2>&1 | grep -v "requests over" | tail -n 5
done
python -m bench.report "$OUT" > "$OUT/report.md"
echo "done: $OUT/report.md"
