#!/bin/bash
# Issue 44's GPU items on one 4-GPU lease, run from a copy of the tree in /tmp/t in the background with
# an end time (epoch) and polled; results in /tmp/res:
#   (setsid nohup bash /tmp/t/bench/plans/issue44_x4.sh END > /tmp/job.log 2>&1 < /dev/null &)
# GPUs 0, 1 (cores 0-31), one after another: one rank killed 3 times at TP 2 (a TP-2 server starts in
#        ~2.5 minutes), then --disable-mux against plain SGLang at TP 2, pairs while time is left.
# GPU 2: H200, the Llama-3.1-70B shape's TP-2 table (table_70b_tp2.sh); H100, code at TBT 30 bisected
#        (issue43_x4.sh's cells; the TP-4 table and its all-reduces ship since session 43).
# GPU 3: one of issue 43's open cells, bisected: H200 sharegpt at TBT 50 (session 41: 0.91 on a 10 %
#        grid), H100 the capped conversation at TBT 30 (session 43: 0.83, bisected).
#        The rank kills stop only their own server (by port and session), so cells may serve beside them.
# Session 43 ran the plan before this one (it profiled the TP-4 table and all-reduces on an H100):
# bench/results/x4_s43_2026-11-27/job.sh.
END=${1:?END epoch}
cd /tmp/t && source .gpu/env.sh
R=/tmp/res; mkdir -p $R
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,uuid --format=csv > $R/host0.txt
cell() {  # cell GPU NAME LO,HI [ENV...]
    local g=$1 n=$2 r=$3; shift 3
    env SYSTEMS="mux-hybrid sglang-chunked-1024 sglang-chunked-512" "$@" bash bench/plans/per_gpu.sh "$g" \
        bash bench/plans/fa3_conv8k_sweep.sh $R/$n "search:$r" $(( $(left) - 40 )) > $R/$n.log 2>&1
}
if nvidia-smi -L | grep -q H200; then
    bash bench/plans/table_70b_tp2.sh 2 $R/llama-3.1-70b_tp2 $(( $(left) - 30 )) > $R/table.log 2>&1 &
    cell 3 sharegpt50 55,70 CLIENT_PROCS=12 WORKLOAD=sharegpt &
else
    cell 2 code30 12,20 TBT_SLO_MS=30 CLIENT_PROCS=12 WORKLOAD=code &
    cell 3 cap30 2.4,4.4 TBT_SLO_MS=30 &
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
