#!/bin/bash
# Session 35's device job (issue 43): the overlapped fused streak. Run from a copy of the tree in /tmp/tree.
set -x
source .gpu/env.sh
mkdir -p /tmp/c/corr
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv > /tmp/c/host_job.txt
python -m sglang_mux.testing.checkpoint --config launch/models/tiny-llama/config.json --out /tmp/tinyckpt
timeout 420 python tests/gpu/e2e_correctness.py --model-dir /tmp/tinyckpt --burst --no-logprobs \
    --out /tmp/c/corr/correctness.json --logdir /tmp/c/corr \
    --mux-args "--mux-policy hybrid --mux-ttft-slo-ms 20 --mux-ttft-ms-per-token 0.1" --common-args "--cuda-graph-max-bs 16" \
    > /tmp/c/corr/driver.log 2>&1
WORKLOAD=code SYSTEMS="mux-hybrid-graph sglang-chunked-1024" bash bench/plans/fa3_conv8k_sweep.sh /tmp/c/code 20,22,24 1150
