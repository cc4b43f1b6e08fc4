#!/bin/bash
# Issue 43's chat-1k cell at TBT 50 on one H100 (FA3, Poisson seed 0, 45 s a rate, 12 client
# processes): the hybrid with its fused price's prior kept through the warm-up, against chunked
# prefill 1024 / 512 + mixed, each climbing 20, 22, 24 to its first failure. The simulator's
# prediction (bench/results/sim_hybrid_rows_2026-11-27/). Run from a copy of the tree in /tmp/tree.
source .gpu/env.sh
CLIENT_PROCS=12 WORKLOAD=chat-1k SYSTEMS="mux-hybrid sglang-chunked-1024 sglang-chunked-512" \
    bash bench/plans/fa3_conv8k_sweep.sh /tmp/c/chat 20,22,24 1250
echo $? > /tmp/c/done
