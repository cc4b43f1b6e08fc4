#!/bin/bash
# Issue 43's must-shows still open, on one 4-GPU lease (nvidia-h100-x4 / nvidia-h200-x4), run from a
# copy of the tree in /tmp/t in the background with an end time (epoch) and polled; results in /tmp/res:
#   (setsid nohup bash /tmp/t/bench/plans/issue43_x4.sh END > /tmp/job.log 2>&1 < /dev/null &)
# GPU 0: the reliability soak with the hybrid at the capped conversation's goodput (H100 4.4, H200 4.8
#        req/s at TBT 50), its arrivals ending ~5.5 minutes before END (drain, report), then a SIGTERM
#        under load. About 20 minutes of arrivals fit a lease with the install and the start.
# GPU 1: SIGTERM under load 5 times (a fresh hybrid server each), then the token-identity check with
#        fused iterations in the mix (tiny random Llama, --burst: a preemption; no logprobs, as chunks mix);
#        then fused iterations profiled (bench.prefill_mixed --fused: the grid, 60 random batches).
# GPUs 2, 3: on an H100 the TBT-30 cells (capped conversation, code); on an H200 sharegpt at TBT 50
#        in finer steps (60, 63, 66: session 41 found 60 against 66) and sharegpt at TBT 30 with
#        chunked 1024 as well, to bracket it.
# Each part runs through per_gpu.sh (its GPU, 16 cores, port 30000 + 1000 x GPU); every system of a
# cell on its one GPU.
END=${1:?END epoch}
cd /tmp/t && source .gpu/env.sh
R=/tmp/res; mkdir -p $R
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,uuid --format=csv > $R/host0.txt
nvidia-smi -L | grep -q H200 && H200=1 || H200=
cell() {  # cell GPU NAME RATES [ENV...]
    local g=$1 n=$2 r=$3; shift 3
    env "$@" bash bench/plans/per_gpu.sh "$g" bash bench/plans/fa3_conv8k_sweep.sh $R/$n "$r" $(( $(left) - 40 )) \
        > $R/$n.log 2>&1
}
C3="mux-hybrid sglang-chunked-1024 sglang-chunked-512"
if [ -z "$H200" ]; then SOAK_RATE=4.4
    cell 2 cap30 3.6,4,4.4,4.8 TBT_SLO_MS=30 SYSTEMS="$C3" &
    cell 3 code30 17,18.5,20,22 TBT_SLO_MS=30 CLIENT_PROCS=12 WORKLOAD=code SYSTEMS="$C3" &
else SOAK_RATE=4.8
    cell 2 sharegpt 60,63,66 CLIENT_PROCS=12 WORKLOAD=sharegpt SYSTEMS="mux-hybrid sglang-chunked-1024" &
    cell 3 sharegpt30 55,60,66,72 TBT_SLO_MS=30 CLIENT_PROCS=12 WORKLOAD=sharegpt SYSTEMS="$C3" &
fi
HYB="--mux-policy hybrid"  # reliability.sh's servers (SERVER_ARGS); the cells name their systems
( rel() { SERVER_ARGS=$HYB REL_OUT=$R/rel bash bench/plans/per_gpu.sh 0 bash bench/plans/reliability.sh "$@"; }
  rel serve > $R/rel_serve.log 2>&1
  rel soak $SOAK_RATE $(( ($(left) - 330) / 60 )) > $R/rel_soak.log 2>&1   # arrivals end ~5.5 min early: drain, report, SIGTERM
  rel wait $(( $(left) - 120 )) > $R/rel_wait.log 2>&1
  rel end $SOAK_RATE 60 > $R/rel_end.log 2>&1 ) &
( SERVER_ARGS=$HYB REL_OUT=$R/sig bash bench/plans/per_gpu.sh 1 bash bench/plans/reliability.sh sigterms 5 $SOAK_RATE > $R/sig.log 2>&1
  python -m sglang_mux.testing.checkpoint --config launch/models/tiny-llama/config.json --out /tmp/tinyckpt
  CUDA_VISIBLE_DEVICES=1 taskset -c 16-31 timeout $(( $(left) - 20 )) python tests/gpu/e2e_correctness.py \
      --model-dir /tmp/tinyckpt --burst --no-logprobs --port 31000 --out $R/corr/correctness.json --logdir $R/corr \
      --mux-args "--mux-policy hybrid --mux-ttft-slo-ms 20 --mux-ttft-ms-per-token 0.1" \
      --common-args "--cuda-graph-max-bs 16" > $R/corr.log 2>&1
  # fused rows for item 2's fitted price: the grid and random batches, from this one host
  T=llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3; [ -n "$H200" ] && T=llama-3.1-8b__nvidia-h200__fa3
  mkdir -p $R/fused
  for a in "--fused-grid --out $R/fused/grid.json" "--batches 60 --seed 2 --out $R/fused/random_seed2.json"; do
      timeout $(( $(left) - 20 )) bash bench/plans/per_gpu.sh 1 python -m bench.prefill_mixed --fused $a \
          --model-config launch/models/llama-3.1-8b/config.json --table $T --attention-backend fa3 >> $R/fused.log 2>&1
  done ) &
wait
echo done > $R/done
