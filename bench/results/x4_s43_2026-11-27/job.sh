#!/bin/bash
# Issue 44's GPU items on one 4-GPU lease, run from a copy of the tree in /tmp/t in the background with
# an end time (epoch) and polled; results in /tmp/res:
#   (setsid nohup bash /tmp/t/bench/plans/issue44_x4.sh END > /tmp/job.log 2>&1 < /dev/null &)
# H100 host only, first and alone: all-reduces at TP 4 (the TP-4 table's all-reduce price; the TP-2
#        one is bench/results/h200x4_s40_2026-11-27/allreduce/).
# GPUs 0, 1 (cores 0-31), one after another: one rank killed 3 times at TP 2 (a TP-2 server starts in
#        ~2.5 minutes), then --disable-mux against plain SGLang at TP 2, pairs while time is left.
# GPU 2: the Llama-3.1-70B shape's table, one rank's slice: TP 2 on an H200, resumed from session 41's
#        partial table with its skipped cells tried again (prefill now timed in segments); TP 4 on an H100.
# GPU 3: one of issue 43's open cells, bisected (issue43_x4.sh's): H200 sharegpt at TBT 50 (session 41:
#        0.91 on a 10 % grid), H100 the capped conversation at TBT 30 (session 42: 1.00 on a 25 % grid).
#        The rank kills stop only their own server (by port and session), so the cell may serve beside them.
END=${1:?END epoch}
cd /tmp/t && source .gpu/env.sh
R=/tmp/res; mkdir -p $R
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,uuid --format=csv > $R/host0.txt
git log -1 --format=%H > $R/commit.txt 2> /dev/null
if nvidia-smi -L | grep -q H200; then
    TP=2; T=$R/llama-3.1-70b_tp2
    cp -r bench/results/x4_s41_2026-11-27/table_70b_tp2_partial "$T"; RETRY=--retry-skipped
else
    TP=4; T=$R/llama-3.1-70b_tp4; RETRY=
    PARTS=allreduce AR_TP=4 bash bench/plans/multi_gpu.sh $R/ar_tp4 200 > $R/ar_tp4.log 2>&1
fi
bash bench/plans/per_gpu.sh 2 timeout $(( $(left) - 30 )) python -m profiling.run \
    --model-config launch/models/llama-3.1-70b/config.json --tp-size $TP --grid coarse+solo --no-fit $RETRY \
    --time-budget-s $(( $(left) - 60 )) --out "$T" > $R/table.log 2>&1 &
cell() {  # cell GPU NAME LO,HI [ENV...]
    local g=$1 n=$2 r=$3; shift 3
    env SYSTEMS="mux-hybrid sglang-chunked-1024 sglang-chunked-512" "$@" bash bench/plans/per_gpu.sh "$g" \
        bash bench/plans/fa3_conv8k_sweep.sh $R/$n "search:$r" $(( $(left) - 40 )) > $R/$n.log 2>&1
}
if [ "$TP" = 2 ]; then cell 3 sharegpt50 55,70 CLIENT_PROCS=12 WORKLOAD=sharegpt &
else cell 3 cap30 2.4,4.4 TBT_SLO_MS=30 &
fi
mg() {  # mg PARTS SECONDS [ENV...]: multi_gpu.sh's parts on GPUs 0 and 1
    local parts=$1 s=$2; shift 2
    CUDA_VISIBLE_DEVICES=0,1 taskset -c 0-31 env PARTS="$parts" "$@" bash bench/plans/multi_gpu.sh $R/mg_${parts// /_} "$s" \
        > $R/mg_${parts// /_}.log 2>&1
}
mg rankkill 720 KILLS=3
mg muxoff $(( $(left) - 30 )) PAIRS=2
wait
echo done > $R/done
