#!/bin/bash
# Issue 17's uncapped conversation on ONE GPU host: the mux against chunked prefill on the Mooncake
# conversation trace WITHOUT the 8K cap, all on SGLang's default attention backend (FA3 on H100/H200).
# Slice: one session in 20 of the whole trace, every turn (bench/data/conversation_sessions20.jsonl,
# 640 requests, prompts up to 118K tokens; the same rows as --session-sample 20 on
# ../shared/traces/mooncake_conversation.jsonl). A KV pool of ~317K tokens (Llama-3.1-8B
# shape on an H100; the servers had 423K, the mux 359K) keeps 28 % of its prompt tokens reusable
# in trace order; the whole trace in order keeps 4 % (bench/results/ttft_floor_conversation.json (commit 2c1fbe7)).
# SLOs: P99 TBT <= 50 ms, the length-aware P99 of TTFT - 0.2 ms x prompt tokens <= 2 s (TTFT_SLO;
# bench/README.md), no drift. Each prompt alone on the whole H100 puts the slice's flat P99 TTFT
# at 3.76 s before any queueing (-0.17 s length-aware); python -m bench.slo_map OUT --tbt 50
# --ttft 2000,5000,10000 [--ttft-per-token 0] rejudges the same points. The mux servers are given the
# check's own SLO (2 s + 0.2 ms a prompt token: --mux-ttft-ms-per-token, what preemption decides on);
# until session 50 they kept a flat 10 s, under which preemption never fires. The simulator plays the
# hybrid alike with and without it (bench/results/h200x4_s50_2026-11-28/sim_tp2/uncapped_k_*.md).
# Poisson arrivals (SEED, default 0). SYSTEMS, RATES change what runs.
# 90 s of arrivals per rate (60 s drain): with 45 s a point at 0.5 req/s has 22 requests, its P99
# TTFT is its slowest prompt and the drift test compares medians of 3 and 11 requests
# (bench/results/sim_uncapped_conv_s21/ (commit ac79c3c)). Points this long leave no room for a +-5 % bisection in
# one 30-minute machine, so each system climbs RATES and stops at its first failure; goodput is
# the interval [last pass, first failure). SEARCH=LO,HI bisects instead.
#   bash bench/plans/conv_uncapped_sweep.sh OUT [seconds available, default 540]
# Session 22 (bench/results/conv_uncapped_h100_s22/, seed 0) passed the mux at 0.5 and 0.75 and
# chunked 512 + mixed at 0.5, 0.75 and 1; chunked 1024 + mixed failed 0.75 (P99 TBT 64 ms). So the
# defaults are the two that decide the ratio, from 1 req/s: RATES=1,1.25,1.5, SYSTEMS="mux
# sglang-chunked-512", ~21 minutes if both pass 1.5. Start it within 3 minutes of the
# lease, in the background, polled from later commands:
#   (setsid nohup bash -c 'bash bench/plans/conv_uncapped_sweep.sh /tmp/unc 1500; echo $? > /tmp/unc_done' \
#       > /tmp/unc.log 2>&1 < /dev/null &)      then: until [ -f /tmp/unc_done ]; do sleep 10; done
# Resumable on the same host (host.txt lists the GPU of every call; a second GPU means the
# comparison is not one run): rerunning replays the points on disk and goes on.
set -u
OUT=${1:?usage: conv_uncapped_sweep.sh OUT [seconds]}
BUDGET=${2:-540}
source "$(dirname "$0")/one_host.sh"
one_host "$OUT"
SA="--sampling-backend pytorch --grammar-backend none --enable-metrics ${EXTRA_SA:-}"
# PORT: the server's (per_gpu.sh sets one per GPU: two cells of one host on one port share a server).
# MODEL, EXTRA_SA, STARTUP_S, TBT_SLO_MS: another model and SLO, as in fa3_conv8k_sweep.sh (issue 44's 70B).
# WORKLOAD, TRACE_PATH, INPUT_CAP: another long-context slice (bench/plans/synthetic_sweep.sh).
cap=(); [ -n "${INPUT_CAP:-}" ] && cap=(--input-cap "$INPUT_CAP")
# OFFSET: the slice starts there; WARM_HISTORY=1: each point first prefills the history it reuses
[ -n "${OFFSET:-}" ] && cap+=(--offset "$OFFSET"); [ -n "${WARM_HISTORY:-}" ] && cap+=(--warm-history)
# DURATION_S: seconds of arrivals a point (default 90). At the 70B's ~0.1 req/s a 90-s point is 9
# requests, and the simulator's verdicts there are the drift test's on one or two of them; on 600-s
# points the later, longer turns come (bench/results/h200x4_s52_2026-11-28/uncapped_spans.md).
# TTFT_SLO: the goodput check's TTFT SLO: on the conversation and loogle the length-aware one, 2 s +
# TTFT_K ms a prompt token (default 0.2, issue 43's), which the mux servers are told too; another
# WORKLOAD keeps 10 s flat
case "${WORKLOAD:-conversation}" in
    conversation|loogle) k=${TTFT_K:-0.2}; d="--ttft-slo-ms 2000 --ttft-slo-ms-per-token $k --mux-ttft-ms-per-token $k" ;;
    *) d="--ttft-slo-ms 10000" ;;
esac
TTFT_SLO=(${TTFT_SLO:-$d})
COMMON=(--tbt-slo-ms "${TBT_SLO_MS:-50}" "${TTFT_SLO[@]}" --seed "${SEED:-0}" --workload "${WORKLOAD:-conversation}"
        --trace-path "${TRACE_PATH:-bench/data/conversation_sessions20.jsonl}" "${cap[@]}" --arrival poisson
        --duration-s "${DURATION_S:-90}" --drain-s 60 --out "$OUT" --model-path "launch/models/${MODEL:-llama-3.1-8b}" --no-progress
        --startup-estimate-s "${STARTUP_S:-160}" ${PORT:+--port "$PORT"})
if [ -n "${SEARCH:-}" ]; then how=(--search "$SEARCH"); else how=(--rates "${RATES:-1,1.25,1.5}"); fi
for sys in ${SYSTEMS:-mux sglang-chunked-512}; do
    l=$(left)
    if [ "$l" -lt $(( ${STARTUP_S:-160} + ${DURATION_S:-90} + 70 )) ]; then   # a start and one point (+ drain + flush)
        echo "budget: ${l}s left, stopping before $sys"; exit 0; fi
    # The mux prefills a prompt whole: at bench.run's 0.85 a 67,668-token prompt ran out of
    # memory (sglang_mux/prefill_memory.py); 0.75 holds 106K tokens, and the first 135 requests
    # (1.5 req/s x 90 s) reach 68K. The hybrid fuses a longer prompt in chunks instead:
    # MUX_MEM=0.85 gives it chunked prefill's pool (tests/gpu/test_long_prompt_gpu.py first).
    sa="$SA"; case "$sys" in mux*) sa="$SA --mem-fraction-static ${MUX_MEM:-0.75}";; esac
    python -m bench.run --systems "$sys" "${how[@]}" --time-budget-s "$l" --server-args "$sa" "${COMMON[@]}" 2>&1 \
        | grep -v "requests over" | tail -n 3
done
python -m bench.report "$OUT" > "$OUT/report.md"
echo "pass done: $OUT/report.md lists what ran; run again until every system is in it"
