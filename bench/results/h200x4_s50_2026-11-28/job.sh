#!/bin/bash
# Issue 44's GPU items on one 4-GPU lease, run from a copy of the tree in /tmp/t in the background with
# an end time (epoch) and polled; results in /tmp/res:
#   (setsid nohup bash /tmp/t/bench/plans/issue44_x4.sh END > /tmp/job.log 2>&1 < /dev/null &)
# 4 x H200 (what an nvidia-h100-x4 call got in sessions 48-49):
#   GPUs 0, 3: the Llama-3.1-70B shape's TP-2 table (lease.sh table70_tp2: solo prefill cells on 0,
#              contention cells on 3, merged, fitted, checked; ~10 minutes by the plan's estimate), then
#              the 70B at TP 2 with it for one point (smoke70_tp2: its start and KV pool, for the
#              goodput plan, issue44_70b_x4.sh's H200 branch).
#   GPUs 1, 2: the 8B shape's goodput at TP 2 with the hybrid, capped conversation at TBT 50, bisected
#              (multi_gpu.sh serving; the issue's "TP goodput" for its 20-minute run), then SIGTERM under
#              load 3 times at that rate (lease.sh tp2_sigterms).
# 4 x H100: the 70B at TP 4 on the capped conversation (issue44_70b_x4.sh capped).
# The 20-minute TP run itself needs ~25 minutes of two GPUs after the install: a lease of its own.
# Session 49 ran the plan before this one (the greedy check at TP 2 with the hybrid, rank kills,
# --dp-size 2 against one replica): bench/results/h200x4_s49_2026-11-28/job.sh.
END=${1:?END epoch}
source /tmp/t/bench/plans/lease.sh
nvidia-smi -L | grep -q H200 || exec bash /tmp/t/bench/plans/issue44_70b_x4.sh "$END" capped
tp2_sigterms 1,2 "$(cores_for 4 1),$(cores_for 4 2)" &
table70_tp2 0 3
[ "$(left)" -gt 420 ] && grep -q "" $R/llama-3.1-70b__nvidia-h200__fa3__tp2/fit.json 2> /dev/null \
    && smoke70_tp2 0,3 "$(cores_for 4 0),$(cores_for 4 3)"
wait
echo done > $R/done
