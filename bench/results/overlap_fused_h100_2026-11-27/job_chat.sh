#!/bin/bash
set -x
source .gpu/env.sh
mkdir -p /tmp/c
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv > /tmp/c/host_job3.txt
WORKLOAD=chat-1k SYSTEMS="mux-hybrid-graph sglang-chunked-1024" bash bench/plans/fa3_conv8k_sweep.sh /tmp/c/chat 22,24,26 880
echo done > /tmp/c3_done
