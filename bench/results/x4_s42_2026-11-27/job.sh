#!/bin/bash
# What ran on the 4 x H100 lease of session 42 (from a copy of the tree in /tmp/t; END = the lease's
# start + 1705 s). 1. the plan, at commit 1ff2722:
(setsid nohup bash /tmp/t/bench/plans/issue43_x4.sh $END > /tmp/job.log 2>&1 < /dev/null &)
# 2. at 17:18, GPUs 2 and 3 free (every system had failed 3.6 and 17 req/s), lower rates:
S="mux-hybrid sglang-chunked-512 sglang-chunked-1024"; L=$(( END - $(date +%s) - 40 ))
TBT_SLO_MS=30 SYSTEMS="$S" bash bench/plans/per_gpu.sh 2 bash bench/plans/fa3_conv8k_sweep.sh /tmp/res/cap30lo 2.4,3 $L &
TBT_SLO_MS=30 CLIENT_PROCS=12 WORKLOAD=code SYSTEMS="$S" bash bench/plans/per_gpu.sh 3 \
    bash bench/plans/fa3_conv8k_sweep.sh /tmp/res/code30lo 12,14.5 $L &
# 3. at 17:27, the token check again on GPU 1 (the plan's run could not write its result: no folder)
mkdir -p /tmp/res/corr
CUDA_VISIBLE_DEVICES=1 taskset -c 16-31 timeout 380 python tests/gpu/e2e_correctness.py --model-dir /tmp/tinyckpt \
    --burst --no-logprobs --port 31000 --out /tmp/res/corr/correctness.json --logdir /tmp/res/corr \
    --mux-args "--mux-policy hybrid --mux-ttft-slo-ms 20 --mux-ttft-ms-per-token 0.1" --common-args "--cuda-graph-max-bs 16"
