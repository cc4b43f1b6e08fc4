#!/bin/bash
# Issue 17's third workload on ONE GPU host: the Mooncake synthetic trace (64 % prefix reuse
# over all of it, 4-7 % within a point), the shipped first 500 requests
# (bench/data/synthetic_first500.jsonl, prompts mean 12.8K tokens),
# every prompt capped at 100,000 tokens for every system: one prompt (134,773 tokens, the 250th)
# exceeds the model's 131,072-token context and would fail on every server, and 100K also fits
# the mux's whole-prompt prefill at --mem-fraction-static 0.75 (sglang_mux/prefill_memory.py).
# Otherwise as conv_uncapped_sweep.sh: FA3, P99 TBT 50 ms / TTFT 10 s, Poisson SEED (default 0),
# 90 s per rate, each system climbs RATES and stops at its first failure.
# Served on H200s, as the simulators predicted: seed 0 (bench/results/synthetic_h200_s23/) mux 1.25,
# chunked 512 and 1024 + mixed 0.75 (1.67x; 1.0x by the length-aware queue drift); SEED=1
# (bench/results/synthetic_h200_seed1_s24/) mux and chunked 512 + mixed 0.75, 1024 + mixed < 0.75
# (1.0x). Not yet served on an H100. The defaults are the two systems that decide it, ~24 minutes
# if both climb all four rates. Start it within 3 minutes of the lease, in the background:
#   (setsid nohup bash -c 'bash bench/plans/synthetic_sweep.sh /tmp/syn 1500; echo $? > /tmp/syn_done' \
#       > /tmp/syn.log 2>&1 < /dev/null &)
# Prefix reuse, which the first 500 requests barely have (4-7 % within a point): a window at offset
# 500 whose points first prefill the history they reuse (7-14 prompts, 0.21-0.31M tokens; then
# 24-30 % of the window's prompt tokens can hit, synthetic_h200_s23/reuse_windows.md). The pools
# hold it on an H200 (mux 0.73M, chunked 0.85M); an H100's mux pool (0.36M) barely. Simulated
# (bench/results/sim_synthetic_warm_s24/ (commit ac79c3c)): no mux lead, and the drift test flags every system at
# 1 req/s there, so serve it only once the drift rule is settled:
#   OFFSET=500 WARM_HISTORY=1 TRACE_PATH=bench/data/synthetic_first1200.jsonl bash bench/plans/synthetic_sweep.sh OUT 1500
WORKLOAD=mooncake-synthetic TRACE_PATH=${TRACE_PATH:-bench/data/synthetic_first500.jsonl} INPUT_CAP=100000 \
    RATES=${RATES:-0.75,1,1.25,1.5} SYSTEMS=${SYSTEMS:-mux sglang-chunked-512} \
    exec bash "$(dirname "$0")/conv_uncapped_sweep.sh" "$@"
