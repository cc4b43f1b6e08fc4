#!/bin/bash
# Issue 43's cells still open, on one 4-GPU lease (nvidia-h100-x4 / nvidia-h200-x4), one cell per
# GPU, run from a copy of the tree in /tmp/t in the background with an end time (epoch) and polled;
# results in /tmp/res:
#   (setsid nohup bash /tmp/t/bench/plans/issue43_x4.sh END > /tmp/job.log 2>&1 < /dev/null &)
# Every cell bisects each system's goodput (search:LO,HI, +-5 %: the bound), the hybrid
# first, then chunked 1024 and 512 + mixed, all on the cell's one GPU. A host's speed is not known
# in advance (session 42's H100 reached 40-70 % of the simulator's rates for every system), so each
# bracket runs from ~0.6x to ~1.1x the simulator's prediction (bench/results/x4_s41_2026-11-27/sim/).
# Three systems' searches take ~20-25 minutes: about what a lease leaves after the install.
# H100: the TBT-30 column, one cell per GPU: the capped conversation (session 43: 0.83x, bisected;
#       now with the fused budget's stalls left out of its quantile), code (session 42: level on a 21 %
#       grid), sharegpt and chat-1k (neither served with the hybrid on an H100).
# H200: sharegpt at TBT 50 (session 41: 60 against 66 on a 10 % grid) and 30 (not bracketed), the
#       capped conversation at TBT 50 with seed 1 (not bracketed), chat-1k at TBT 50, after the token
#       check with the default policy on GPU 3 (--burst: a preemption, cut prompts' rests fused).
# Each part runs through per_gpu.sh (its GPU, 16 cores, port 30000 + 1000 x GPU).
# Session 42 ran the plan before this one (reliability, token check, TBT 30 at fixed rates):
# bench/results/x4_s42_2026-11-27/job.sh.
END=${1:?END epoch}
cd /tmp/t && source .gpu/env.sh
R=/tmp/res; mkdir -p $R
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,uuid --format=csv > $R/host0.txt
nvidia-smi -L | grep -q H200 && H200=1 || H200=
cell() {  # cell GPU NAME LO,HI [ENV...]
    local g=$1 n=$2 r=$3; shift 3
    env SYSTEMS="mux-hybrid sglang-chunked-1024 sglang-chunked-512" "$@" bash bench/plans/per_gpu.sh "$g" \
        bash bench/plans/fa3_conv8k_sweep.sh $R/$n "search:$r" $(( $(left) - 40 )) > $R/$n.log 2>&1
}
corr() {  # the token check on GPU 3, then that GPU's cell
    python -m sglang_mux.testing.checkpoint --config launch/models/tiny-llama/config.json --out /tmp/tinyckpt
    CUDA_VISIBLE_DEVICES=3 taskset -c 48-63 timeout 420 python tests/gpu/e2e_correctness.py --model-dir /tmp/tinyckpt \
        --burst --no-logprobs --port 33000 --out $R/corr/correctness.json --logdir $R/corr \
        --mux-args "--mux-ttft-slo-ms 20 --mux-ttft-ms-per-token 0.1" --common-args "--cuda-graph-max-bs 16" \
        > $R/corr.log 2>&1
    cell 3 "$@"
}
if [ -z "$H200" ]; then
    cell 0 cap30 2.4,4.4 TBT_SLO_MS=30 &
    cell 1 code30 12,20 CLIENT_PROCS=12 WORKLOAD=code TBT_SLO_MS=30 &
    cell 2 sharegpt30 33,60 CLIENT_PROCS=12 WORKLOAD=sharegpt TBT_SLO_MS=30 &
    cell 3 chat30 12,22 CLIENT_PROCS=12 WORKLOAD=chat-1k TBT_SLO_MS=30 &
else
    cell 0 sharegpt50 55,70 CLIENT_PROCS=12 WORKLOAD=sharegpt &
    cell 1 sharegpt30 50,72 CLIENT_PROCS=12 WORKLOAD=sharegpt TBT_SLO_MS=30 &
    cell 2 cap_s1 3,5 SEED=1 &
    corr chat50 14,26 CLIENT_PROCS=12 WORKLOAD=chat-1k &
fi
wait
echo done > $R/done
