"""Offline test fixtures: a packaged byte-level BPE tokenizer and random-weight HF checkpoints.

Both need only numpy / tokenizers (no torch, no hub access). Names resolve lazily, so
``python -m sglang_mux.testing.checkpoint`` does not import its own module twice."""

import importlib

_EXPORTS = {
    "write_random_checkpoint": "checkpoint",
    "read_safetensors_header": "checkpoint",
    "read_tensor": "checkpoint",
    "build_tokenizer": "tokenizer_fixture",
    "tokenizer_dir": "tokenizer_fixture",
    "SPECIAL_TOKEN_IDS": "tokenizer_fixture",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
