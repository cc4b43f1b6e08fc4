#!/bin/bash
# Issue 44's Llama-3.1-70B goodput at TP 4 on one 4 x H100 lease: the mux against chunked prefill +
# mixed (512, 1024, then 256, 2048) and plain SGLang, one cell per lease, every system on the same
# four GPUs one after another. Run from a copy of the tree in /tmp/t in the background with an end
# time (epoch) and polled; results in /tmp/res:
#   (setsid nohup bash /tmp/t/bench/plans/issue44_70b_x4.sh END capped > /tmp/job.log 2>&1 < /dev/null &)
# CELL capped: the conversation capped at 8,000 tokens, TBT 100 ms (the paper's SLO for 70B), 45-s
#   points. uncapped: one session in 20, 90-s points, the length-aware TTFT SLO
#   (conv_uncapped_sweep.sh). Each system climbs RATES and stops at its first failure.
# RATES start at the work bound's mixed-chunk rate (bench/results/x4_s43_2026-11-27/work_bound_tp4.md:
#   capped 1.5-2.5 req/s, uncapped 1-1.25, between the all-reduce's eager price and none). The
#   simulator (bench/results/sim_70b_tp4_2026-11-27/) has the capped cell at hybrid 2, chunked 1024
#   1.5, the other chunk sizes failing 1.5: about 7 points in all, so four systems should fit a lease;
#   the uncapped cell at 0.2-0.4 req/s for the hybrid and chunked 512 (1024 and 2048 failing TBT at any
#   rate), noisy at 90-s points.
# A 70B TP-4 server's start is a guess (STARTUP_S=240: the table's harness built the slice and its 108
# decode graphs in 31 s; SGLang's own start and the dummy weights of 4 ranks add to that). Six
# systems do not fit one lease: the first three decide the ratio, the rest run while time is left,
# and a rerun with the same OUT on the same host resumes (host.txt refuses another host).
# An H200 host has no TP-4 work here (the TP-2 table is partial): it resumes that table on GPUs 0 and 1
# instead (lease.sh table70_tp2).
END=${1:?END epoch}
CELL=${2:-capped}
source /tmp/t/bench/plans/lease.sh
if nvidia-smi -L | grep -q H200; then
    table70_tp2 0 1
    echo done > $R/done; exit 0
fi
export CUDA_VISIBLE_DEVICES=0,1,2,3 MODEL=llama-3.1-70b EXTRA_SA="--tp-size 4" STARTUP_S=${STARTUP_S:-240} TBT_SLO_MS=100
SYS=${SYSTEMS:-"mux-hybrid sglang-chunked-512 sglang-chunked-1024 sglang-chunked-2048 sglang-chunked-256 sglang"}
if [ "$CELL" = capped ]; then
    SYSTEMS="$SYS" bash bench/plans/fa3_conv8k_sweep.sh $R/cap70 "${RATES:-1.5,2,2.5,3}" $(( $(left) - 40 )) > $R/cap70.log 2>&1
else
    SYSTEMS="$SYS" RATES=${RATES:-0.2,0.3,0.4,0.5} bash bench/plans/conv_uncapped_sweep.sh $R/unc70 $(( $(left) - 40 )) \
        > $R/unc70.log 2>&1
fi
echo done > $R/done
