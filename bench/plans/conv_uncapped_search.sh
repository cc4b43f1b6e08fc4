#!/bin/bash
# Issue 17's uncapped conversation on ONE GPU host: each system's goodput bisected to +-5 %
# (bench.run --search) on the Mooncake conversation trace WITHOUT the 8K cap, all on SGLang's
# default attention backend (FA3 on H100/H200).
# Slice: one session in 20 of the whole trace, every turn of a kept session
# (bench/data/conversation_sessions20.jsonl, 640 requests, prompts up to 128K tokens; the same
# rows as --session-sample 20 on ../shared/traces/mooncake_conversation.jsonl). One GPU's KV pool
# (~317K tokens, Llama-3.1-8B shape on an H100) keeps 28 % of its prompt tokens reusable in trace
# order; the whole trace in order keeps 4 % (bench/results/ttft_floor_conversation.json).
# SLOs: P99 TBT <= 50 ms, P99 TTFT <= 10 s, no drift. Each prompt alone on the whole H100 puts the
# slice's P99 TTFT at 3.76 s before any queueing, so a 5 s SLO leaves ~1.2 s for it; 10 s is the
# plan's pass line and python -m bench.slo_map OUT --tbt 50 --ttft 5000,10000 rejudges the same points
# at 5 s. Poisson arrivals (SEED, default 0), 45 s of arrivals per rate, 45 s drain.
# The simulator (FA3 H100 table, prefill x1.4 beside decode, online max guard) puts the mux
# near 1 req/s at 10 s, hence the default search range 0.5-1.5 (about six points per system).
#   bash bench/plans/conv_uncapped_search.sh OUT [seconds available, default 540]
# About 12 minutes of one machine per system (start, ~6 points of <= 105 s): the default
# SYSTEMS, the mux and chunked 512 + mixed (the best chunked budget on the capped slice at 50 and
# at 30 ms), fit one 30-minute machine after the install, in the background, polled from later
# commands:
#   (setsid nohup bash -c 'bash bench/plans/conv_uncapped_search.sh /tmp/unc 1500; echo $? > /tmp/unc_done' \
#       > /tmp/unc.log 2>&1 < /dev/null &)      then: until [ -f /tmp/unc_done ]; do sleep 10; done
# Resumable on the same host (host.txt lists the GPU of every call; a second GPU means the
# comparison is not one run): rerunning replays the points on disk and goes on.
# SYSTEMS="sglang-chunked-1024 sglang-chunked-2048" and SEARCH=LO,HI change what runs.
set -u
OUT=${1:?usage: conv_uncapped_search.sh OUT [seconds]}
BUDGET=${2:-540}
source "$(dirname "$0")/one_host.sh"
one_host "$OUT"
SA="--sampling-backend pytorch --grammar-backend none --enable-metrics"
COMMON=(--tbt-slo-ms 50 --ttft-slo-ms 10000 --seed "${SEED:-0}" --workload conversation
        --trace-path bench/data/conversation_sessions20.jsonl --arrival poisson --duration-s 45 --drain-s 45
        --out "$OUT" --model-path launch/models/llama-3.1-8b --server-args "$SA" --no-progress
        --startup-estimate-s 90)
for sys in ${SYSTEMS:-mux sglang-chunked-512}; do
    l=$(left)
    if [ "$l" -lt 240 ]; then   # a start (~90 s) and one point (45 s + 45 s drain + flush)
        echo "budget: ${l}s left, stopping before $sys"; exit 0; fi
    python -m bench.run --systems "$sys" --search "${SEARCH:-0.5,1.5}" --time-budget-s "$l" "${COMMON[@]}" 2>&1 \
        | grep -v "requests over" | tail -n 3
done
python -m bench.report "$OUT" > "$OUT/report.md"
echo "pass done: $OUT/report.md lists what ran; run again until every system is in it"
