#!/bin/bash
# Issue 43's capped-conversation cell at TBT 30 on one H100 (FA3, Poisson seed 0, 45 s a rate):
# the hybrid (started for 30 ms) against chunked prefill 512 / 1024 + mixed, each climbing
# 3.7, 4, 4.4, 4.8 to its first failure. The simulator's prediction
# (bench/results/sim_hybrid_rows_2026-11-27/): hybrid 4, chunked 512 + mixed 4, 1024 + mixed < 2
# (chunked 256 + mixed failed 3 at TBT 30 in bench/results/slo30_fa3_h100_s20/). Run from a copy
# of the tree in /tmp/tree.
source .gpu/env.sh
TBT_SLO_MS=30 SYSTEMS="mux-hybrid sglang-chunked-512 sglang-chunked-1024" \
    bash bench/plans/fa3_conv8k_sweep.sh /tmp/c/conv30 3.7,4,4.4,4.8 1500
echo $? > /tmp/c/done
