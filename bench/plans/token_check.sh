#!/bin/bash
# Issue 43's token check: the hybrid (default policy) against plain SGLang, greedy, on a random tiny
# Llama checkpoint: 40 prompts of 16 to 32K tokens, 6 four-turn sessions (radix hits), prefills over
# running decodes, then the burst (3 x 30K-token prompts 0.5 s apart, 4 short ones from 8 ms behind each).
#   bash bench/plans/token_check.sh OUT [seconds]      (a GPU of its own: CUDA_VISIBLE_DEVICES, PORT)
# EXTRA_SA: more arguments for both servers, e.g. --tp-size 2 (multi_gpu.sh's correctness part).
# Served on an H200 in session 48: 64/79 identical, the rest at near-ties, 1 preemption, 90 fused
# iterations (bench/results/h200x2_s48_2026-11-28/token_check/).
# Why these SLOs (MUX_ARGS overrides): with TBT 50 and a 20 ms + 0.1 ms/token TTFT SLO, session 46's
# run had no preemption (bench/results/token_check_h100_s46_2026-11-28/): the burst's prompts ran as
# 4,096-token fused chunks, and a layer-wise prefill of the tiny model (4 layers) launched whole.
# The hybrid preempts only a layer-wise prefill, and only for a short batch that would miss its own
# TTFT SLO waiting behind it. On the CPU (the policy with the server's cold-start estimator):
#   - TBT 6 ms: the fused budget (the SLO less the fused host time, at most half of it) is ~3 ms,
#     under a 4,096-token chunk's 3.6-10 ms served, so the burst's long prompts go layer-wise, two
#     of the 4 layers per quantum (14.8 ms estimated for one); short prompts beside decodes still
#     fit a fused chunk (2.7-2.9 ms served for 150-393 tokens), so fused iterations stay in the mix;
#   - TTFT 1 ms + 0.05 ms/token: a 64-token prompt behind a long batch with a layer left misses its
#     4.2 ms waiting and the 30K-token one keeps 1.5 s of slack, so the short batch preempts
#     (with 20 ms + 0.1 ms/token it met its SLO waiting: no preemption).
# Issue 71 asks for a yield too: the burst's second half sends 38K-token prompts, over the
# --mux-layerwise-max-tokens 35000 given here, so they run as fused chunks and a short prompt yields
# into them (the simulator, the tiny model's cold-start estimator: 1 preemption and 1 yield).
# Served on an H100 (bench/results/long_prompts_h100_c_2026-12-06/token_check/): 69/93 identical,
# the rest at near-ties, 23 yields, 0 preemptions: the 30K prompt's layer-wise prefill (~20 ms) was
# done before short prompts sent 30 ms behind it came; they now come 8 ms behind each long prompt.
set -u
OUT=${1:?usage: token_check.sh OUT [seconds]}
mkdir -p "$OUT"
MUX_ARGS=${MUX_ARGS:---mux-tbt-slo-ms 6 --mux-ttft-slo-ms 1 --mux-ttft-ms-per-token 0.05 --mux-layerwise-max-tokens 35000}
python -m sglang_mux.testing.checkpoint --config launch/models/tiny-llama/config.json --out /tmp/tinyckpt
timeout "${2:-420}" python tests/gpu/e2e_correctness.py --model-dir /tmp/tinyckpt --burst --no-logprobs \
    --port "${PORT:-33000}" --out "$OUT/correctness.json" --logdir "$OUT" \
    --mux-args "$MUX_ARGS" --common-args "--cuda-graph-max-bs 16 ${EXTRA_SA:-}"
