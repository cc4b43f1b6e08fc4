#!/bin/bash
# Issue 44's GPU items on one 4-GPU lease, run from a copy of the tree in /tmp/t in the background with
# an end time (epoch) and polled; results in /tmp/res:
#   (setsid nohup bash /tmp/t/bench/plans/issue44_x4.sh END > /tmp/job.log 2>&1 < /dev/null &)
# GPUs 0, 1 (the first half of the cores, whole cores: cores_for): the 8B shape's goodput at TP 2 with
#        the hybrid, capped conversation at TBT 50, bisected (multi_gpu.sh serving; the issue's "TP
#        goodput" for its 20-minute run, not yet measured), then SIGTERM under load 3 times at that
#        rate (reliability.sh sigterms with --tp-size 2: every in-flight request must complete).
# GPUs 2, 3: issue 43's two open cells (lease.sh's cells43: H100, the capped conversation at TBT 30
#        and sharegpt at TBT 50; H200, sharegpt at TBT 30 and chat-1k at TBT 50).
# The 20-minute TP run itself needs ~25 minutes of two GPUs after the install: a lease of its own.
# Session 49 ran the plan before this one (the greedy check at TP 2 with the hybrid, rank kills,
# --dp-size 2 against one replica): bench/results/h200x4_s49_2026-11-28/job.sh.
END=${1:?END epoch}
source /tmp/t/bench/plans/lease.sh
tp2_sigterms 0,1 "$(cores_for 2 0)" &
cells43 2 3
wait
echo done > $R/done
