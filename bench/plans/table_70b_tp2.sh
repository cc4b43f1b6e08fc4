#!/bin/bash
# The Llama-3.1-70B shape's TP-2 table (one rank's slice) on one GPU of an H200 host, resumed from
# session 41's partial table with its skipped cells tried again (prefill is timed in segments since);
# run from the repository root:
#   bash bench/plans/table_70b_tp2.sh GPU OUT SECONDS
# OUT resumes where it is (a table directory); else it starts as a copy of the partial table. The TP-4
# table of an H100 ships (contention_tables/llama-3.1-70b__nvidia-h100-80gb-hbm3__fa3__tp4/). Fit and
# check it on a CPU afterwards, with the TP-2 all-reduces beside it:
#   cp bench/results/h200x4_s40_2026-11-27/allreduce/allreduce.json OUT/
#   python -m sglang_mux.estimator fit OUT && python -m sglang_mux.estimator check OUT
set -u
GPU=${1:?usage: table_70b_tp2.sh GPU OUT SECONDS}
OUT=${2:?usage: table_70b_tp2.sh GPU OUT SECONDS}
S=${3:?usage: table_70b_tp2.sh GPU OUT SECONDS}
[ -d "$OUT" ] || cp -r bench/results/x4_s41_2026-11-27/table_70b_tp2_partial "$OUT"
exec bash bench/plans/per_gpu.sh "$GPU" timeout "$S" python -m profiling.run \
    --model-config launch/models/llama-3.1-70b/config.json --tp-size 2 --grid coarse+solo --no-fit --retry-skipped \
    --time-budget-s $(( S - 30 )) --out "$OUT"
