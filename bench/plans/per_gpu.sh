#!/bin/bash
# Run one cell's plan on one GPU of a multi-GPU host, beside other cells on the other GPUs: the
# GPU (CUDA_VISIBLE_DEVICES), an equal share of the host's cores (taskset: on a 2-GPU, 32-core or
# a 4-GPU, 64-core host each cell gets 16, as a one-GPU machine has) and its own server port
# (PORT = 30000 + 1000 x GPU, read by fa3_conv8k_sweep.sh). Every system of a cell still runs on
# that one GPU.
#   bash bench/plans/per_gpu.sh GPU COMMAND...
#   e.g. TBT_SLO_MS=30 SYSTEMS="mux-hybrid sglang-chunked-512" bash bench/plans/per_gpu.sh 1 \
#            bash bench/plans/fa3_conv8k_sweep.sh /tmp/c1 3.7,4 900
set -u
GPU=${1:?usage: per_gpu.sh GPU COMMAND...}
shift
n=$(nvidia-smi -L | wc -l)
per=$(( $(nproc) / n ))
export CUDA_VISIBLE_DEVICES=$GPU PORT=$(( 30000 + 1000 * GPU ))
exec taskset -c "$(( GPU * per ))-$(( GPU * per + per - 1 ))" "$@"
