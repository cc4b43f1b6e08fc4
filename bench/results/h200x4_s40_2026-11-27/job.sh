#!/bin/bash
# session 40 device chain on a 4-GPU host, run from a copy of the tree in /tmp/t; END = epoch by which all must end.
# GPUs 0,1 (cores 0-31): TP-2 greedy-output check, then the all-reduce profile, then one cell on each.
# GPUs 2 and 3: one cell each from the start. Every cell runs all its systems on its one GPU.
END=${1:?END}
cd /tmp/t && source .gpu/env.sh
R=/tmp/res; mkdir -p $R
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,uuid,memory.used --format=csv > $R/host0.txt
nvidia-smi -L | grep -q H200 && H200=1 || H200=
cell() {  # cell GPU NAME RATES [ENV...]: fa3_conv8k_sweep.sh on that GPU with the time left less 40 s
    local g=$1 n=$2 r=$3; shift 3
    env "$@" bash bench/plans/per_gpu.sh $g bash bench/plans/fa3_conv8k_sweep.sh $R/$n $r $(( $(left) - 40 )) > $R/$n.log 2>&1
}
C3="mux-hybrid sglang-chunked-1024 sglang-chunked-512"
if [ -z "$H200" ]; then   # H100: issue 43's TBT-30 cells after the three changes
  cell 2 cap30 3.6,4,4.4 TBT_SLO_MS=30 SYSTEMS="mux-hybrid mux-hybrid-fq98 sglang-chunked-512 sglang-chunked-1024" &
  cell 3 code30 17,18.5,20,22 TBT_SLO_MS=30 CLIENT_PROCS=12 WORKLOAD=code SYSTEMS="mux-hybrid sglang-chunked-512 sglang-chunked-1024" &
else                      # H200: the code cell with the fused-price fix; seed 1 capped
  cell 2 code 18,20,22 CLIENT_PROCS=12 WORKLOAD=code SYSTEMS="$C3" &
  cell 3 cap_s1 3,3.3,3.6,4 SEED=1 SYSTEMS="$C3" &
fi
( export CUDA_VISIBLE_DEVICES=0,1
  taskset -c 0-31 env PARTS=correctness bash bench/plans/multi_gpu.sh $R/mg 570 > $R/mg.log 2>&1
  taskset -c 0-31 env PARTS=allreduce bash bench/plans/multi_gpu.sh $R/ar 170 > $R/ar.log 2>&1 )
echo "cells on 0,1 from $(date +%s), $(left) s left" > $R/cells01.txt
if [ -z "$H200" ]; then   # H100: seed 1 at TBT 50
  cell 0 cap_s1 2.75,3,3.3 SEED=1 SYSTEMS="$C3" &
  cell 1 code_s1 18,20,22 SEED=1 CLIENT_PROCS=12 WORKLOAD=code SYSTEMS="$C3" &
else
  cell 0 code_s1 18,20,22 SEED=1 CLIENT_PROCS=12 WORKLOAD=code SYSTEMS="$C3" &
  cell 1 sharegpt 60,66 CLIENT_PROCS=12 WORKLOAD=sharegpt SYSTEMS="$C3" &
fi
wait
echo done > $R/done
