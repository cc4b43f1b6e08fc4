#!/bin/bash
# Issue 44's GPU items on one 4-GPU lease, run from a copy of the tree in /tmp/t in the background with
# an end time (epoch) and polled; results in /tmp/res:
#   (setsid nohup bash /tmp/t/bench/plans/issue44_x4.sh END > /tmp/job.log 2>&1 < /dev/null &)
# GPUs 0, 1 (the first half of the cores, whole cores: cores_for), one after another: greedy
#        outputs against plain SGLang at TP 2 with the default policy (the hybrid: fused iterations
#        and a preemption; ~9.5 minutes), then one rank killed 3 times (the error that names the
#        rank, fixed in session 43 for a rank lost while receiving requests, not yet rerun).
# GPUs 2, 3 (the second half): --dp-size 2 against one replica on the capped conversation at
#        TBT 50, each bisected (issue 44: >= 1.9x). The 70B's TP-2 table (table_70b_tp2.sh) needs
#        ~80 more minutes of one H200: issue44_x2.sh runs it.
#        Each part stops only its own servers (by port and session), so they serve side by side.
# Session 43 ran the plan before this one (rank kills, --disable-mux pairs, the TP-4 table and its
# all-reduces): bench/results/x4_s43_2026-11-27/job.sh.
END=${1:?END epoch}
source /tmp/t/bench/plans/lease.sh
{ mg 0,1 "$(cores_for 2 0)" corr correctness 570; mg 0,1 "$(cores_for 2 0)" rankkill rankkill $(( $(left) - 30 )) KILLS=3; } &
if nvidia-smi -L | grep -q H200; then  # one H200 replica: 4.8 req/s lone (h200x2_s39), 4.03 with seed 1
    mg 2,3 "$(cores_for 2 1)" dp dp $(( $(left) - 30 )) DP_SEARCH=8,11 ONE_SEARCH=4,6 PORT=32000 &
else
    mg 2,3 "$(cores_for 2 1)" dp dp $(( $(left) - 30 )) DP_SEARCH=7,10 ONE_SEARCH=3.5,5.5 PORT=32000 &
fi
wait
echo done > $R/done
