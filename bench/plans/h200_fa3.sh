#!/bin/bash
# Issue 16's H200 capped-conversation comparison in one machine, for the session that gets an H200
# (status says which card; any kind may come up H100 or H200). Refuses to run on another GPU.
# It runs all ten systems of bench/plans/fa3_conv8k_sweep.sh at 4.5, 5, then bench.timeline_profile
# per mux point (the estimator in serving). Session 24 (bench/results/fa3_h200_all10_s24/): mux,
# chunked 1024 and 512 + mixed 4.5 each, the rest < 4.5 (1.0x); with 1400 s the tenth system (plain
# SGLang) did not fit and was run right after: give it 1500 s (about 24 minutes in all).
#   bash bench/plans/h200_fa3.sh OUT [seconds available, default 1500]
# SEED=1 SYSTEMS="mux sglang-chunked-1024 sglang-chunked-512" RATES=4,4.5,5 runs the second
# seed of the two that decide it instead (~14 minutes).
# Run it in the background after the install and poll, as the sweep plan says; bring back OUT.
set -u
OUT=${1:?usage: h200_fa3.sh OUT [seconds]}
BUDGET=${2:-1500}
source "$(dirname "$0")/one_host.sh"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) ;; *) echo "this plan is for an H200; this is $gpu"; exit 2 ;; esac
one_host "$OUT"
RATES=${RATES:-4.5,5}
bash "$(dirname "$0")/fa3_conv8k_sweep.sh" "$OUT/sweep" "$RATES" "$(left)"
for r in ${RATES//,/ }; do
    python -m bench.timeline_profile "$OUT/sweep" --system mux --rate "$r" --json "$OUT/sweep/profile_mux_$r.json" \
        > /dev/null 2>&1 && echo "profile: $OUT/sweep/profile_mux_$r.json"
done
