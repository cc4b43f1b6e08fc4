#!/bin/bash
# Session 37's second H100 lease. First a diagnostic: the hybrid at the capped conversation,
# TBT 30, 3 req/s, its timeline rows now saying whether each launch waited for the GPU
# (`launch` / fused `launch.graph`). Then issue 43's code cell at TBT 30 (FA3, Poisson seed 0,
# 45 s a rate, 12 client processes): the hybrid (started for 30 ms) against chunked prefill
# 512 / 1024 + mixed, each climbing 17, 18.5, 20, 22 to its first failure. The simulator's
# prediction (bench/results/sim_hybrid_rows_2026-11-27/): hybrid 20, chunked 512 + mixed 17,
# 1024 + mixed 12. Run from a copy of the tree in /tmp/tree.
source .gpu/env.sh
TBT_SLO_MS=30 SYSTEMS="mux-hybrid" bash bench/plans/fa3_conv8k_sweep.sh /tmp/c/diag30 3 290
TBT_SLO_MS=30 CLIENT_PROCS=12 WORKLOAD=code SYSTEMS="mux-hybrid sglang-chunked-512 sglang-chunked-1024" \
    bash bench/plans/fa3_conv8k_sweep.sh /tmp/c/code30 17,18.5,20,22 1250
echo $? > /tmp/c/done
