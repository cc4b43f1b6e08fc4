#!/bin/bash
# Run one cell's plan on one GPU of a multi-GPU host, beside other cells on the other GPUs: the
# GPU (CUDA_VISIBLE_DEVICES), an equal share of the host's cores (taskset, whole cores: on a 2-GPU,
# 32-vCPU or a 4-GPU, 64-vCPU host each cell gets 16, as a one-GPU machine has) and its own server port
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
# Whole cores, both hyperthreads in one cell (bench/cpu_split.py); else the plain split by number.
cpus=$(python -m bench.cpu_split --cells "$n" --cell "$GPU" 2> /dev/null) || cpus="$(( GPU * per ))-$(( GPU * per + per - 1 ))"
export CUDA_VISIBLE_DEVICES=$GPU PORT=$(( 30000 + 1000 * GPU ))
exec taskset -c "$cpus" "$@"
