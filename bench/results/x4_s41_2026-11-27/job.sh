#!/bin/bash
# session 41 device chain on a 4-GPU host, run from a copy of the tree in /tmp/t; END = epoch by which all must end.
# GPU 0: the Llama-3.1-70B shape's table at TP (one rank's slice on one GPU: TP 2 on an H200, TP 4 on an H100).
# GPUs 1-3: issue 43 cells, each running all its systems on its one GPU (per_gpu.sh: 16 cores, own port).
END=${1:?END}
cd /tmp/t && source .gpu/env.sh
R=/tmp/res; mkdir -p $R
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,uuid,memory.used --format=csv > $R/host0.txt
nvidia-smi -L | grep -q H200 && TP=2 || TP=4
cell() {  # cell GPU NAME RATES [ENV...]: fa3_conv8k_sweep.sh on that GPU with the time left less 40 s
    local g=$1 n=$2 r=$3; shift 3
    env "$@" bash bench/plans/per_gpu.sh $g bash bench/plans/fa3_conv8k_sweep.sh $R/$n $r $(( $(left) - 40 )) > $R/$n.log 2>&1
}
C3="mux-hybrid sglang-chunked-1024 sglang-chunked-512"
cell 1 sharegpt 60,66,72,78 CLIENT_PROCS=12 WORKLOAD=sharegpt SYSTEMS="$C3" &
cell 2 cap30 3.3,3.6,4,4.4 TBT_SLO_MS=30 SYSTEMS="$C3" &
cell 3 code30 17,18.5,20,22 TBT_SLO_MS=30 CLIENT_PROCS=12 WORKLOAD=code SYSTEMS="$C3" &
T=$R/llama-3.1-70b_tp$TP
bash bench/plans/per_gpu.sh 0 timeout $(( $(left) - 30 )) python -m profiling.run \
    --model-config launch/models/llama-3.1-70b/config.json --tp-size $TP --grid coarse+solo --no-fit \
    --time-budget-s $(( $(left) - 60 )) --out $T > $R/table.log 2>&1
wait
echo done > $R/done
