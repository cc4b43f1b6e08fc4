#!/bin/bash
# Issue 71 item 7: the mux server's start against plain SGLang's on one host, warm, in pairs of
# alternating order (the second of a pair starts on a warmer page cache), each server answering
# five short requests before it stops (bench.run: startup_s in <system>__start.json, the capture
# times in <system>.log). COLD=1 empties the compile caches before every start (Triton's,
# TorchInductor's, FlashInfer's JIT, and SGLang 0.5.16's own CUDA JIT kernels in tvm-ffi's cache:
# store_cache, the norms, the activation, built with nvcc at their first use: likely most of the
# 64 s a fresh machine spent on its first prefill graph size), so that each start pays them.
#   bash bench/plans/startup.sh OUT BUDGET_S [PAIRS]      (the caller has sourced .gpu/env.sh)
# Served once (2026-12-06, one H100, warm): the hybrid 105.3 s, chunked 512 68.2 s (1.54x):
# bench/results/long_prompts_h100_b_2026-12-06/startup/. A pair costs ~3 minutes warm.
set -u
OUT=${1:?usage: startup.sh OUT BUDGET_S [PAIRS]}; BUDGET=${2:?BUDGET_S}; PAIRS=${3:-2}
cd "$(dirname "$0")/../.."
source bench/plans/one_host.sh
one_host "$OUT"
SA="--sampling-backend pytorch --grammar-backend none --enable-metrics"
for i in $(seq "$PAIRS"); do
    order=$([ $((i % 2)) -eq 1 ] && echo mux-hybrid,sglang-chunked-512 || echo sglang-chunked-512,mux-hybrid)
    for sys in $(echo "$order" | tr , ' '); do
        [ "$(left)" -lt 200 ] && { echo "budget: $(left)s left, stopping before $sys of pair $i"; break 2; }
        [ "${COLD:-0}" = 1 ] && rm -rf ~/.triton/cache ~/.cache/torch/inductor /tmp/torchinductor_* ~/.cache/flashinfer \
            "${TVM_FFI_CACHE_DIR:-$HOME/.cache/tvm-ffi}"
        python -m bench.run --systems "$sys" --workload sharegpt --rates 1 --num-requests 5 --duration-s 5 \
            --drain-s 20 --attention-backend fa3 --mem-fraction-static 0.85 --server-args "$SA" --no-progress \
            --time-budget-s "$(left)" --out "$OUT/pair$i" 2>&1 | tail -n 1
    done
done
python - "$OUT" <<'EOF'
import json, pathlib, sys
for p in sorted(pathlib.Path(sys.argv[1]).glob("pair*/*__start.json")):
    print(p.parent.name, p.name.split("__")[0], json.loads(p.read_text()).get("startup_s"))
EOF
