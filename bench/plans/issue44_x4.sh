#!/bin/bash
# Issue 44's GPU items on one 4-GPU lease, run from a copy of the tree in /tmp/t in the background with
# an end time (epoch) and polled; results in /tmp/res:
#   (setsid nohup bash /tmp/t/bench/plans/issue44_x4.sh END > /tmp/job.log 2>&1 < /dev/null &)
# GPUs 0, 1 (cores 0-31), one after another: one rank killed 3 times at TP 2 (a TP-2 server starts in
#        ~2.5 minutes), then --disable-mux against plain SGLang at TP 2, pairs while time is left (nothing
#        else serving meanwhile). DP 2 does not fit beside them: a lease of its own, or after the table.
# GPU 2: the Llama-3.1-70B shape's table, one rank's slice: TP 2 on an H200, resumed from session 41's
#        partial table with its skipped cells tried again (prefill now timed in segments); TP 4 on an H100.
# GPU 3: idle. The rank-kill part stops every mux server tree on the host (multi_gpu.sh), so no server
#        may run beside it; the table's harness starts none.
END=${1:?END epoch}
cd /tmp/t && source .gpu/env.sh
R=/tmp/res; mkdir -p $R
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,uuid --format=csv > $R/host0.txt
if nvidia-smi -L | grep -q H200; then
    TP=2; T=$R/llama-3.1-70b_tp2
    cp -r bench/results/x4_s41_2026-11-27/table_70b_tp2_partial "$T"; RETRY=--retry-skipped
else
    TP=4; T=$R/llama-3.1-70b_tp4; RETRY=
fi
bash bench/plans/per_gpu.sh 2 timeout $(( $(left) - 30 )) python -m profiling.run \
    --model-config launch/models/llama-3.1-70b/config.json --tp-size $TP --grid coarse+solo --no-fit $RETRY \
    --time-budget-s $(( $(left) - 60 )) --out "$T" > $R/table.log 2>&1 &
mg() {  # mg PARTS SECONDS [ENV...]: multi_gpu.sh's parts on GPUs 0 and 1
    local parts=$1 s=$2; shift 2
    CUDA_VISIBLE_DEVICES=0,1 taskset -c 0-31 env PARTS="$parts" "$@" bash bench/plans/multi_gpu.sh $R/mg_${parts// /_} "$s" \
        > $R/mg_${parts// /_}.log 2>&1
}
mg rankkill 720 KILLS=3
mg muxoff $(( $(left) - 30 )) PAIRS=2
wait
echo done > $R/done
