#!/bin/bash
# What issue 16 still lacks, on ONE H100 (bench/results/fa3_h200_all10_s24/README.md has the rest):
#  1. --disable-mux within 2 % of plain SGLang: one pair of runs cannot show it, because two plain
#     SGLang runs on one H100 were 2.1 % apart (bench/results/mux_off_tput_fa3_h100_aba/ (commit 7d1edf5)). PAIRS
#     (default 3) pairs of ShareGPT-like points at 100 req/s, the order alternating; the median
#     mux-off / SGLang output tok/s ratio goes to OUT/muxoff/ratios.json.
#  2. Greedy outputs: 76/79 identical on FA3, the 3 others at near-ties. The same check with a
#     control, plain SGLang with other batches (--max-running-requests 8) against the reference:
#     does SGLang alone break near-ties as often? OUT/correctness.json ("control").
#  3. The estimator in serving with the γ-per-partition H100 table: the mux alone on the capped
#     conversation at 4, 4.5 and bench.timeline_profile per point (OUT/serving/profile_mux_*.json).
# PARTS (default "muxoff correctness serving") picks some of them: PARTS=serving on an H200 is the
# in-serving check there. Ran in session 25 on an H100: bench/results/h100_close16_s25/; its
# serving part in session 26 on an H200 (bench/results/h200_close16_s26/ (commit 22880a0)) and an H100 (h100_offset_s26/),
# in session 27 on an H100 with the guard's host scale (h100_hostscale_s27/), in session 31 on an
# H200 with it (h200_hostscale_s31/).
# About 25 minutes; in the background after the install, polled, as the sweep plans say:
#   (setsid nohup bash -c 'bash bench/plans/h100_close16.sh /tmp/c16 1500; echo $? > /tmp/c16_done' \
#       > /tmp/c16.log 2>&1 < /dev/null &)
set -u
OUT=${1:?usage: h100_close16.sh OUT [seconds]}
BUDGET=${2:-1500}
source "$(dirname "$0")/one_host.sh"
one_host "$OUT"
SA="--sampling-backend pytorch --grammar-backend none"
C=(--workload sharegpt --rates 100 --duration-s 12 --drain-s 60 --model-path launch/models/llama-3.1-8b
   --server-args "$SA" --no-progress)
PARTS=${PARTS:-muxoff correctness serving}
has() { [[ " $PARTS " == *" $1 "* ]]; }
has muxoff && muxoff_pairs "$OUT/muxoff" "${PAIRS:-3}" 400 "${C[@]}"
if has correctness && [ "$(left)" -gt 600 ]; then
    python -m sglang_mux.testing.checkpoint --config launch/models/tiny-llama/config.json --out /tmp/tinyckpt
    timeout $(( $(left) - 300 )) python tests/gpu/e2e_correctness.py --model-dir /tmp/tinyckpt --burst \
        --out "$OUT/correctness.json" --logdir "$OUT" --control-args "--max-running-requests 8" \
        --mux-args "--mux-ttft-slo-ms 20 --mux-ttft-ms-per-token 0.1" --common-args "--cuda-graph-max-bs 16" \
        | tail -n 12
fi
has serving || exit 0
RATES=${SERVING_RATES:-4,4.5}
SYSTEMS=mux bash "$(dirname "$0")/fa3_conv8k_sweep.sh" "$OUT/serving" "$RATES" "$(left)"
for r in ${RATES//,/ }; do
    python -m bench.timeline_profile "$OUT/serving" --system mux --rate "$r" --json "$OUT/serving/profile_mux_$r.json" \
        > "$OUT/serving/profile_$r.txt" 2>&1 && echo "profile: $OUT/serving/profile_mux_$r.json"
done
