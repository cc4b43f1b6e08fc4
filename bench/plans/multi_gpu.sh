#!/bin/bash
# Issue 44 on a two-GPU host (nvidia-h100-x2 / nvidia-h200-x2): the mux at --tp-size 2 and --dp-size 2.
#   bash bench/plans/multi_gpu.sh OUT [seconds, default 540]
# PARTS (default "correctness") picks the parts, each meant for its own <= 10-minute call:
#   correctness  greedy outputs against plain SGLang at the same TP = 2 (token_check.sh: the hybrid
#                with SLOs that make it preempt at TP 2, on the tiny random Llama, 4 query heads a
#                rank: 40 prompts of 16 to 32K tokens, 6 four-turn sessions, a preemption burst)
#                -> OUT/correctness.json, both servers' logs
#   serving      the Llama-3.1-8B shape (dummy weights) at TP = 2, capped conversation, 30-s points
#                at RATES (default 4), or bisected in SEARCH (LO,HI), for SYSTEMS (default
#                mux-hybrid,sglang-chunked-1024), on PORT -> OUT/serving/
#   rankkill     a mux server at TP = 2 (8B shape), 16 requests streaming, SIGKILL to rank 1's
#                scheduler; KILLS times (default 3): the server must exit within 60 s, every request
#                end, the log name the dead process -> OUT/rankkill/kill_<i>.json, server_<i>.log
#   muxoff       --disable-mux against plain SGLang at TP 2, PAIRS (default 2) pairs in alternating
#                order, sharegpt at 100 req/s for 12 s -> OUT/muxoff/ratios.json (issue 44: within 2 %)
#   allreduce    python -m profiling.allreduce at TP AR_TP (default 2), all-reduces 8,192 wide (70B): their time per
#                lane, partition and token count, and whether they stay on their lane's SMs
#                -> OUT/allreduce.json
#   dp           the 8B shape at --dp-size 2 (the hybrid in each replica behind SGLang's data-parallel
#                controller) against one replica, capped conversation at DP_RATES (default 8) and
#                RATES (default 4), or bisected in DP_SEARCH and ONE_SEARCH (LO,HI), on PORT
#                -> OUT/dp/ (summary per system; /metrics carries a dp_rank label per replica)
# The serving and dp parts' points are DURATION_S seconds of arrivals (default 30; session 49's DP
# ratio, 2.38 served against the simulator's 1.89-2.1, turned on 30-s points' drift edges).
# Session 38 (2 x H200, bench/results/tp2_smoke_h200x2_2026-11-27/ (commit 31ede93)): the mux's TP-2 tiny server took
# 2.5 minutes to start (its first decode graph capture alone 83 s) and served the whole check;
# plain SGLang's was cut by the 276 s left to the part, so give correctness a call of its own.
# Session 39 (bench/results/h200x2_s39_2026-11-27/): with 480 s the mux's server hung after 8 s of
# serving (every rank planned alone then; fixed since), and the check waited out the budget. A request
# unanswered for 120 s now ends the check. Two TP-2 servers start in ~4 minutes: give it 570 s.
# On a 4-GPU host (session 40, bench/results/h200x4_s40_2026-11-27/job.sh (in commit f634912)) the TP parts ran on two
# GPUs beside one-GPU cells on the other two:
#   CUDA_VISIBLE_DEVICES=0,1 taskset -c 0-31 env PARTS=correctness bash bench/plans/multi_gpu.sh /tmp/mg 570
#   and per_gpu.sh 2 / per_gpu.sh 3 for the cells (their ports 32000 and 33000; correctness uses 31000)
set -u
OUT=${1:?usage: multi_gpu.sh OUT [seconds]}
BUDGET=${2:-540}
source "$(dirname "$0")/one_host.sh"
mkdir -p "$OUT"
gpu_free || exit 2
nvidia-smi --query-gpu=name,uuid --format=csv,noheader > "$OUT/host.txt"
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
PARTS=${PARTS:-correctness}
has() { [[ " $PARTS " == *" $1 "* ]]; }
SA="--sampling-backend pytorch --grammar-backend none --enable-metrics"
RUN=(--seed 0 --workload conversation --arrival poisson --input-cap 8000 --duration-s "${DURATION_S:-30}" --drain-s 20
     --model-path launch/models/llama-3.1-8b --no-progress --startup-estimate-s 150)

