#!/usr/bin/env bash
# Start the multiplexed server on a GPU host with dummy weights of a shipped model shape.
#   bash launch/serve.sh [llama-3.1-8b|qwen3-8b|tiny-llama] [extra sglang / --mux-* args...]
# Installs the package with the pinned serving stack first unless SGLANG_MUX_NO_INSTALL=1
# (the offline GPU machine of this project uses .gpu/install.sh instead). The attention backend is
# SGLang's default (FA3 on H100/H200) unless an extra argument names one (fa3 or triton).
set -euo pipefail
cd "$(dirname "$0")/.."
model="${1:-llama-3.1-8b}"; shift || true
[ -f "launch/models/$model/config.json" ] || { echo "no launch/models/$model/config.json; choose one of: $(ls launch/models)"; exit 2; }
if [ "${SGLANG_MUX_NO_INSTALL:-0}" != 1 ]; then python3 -m pip install -q -e '.[serve]'; fi
exec python3 -m sglang_mux.launch_server \
  --model-path "launch/models/$model" --load-format dummy \
  --tokenizer-path sglang_mux/data/tokenizer \
  --sampling-backend pytorch --grammar-backend none \
  --host 127.0.0.1 --port "${PORT:-30000}" "$@"
