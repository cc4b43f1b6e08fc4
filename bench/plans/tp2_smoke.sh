#!/bin/bash
# Issue 44's first step on a two-GPU host (nvidia-h100-x2 / nvidia-h200-x2): the mux at --tp-size 2.
#  1. Greedy outputs against plain SGLang at the same TP = 2 (tests/gpu/e2e_correctness.py on the
#     tiny random Llama, 4 heads a rank: 40 prompts of 16 to 32K tokens, 6 four-turn sessions, a
#     preemption burst) -> OUT/correctness.json, both servers' logs.
#  2. The Llama-3.1-8B shape (dummy weights) at TP = 2 serving the capped conversation for a short
#     point, mux and chunked 512 + mixed: does it start, serve and stop without a hang, what the
#     estimator falls back to without a TP table -> OUT/serving/.
#   bash bench/plans/tp2_smoke.sh OUT [seconds, default 540]
# PARTS (default "correctness serving") picks some. Each wants its own <= 10-minute call: on 2 x H200
# (session 38) the mux's TP-2 tiny server took 2.5 minutes to start (its first decode graph capture
# alone 83 s) and served the whole check; plain SGLang's was cut by the 276 s left to the part.
set -u
OUT=${1:?usage: tp2_smoke.sh OUT [seconds]}
BUDGET=${2:-540}
source "$(dirname "$0")/one_host.sh"
mkdir -p "$OUT"
gpu_free || exit 2
nvidia-smi --query-gpu=name,uuid --format=csv,noheader > "$OUT/host.txt"
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
PARTS=${PARTS:-correctness serving}
has() { [[ " $PARTS " == *" $1 "* ]]; }
if has correctness; then
python -m sglang_mux.testing.checkpoint --config launch/models/tiny-llama/config.json --out /tmp/tinyckpt
timeout $(( $(left) - $(has serving && echo 240 || echo 20) )) python tests/gpu/e2e_correctness.py --model-dir /tmp/tinyckpt --burst \
    --out "$OUT/correctness.json" --logdir "$OUT" \
    --mux-args "--mux-ttft-slo-ms 20 --mux-ttft-ms-per-token 0.1" \
    --common-args "--tp-size 2 --cuda-graph-max-bs 16" | tail -n 12
echo "correctness rc=${PIPESTATUS[0]}"
gpu_free || exit 2
fi
has serving || exit 0
l=$(left)
[ "$l" -lt 200 ] && { echo "budget: ${l}s left, no serving point"; exit 0; }
SA="--sampling-backend pytorch --grammar-backend none --enable-metrics --tp-size 2"
python -m bench.run --systems "${SYSTEMS:-mux,sglang-chunked-512}" --rates "${RATES:-4}" --seed 0 \
    --workload conversation --arrival poisson --input-cap 8000 --duration-s 30 --drain-s 20 \
    --out "$OUT/serving" --model-path launch/models/llama-3.1-8b --server-args "$SA" --no-progress \
    --startup-estimate-s 150 --time-budget-s "$(( l - 20 ))" 2>&1 | grep -v "requests over" | tail -n 5
python -m bench.report "$OUT/serving" > "$OUT/serving/report.md" 2>&1
