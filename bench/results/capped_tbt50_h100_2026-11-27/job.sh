#!/bin/bash
# Issue 43's capped-conversation cell at TBT 50 on one H100 (FA3, Poisson seed 0, 45 s a rate):
# the hybrid (chunk sizes counting the decode rows, rule 0 cutting as rule 3, the padded price)
# against chunked prefill 1024 / 512 + mixed and plain SGLang, each climbing 4, 4.4, 4.8, 5.2 to
# its first failure. The simulator's prediction (bench/results/sim_hybrid_rows_2026-11-27/):
# hybrid 4.8, chunked 1024 + mixed 4.8, 512 + mixed 4. Run from a copy of the tree in /tmp/tree.
source .gpu/env.sh
SYSTEMS="mux-hybrid sglang-chunked-1024 sglang-chunked-512 sglang" \
    bash bench/plans/fa3_conv8k_sweep.sh /tmp/c/conv 4,4.4,4.8,5.2 1500
echo $? > /tmp/c/done
