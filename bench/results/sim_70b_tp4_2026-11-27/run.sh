#!/bin/bash
# The simulator's prediction for issue 44's 70B cell (capped conversation, TBT 100 ms, TTFT 5 s, 45-s Poisson points).
#   bash run.sh [TABLE [RATES]]   (default: the TP-4 H100 table at 1.5 ... 3.5 req/s)
cd "$(dirname "$0")/../../.."
T=${1:-llama-3.1-70b__nvidia-h100-80gb-hbm3__fa3__tp4}
for r in ${2:-1.5 2 2.5 3 3.5}; do
  n=$(python -c "print(int($r*45))")
  echo "== rate $r"
  timeout 600 python -m sglang_mux.sim --table $T --arrival poisson --rate $r --input-cap 8000 --limit $n --tbt-slo-ms 100 --ttft-slo-ms 5000 --policy hybrid --prefill-graph --online-guard --fused-host-ms 2 2>&1 | tail -3
  for b in 512 1024 2048 256; do timeout 600 python -m sglang_mux.sim_chunked --table $T --arrival poisson --rate $r --input-cap 8000 --limit $n --tbt-slo-ms 100 --ttft-slo-ms 5000 --budget $b --host-ms 2 2>&1 | tail -1 | sed "s/^/chunked $b: /"; done
done
