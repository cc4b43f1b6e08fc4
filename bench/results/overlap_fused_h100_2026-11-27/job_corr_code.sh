#!/bin/bash
set -x
source .gpu/env.sh
while [ ! -f /tmp/c_done ]; do sleep 5; done
mkdir -p /tmp/c/corr2
timeout 420 python tests/gpu/e2e_correctness.py --model-dir /tmp/tinyckpt --burst --no-logprobs \
    --out /tmp/c/corr2/correctness.json --logdir /tmp/c/corr2 \
    --mux-args "--mux-policy hybrid --mux-ttft-slo-ms 20 --mux-ttft-ms-per-token 0.1" --common-args "--cuda-graph-max-bs 16" \
    > /tmp/c/corr2/driver.log 2>&1
rm -f /tmp/c/code/mux-hybrid-graph__start.json
WORKLOAD=code SYSTEMS="mux-hybrid-graph" bash bench/plans/fa3_conv8k_sweep.sh /tmp/c/code 20,22,24 900
echo done > /tmp/c2_done
