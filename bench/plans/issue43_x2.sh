#!/bin/bash
# Issue 43's cells on one 2-GPU lease (nvidia-h100-x2 / nvidia-h200-x2), one cell per GPU with 16
# vCPUs each (per_gpu.sh: a lone GPU's share), run from a copy of the tree in /tmp/t in the background
# with an end time (epoch) and polled; results in /tmp/res:
#   (setsid nohup bash /tmp/t/bench/plans/issue43_x2.sh END [frontend|cells] > /tmp/job.log 2>&1 < /dev/null &)
# frontend (the default): sharegpt at TBT 50 on both GPUs, every system bisected: GPU 0 as served,
#   GPU 1 with --tokenizer-worker-num 4 for every system. Session 48's H200 had both systems fail
#   that cell on a backlog between the scheduler's end of prefill and the client (chunked 1024 at
#   58.5 req/s: 800 ms of a 921-ms median TTFT; bench/results/h200x2_s48_2026-11-28/), where ~10,000
#   tokens/s stream through SGLang's tokenizer manager, one process that also serves HTTP. Each
#   point now records the tokenizer manager's hand-off of the first chunk (ttft_parts: to_tm /
#   to_client) and every server process's busy cores (proc_cpu); GPU 1 says whether more tokenizer
#   workers move the limit back to the GPU, where the systems' ratio means something.
# cells: H100: GPU 0 the capped conversation at TBT 30 with the code that drops cuBLAS's slow sizes
#   (session 47's 4-GPU host: both >= 2.9; session 46's lone H100, older code: hybrid 3.45, chunked
#   512 3.9), chunked 512 before 1024; GPU 1 sharegpt at TBT 50 (session 47: < 50 against 50).
#   H200: sharegpt at TBT 30 (session 41: both >= 60, not bracketed) and chat-1k at TBT 50.
# Session 48 ran this plan's first version (H200: the capped conversation with seed 1, sharegpt):
# bench/results/h200x2_s48_2026-11-28/job.sh.
END=${1:?END epoch}
MODE=${2:-frontend}
source /tmp/t/bench/plans/lease.sh
nvidia-smi -L | grep -q H200 && H200=1 || H200=
case $MODE in
frontend)
    [ -n "$H200" ] && r=54,84 || r=40,76
    cell 0 sharegpt50 $r CLIENT_PROCS=12 WORKLOAD=sharegpt &
    cell 1 sharegpt50_tm4 $r CLIENT_PROCS=12 WORKLOAD=sharegpt EXTRA_SA="--tokenizer-worker-num 4" & ;;
cells)
    if [ -n "$H200" ]; then
        cell 0 sharegpt30 50,72 CLIENT_PROCS=12 WORKLOAD=sharegpt TBT_SLO_MS=30 &
        cell 1 chat50 14,26 CLIENT_PROCS=12 WORKLOAD=chat-1k &
    else
        cell 0 cap30 3,4.8 TBT_SLO_MS=30 SYSTEMS="mux-hybrid sglang-chunked-512 sglang-chunked-1024" &
        cell 1 sharegpt50 36,66 CLIENT_PROCS=12 WORKLOAD=sharegpt &
    fi ;;
*) echo "issue43_x2.sh: mode frontend or cells, got $MODE"; exit 2 ;;
esac
wait
echo done > $R/done
