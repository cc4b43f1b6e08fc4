#!/bin/bash
# Issue 44's GPU items on one 2-GPU lease, run from a copy of the tree in /tmp/t in the background with
# an end time (epoch) and polled; results in /tmp/res:
#   (setsid nohup bash /tmp/t/bench/plans/issue44_x2.sh END > /tmp/job.log 2>&1 < /dev/null &)
# H100 pair: both GPUs: the 8B shape's goodput at TP 2 with the hybrid, then SIGTERM under load 3
#   times at it (lease.sh tp2_sigterms).
# H200 pair: the 20-minute run at the TP goodput (lease.sh tp2_soak: the 8B shape at TP 2 with the
#   hybrid at 7.75 req/s, 20 long prompts preempted and disconnected in it, SIGTERM under load at its
#   end; ~24 minutes: start it with END = now + budget_left - 60 (the collection takes ~30 s);
#   install lean, LEAN=1 rechunk_bundle.sh: 6 install calls, not ~20). 20 minutes of arrivals need
#   ~1,700 s of budget left when the last install call starts (TP-2 server start 193 s, the last
#   piece's tail and the SIGTERM ~110 s). Session 55 had ~1,590 (a refused call cost 120 s) and
#   set END by the held clock, which does not bind (a machine past 30 minutes held goes back when
#   the call in flight ends): 15.2 minutes (bench/results/h200x2_s55_2026-11-28/ (commit 4224a3b)). Session 56 had
#   1,720 and got 20.0 minutes (bench/results/h200x2_s56_2026-11-28/). The 70B's
#   capped cell, which this branch served before, is measured (1.0x, bench/results/h200x4_s53_2026-11-28/).
# On 4 GPUs: issue44_70b_x4.sh (the 70B's cells) and issue44_x4.sh (the 20-minute TP run beside the
# 70B's uncapped point). Session 50 measured the 8B's TP-2 goodput and SIGTERMs on H200s
# (bench/results/h200x4_s50_2026-11-28/); the H100 branch measures them on H100s.
END=${1:?END epoch}
source "$(dirname "$0")/lease.sh"
if nvidia-smi -L | grep -q H200; then
    tp2_soak 0,1 "$(cores_for 1 0)" 7.75 20
else
    tp2_sigterms 0,1 "$(cores_for 1 0)" &
fi
wait
echo done > $R/done
