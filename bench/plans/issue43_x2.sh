#!/bin/bash
# Issue 43's cells on one 2-GPU lease (nvidia-h100-x2 / nvidia-h200-x2), one cell per GPU with 16
# vCPUs each (per_gpu.sh: a lone GPU's share), run from a copy of the tree in /tmp/t in the background
# with an end time (epoch) and polled; results in /tmp/res:
#   (setsid nohup bash /tmp/t/bench/plans/issue43_x2.sh END > /tmp/job.log 2>&1 < /dev/null &)
# Every system of a sharegpt cell gets 4 tokenizer workers ($TM4, lease.sh).
# H100: GPU 0 the capped conversation at TBT 30 with the code that drops cuBLAS's slow sizes and
#   prices each captured size (session 47's 4-GPU host: both >= 2.9; session 46's lone H100, older
#   code: hybrid 3.45, chunked 512 3.9), chunked 512 before 1024; GPU 1 sharegpt at TBT 50 (session
#   47, as served: < 50 against 50).
# H200: sharegpt at TBT 30 (session 41: both >= 60, not bracketed) and chat-1k at TBT 50.
# Earlier versions: session 48's (the capped conversation with seed 1, sharegpt as served):
# bench/results/h200x2_s48_2026-11-28/job.sh; session 49 ran its front-end question on a 4-GPU host
# (bench/results/h200x4_s49_2026-11-28/fe.sh).
END=${1:?END epoch}
source /tmp/t/bench/plans/lease.sh
if nvidia-smi -L | grep -q H200; then
    cell 0 sharegpt30 50,72 CLIENT_PROCS=12 WORKLOAD=sharegpt TBT_SLO_MS=30 EXTRA_SA="$TM4" &
    cell 1 chat50 14,26 CLIENT_PROCS=12 WORKLOAD=chat-1k &
else
    cell 0 cap30 3,4.8 TBT_SLO_MS=30 SYSTEMS="mux-hybrid sglang-chunked-512 sglang-chunked-1024" &
    cell 1 sharegpt50 36,66 CLIENT_PROCS=12 WORKLOAD=sharegpt EXTRA_SA="$TM4" &
fi
wait
echo done > $R/done