if has correctness; then  # the default policy with SLOs that make it preempt at TP 2 (tests/test_dispatch.py:
    # a rank's layer costs half, so at token_check.sh's TBT 6 ms the long batch launches whole)
    MUX_ARGS="--mux-tbt-slo-ms 3 --mux-ttft-slo-ms 0.5 --mux-ttft-ms-per-token 0.05" EXTRA_SA="--tp-size 2" PORT=31000 \
        bash "$(dirname "$0")/token_check.sh" "$OUT" $(( $(left) - 20 )) | tail -n 12
    echo "correctness rc=${PIPESTATUS[0]}"
    gpu_free || exit 2
fi

pick() { if [ -n "$2" ]; then echo --search "$2"; else echo --rates "$1"; fi; }  # RATES or a bisection

if has serving; then
    python -m bench.run --systems "${SYSTEMS:-mux-hybrid,sglang-chunked-1024}" $(pick "${RATES:-4}" "${SEARCH:-}") "${RUN[@]}" \
        --out "$OUT/serving" --port "${PORT:-30000}" --server-args "$SA --tp-size 2" --time-budget-s "$(( $(left) - 20 ))" 2>&1 \
        | grep -v "requests over" | tail -n 5
    python -m bench.report "$OUT/serving" > "$OUT/serving/report.md" 2>&1
    gpu_free || exit 2
fi

if has rankkill; then
    R=$OUT/rankkill; mkdir -p "$R"
    URL=http://127.0.0.1:30000
    for i in $(seq "${KILLS:-3}"); do
        [ "$(left)" -lt 260 ] && { echo "budget: $(left)s left, stopping before kill $i"; break; }
        SGLANG_MUX_NO_INSTALL=1 setsid bash launch/serve.sh llama-3.1-8b --tp-size 2 --enable-metrics \
            > "$R/server_$i.log" 2>&1 < /dev/null &
        for _ in $(seq 240); do healthy "$URL" && break; sleep 1; done
        # This server only, by its port: one-GPU cells may serve on the host's other GPUs meanwhile.
        pid=$(pgrep -f "$(server_pat_on 30000)" | head -1)
        [ -n "$pid" ] || { echo "kill $i: the server did not start"; tail -20 "$R/server_$i.log"; break; }
        sid=$(ps -o sid= -p "$pid" | tr -d ' ')
        python -m bench.faults --server-url $URL --faults "" --rate 0 --kill-rank 1 --server-pid "$pid" \
            --out "$R/kill_$i.json" > /dev/null
        python -c "import json,sys; print('kill $i:', json.load(open(sys.argv[1]))['rank_kill'])" "$R/kill_$i.json"
        grep -m1 "lost the TP group" "$R/server_$i.log"  # the error that names the dead rank
        pkill -9 -s "$sid" 2> /dev/null; gpu_free || exit 2  # its session: the server and its ranks
    done
fi

if has muxoff; then
    muxoff_pairs "$OUT/muxoff" "${PAIRS:-2}" 300 --workload sharegpt --rates 100 --duration-s 12 --drain-s 60 \
        --model-path launch/models/llama-3.1-8b --no-progress \
        --server-args "--sampling-backend pytorch --grammar-backend none --tp-size 2"
    gpu_free || exit 2
fi

if has allreduce; then
    timeout $(( $(left) - 10 )) python -m profiling.allreduce --tp-size "${AR_TP:-2}" --hidden 8192 --out "$OUT/allreduce.json" \
        --timeout-s $(( $(left) - 20 )) | tail -n 12
    gpu_free || exit 2
fi

if has dp; then  # the default policy in each replica; DP_SEARCH / ONE_SEARCH=LO,HI bisect instead of the rates
    python -m bench.run --systems mux-hybrid $(pick "${DP_RATES:-8}" "${DP_SEARCH:-}") "${RUN[@]}" --out "$OUT/dp/dp2" \
        --port "${PORT:-30000}" --server-args "$SA --dp-size 2" --time-budget-s "$(( $(left) / 2 ))" 2>&1 \
        | grep -v "requests over" | tail -n 3
    # one replica on the first of this call's GPUs
    CUDA_VISIBLE_DEVICES=$(first="${CUDA_VISIBLE_DEVICES:-0}"; echo "${first%%,*}") python -m bench.run --systems mux-hybrid \
        $(pick "${RATES:-4}" "${ONE_SEARCH:-}") "${RUN[@]}" --out "$OUT/dp/dp1" --port "${PORT:-30000}" --server-args "$SA" \
        --time-budget-s "$(( $(left) - 20 ))" 2>&1 | grep -v "requests over" | tail -n 3
fi
