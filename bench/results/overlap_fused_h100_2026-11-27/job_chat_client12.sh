#!/bin/bash
source .gpu/env.sh
mkdir -p /tmp/c/chat12
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv > /tmp/c/chat12/host_job4.txt
timeout 420 python -m bench.run --systems mux-hybrid-graph --rates 22 --tbt-slo-ms 50 --seed 0 --workload chat-1k \
  --arrival poisson --input-cap 8000 --duration-s 45 --drain-s 30 --out /tmp/c/chat12 --model-path launch/models/llama-3.1-8b \
  --server-args "--sampling-backend pytorch --grammar-backend none --enable-metrics" --no-progress --startup-estimate-s 90 \
  --client-procs 12 2>&1 | tail -5
python -m bench.report /tmp/c/chat12 > /tmp/c/chat12/report.md
