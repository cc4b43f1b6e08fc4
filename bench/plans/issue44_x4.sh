#!/bin/bash
# Issue 44's GPU items on one 4-GPU lease, run from a copy of the tree in /tmp/t in the background with
# an end time (epoch) and polled; results in /tmp/res:
#   (setsid nohup bash /tmp/t/bench/plans/issue44_x4.sh END > /tmp/job.log 2>&1 < /dev/null &)
# Start it as soon as the install ends, with END = now + the lease's budget_left - 60 (the collection
# takes ~30 s after END; issue44_x2.sh says what 20 minutes need): the soak needs ~24 minutes (its
# TP-2 server starts in ~150-193 s, then 20 minutes of arrivals, their drain and SIGTERM under load,
# ~110 s).
# 4 x H200 (what an nvidia-h100-x4 call got in sessions 48-50):
#   GPUs 0, 1: the 20-minute run at the TP goodput (lease.sh tp2_soak): the 8B shape at TP 2 with the
#              hybrid at 7.75 req/s (the goodput bisected in bench/results/h200x4_s50_2026-11-28/), 20
#              long prompts preempted and disconnected in it, SIGTERM under load at its end.
#   GPUs 2, 3: the 70B at TP 2 on the uncapped conversation at TBT 100: the hybrid at 0.125 req/s on a
#              600-s point (~16 minutes with the start), against the simulator's prediction (it
#              passes under the TTFT rule scaled to the 70B, 0.8 ms a token, which its server is
#              told, TTFT_K=0.8, and fails under issue 43's 0.2:
#              sim_hybrid_s53_2026-11-28/uncapped_70b.md). On 90-s points (9-14
#              requests) the drift test decides on one or two requests. Chunked prefill's side of
#              that cell needs the two pairs of another lease (issue44_70b_x4.sh END uncapped).
# 4 x H100: the 70B at TP 4 on the capped conversation (issue44_70b_x4.sh capped).
# Session 50 ran the plan before this one (the 70B's TP-2 table, the 8B's TP-2 goodput and SIGTERMs
# at it): bench/results/h200x4_s50_2026-11-28/job.sh.
END=${1:?END epoch}
source "$(dirname "$0")/lease.sh"
nvidia-smi -L | grep -q H200 || exec bash "$(dirname "$0")/issue44_70b_x4.sh" "$END" capped
tp2_soak 0,1 "$(cores_for 4 0),$(cores_for 4 1)" 7.75 20 &
CELL=uncapped DURATION_S=600 TTFT_K=0.8 pair70 2,3 "$(cores_for 4 2),$(cores_for 4 3)" unc70 mux-hybrid:0.125
wait
echo done > $R/done
