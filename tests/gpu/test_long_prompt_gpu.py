"""GPU: the hybrid serves a prompt longer than one layer-wise prefill's activations can hold (in
the memory left after the KV pool) as fused chunks, where the dispatcher policy refuses it.

    python -m pytest tests/gpu/test_long_prompt_gpu.py     (~3 minutes on an H100)

Llama-3.1-8B shape, dummy weights, at --mem-fraction-static 0.85: ~7.6 GiB stay free for a
prefill's activations, one layer-wise prefill holds ~50K prompt tokens (sglang_mux.prefill_memory),
and the model's context is 128K.
"""

import os
import random

import pytest

from serve_util import Server, post

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROMPT = 70_000  # tokens: over the ~50K one layer-wise prefill holds, under the context


@pytest.mark.slow
def test_the_hybrid_fuses_a_prompt_one_layer_wise_prefill_cannot_hold(tmp_path):
    log = tmp_path / "server.log"
    args = ["--model-path", os.path.join(ROOT, "launch/models/llama-3.1-8b"), "--load-format", "dummy",
            "--skip-tokenizer-init", "--mem-fraction-static", "0.85", "--mux-policy", "hybrid"]
    rng = random.Random(0)
    with Server(args, port=34567, log_path=str(log)) as s:
        ids = [rng.randrange(100, 120_000) for _ in range(PROMPT)]
        out = post(s.url + "/generate", {"input_ids": ids, "sampling_params": {
            "max_new_tokens": 4, "temperature": 0, "ignore_eos": True}})
        assert "error" not in out, out
        assert out["meta_info"]["prompt_tokens"] == PROMPT and len(out["output_ids"]) == 4
        short = post(s.url + "/generate", {"input_ids": ids[:100], "sampling_params": {"max_new_tokens": 4}})
        assert "error" not in short, short  # the server lives on
    text = log.read_text(errors="replace")
    assert "runs as fused chunks, never as one layer-wise prefill" in text
