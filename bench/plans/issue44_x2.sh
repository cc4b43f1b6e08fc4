#!/bin/bash
# Issue 44's GPU items on one 2-GPU lease, run from a copy of the tree in /tmp/t in the background with
# an end time (epoch) and polled; results in /tmp/res:
#   (setsid nohup bash /tmp/t/bench/plans/issue44_x2.sh END > /tmp/job.log 2>&1 < /dev/null &)
# H100 pair: both GPUs: the 8B shape's goodput at TP 2 with the hybrid, then SIGTERM under load 3
#   times at it (lease.sh tp2_sigterms).
# H200 pair: the Llama-3.1-70B shape at TP 2 on the capped conversation at TBT 100: the hybrid and
#   chunked 512, its contender, on the same rates on 150-s points (lease.sh pair70; why: the
#   4-GPU plan issue44_70b_x4.sh, which runs each system on a pair of its own).
# On 4 GPUs: issue44_70b_x4.sh (the whole 70B cell) and issue44_x4.sh (the 20-minute TP run beside the
# 70B's uncapped cell). Session 50 measured the 8B's TP-2 goodput and SIGTERMs on H200s
# (bench/results/h200x4_s50_2026-11-28/); the H100 branch measures them on H100s.
END=${1:?END epoch}
source "$(dirname "$0")/lease.sh"
if nvidia-smi -L | grep -q H200; then
    DURATION_S=150 pair70 0,1 "$(cores_for 1 0)" cap70 mux-hybrid:0.65,0.7,0.75,0.8 \
        sglang-chunked-512:0.65,0.7,0.75,0.8
else
    tp2_sigterms 0,1 "$(cores_for 1 0)" &
fi
wait
echo done > $R/done
