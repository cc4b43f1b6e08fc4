#!/bin/bash
# session 39 device chain, run from a copy of the tree in /tmp/t; END = epoch by which all must end
END=${1:?END}
cd /tmp/t && source .gpu/env.sh
R=/tmp/res; mkdir -p $R
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,uuid,memory.used --format=csv > $R/host0.txt
PARTS=correctness bash bench/plans/multi_gpu.sh $R/mg 480 > $R/mg.log 2>&1
PARTS=allreduce bash bench/plans/multi_gpu.sh $R/ar 170 > $R/ar.log 2>&1
B=$(( $(left) - 40 ))
echo "cells budget $B" > $R/cells.txt
if nvidia-smi -L | grep -q H200; then
  (SYSTEMS="mux-hybrid sglang-chunked-1024 sglang-chunked-512 sglang" bash bench/plans/per_gpu.sh 0 \
     bash bench/plans/fa3_conv8k_sweep.sh $R/cap 4.8,5.2 $B > $R/cap.log 2>&1) &
  (CLIENT_PROCS=12 WORKLOAD=code SYSTEMS="mux-hybrid sglang-chunked-1024 sglang-chunked-512" bash bench/plans/per_gpu.sh 1 \
     bash bench/plans/fa3_conv8k_sweep.sh $R/code 20,22 $B > $R/code.log 2>&1) &
else
  (TBT_SLO_MS=30 SYSTEMS="mux-hybrid sglang-chunked-512 sglang-chunked-1024" bash bench/plans/per_gpu.sh 0 \
     bash bench/plans/fa3_conv8k_sweep.sh $R/cap30 3.7,4 $B > $R/cap30.log 2>&1) &
  (TBT_SLO_MS=30 CLIENT_PROCS=12 WORKLOAD=code SYSTEMS="mux-hybrid sglang-chunked-512 sglang-chunked-1024" bash bench/plans/per_gpu.sh 1 \
     bash bench/plans/fa3_conv8k_sweep.sh $R/code30 18.5,20 $B > $R/code30.log 2>&1) &
fi
wait
echo done > $R/done
