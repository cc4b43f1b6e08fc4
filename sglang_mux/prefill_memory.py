"""The longest prompt one layer-wise prefill can hold in the GPU memory left after the KV pool.

A layer-wise prefill takes each prompt whole (SGLang's chunked prefill is off), so one launch's
activations grow with the prompt; SGLang's chunked server never holds more than one chunk. Per
token the MLP keeps its gate/up output (2 x intermediate), the activation (intermediate) and about
six hidden-size tensors (layer input, residual, normed input, attention output, down output) alive
at the down projection; a preempted batch keeps two more (hidden state and residual) while its
preemptor runs, so with both at most the limit long, 3 x intermediate + 8 x hidden bounds them.
docs/measurements.md compares the bound with a measured out-of-memory prefill.

Without a limit such a prompt kills the scheduler and every request in flight with it. With one, the
hybrid policy fuses it in chunks (a chunk's activations are bounded by the chunk); another policy
refuses it with SGLang's own input-length error, and the log says which memory fraction would serve
the longest prompt the server accepts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

GIB = 1 << 30
# Attention workspace and last-token logits (0.5 GiB), and the caching allocator's fragmentation
# (2.25 GiB: a served 45,130-token prefill ran out of memory with 2.27 GiB reserved but unallocated;
# docs/measurements.md).
MARGIN_BYTES = GIB // 2 + GIB * 9 // 4
_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


def bytes_per_token(hidden: int, intermediate: int, dtype_bytes: int = 2) -> int:
    """Peak activation bytes per prompt token of one prefill layer (module docstring)."""
    if hidden <= 0 or intermediate <= 0 or dtype_bytes <= 0:
        raise ValueError("hidden, intermediate and dtype_bytes must be positive")
    return dtype_bytes * (3 * intermediate + 8 * hidden)


def bytes_per_token_of(config_path: str) -> int:
    """From a HuggingFace config.json (hidden_size, intermediate_size, torch_dtype)."""
    with open(config_path) as f:
        c = json.load(f)
    missing = [k for k in ("hidden_size", "intermediate_size") if k not in c]
    if missing:
        raise ValueError(f"{config_path}: no {', '.join(missing)}: the prefill memory limit needs a dense "
                         "decoder's hidden and intermediate sizes")
    return bytes_per_token(c["hidden_size"], c["intermediate_size"],
                           _DTYPE_BYTES.get(str(c.get("torch_dtype", "bfloat16")), 2))


@dataclass(frozen=True)
class PromptLimit:
    max_input_len: int  # what the scheduler may accept (SGLang refuses prompts of this length or more)
    fits: int  # prompt tokens one prefill can hold in the free memory
    message: str | None  # a warning for the log when the limit is below what the server would accept


def prompt_limit(*, free_bytes: int, total_bytes: int, per_token: int, max_input_len: int,
                 max_prefill_tokens: int, mem_fraction: float) -> PromptLimit:
    """The input-length limit for a server with `free_bytes` left once its KV pool and decode graphs
    are allocated. Raises ValueError when not even one batch of `max_prefill_tokens` fits: every
    long-enough batch would run out of memory, so the server must not start."""
    fits = max(0, (free_bytes - MARGIN_BYTES) // per_token)
    if fits >= max_input_len:
        return PromptLimit(max_input_len, fits, None)
    # Memory a prompt of max_input_len tokens needs beyond what is free, as a fraction of the GPU.
    short = (max_input_len * per_token + MARGIN_BYTES - free_bytes) / total_bytes
    advice = (f"start with --mem-fraction-static {max(0.05, mem_fraction - short - 0.005):.2f} (now {mem_fraction:.2f}) "
              "or a smaller --context-length")
    if fits < max_prefill_tokens:
        raise ValueError(f"sglang_mux: {free_bytes / GIB:.1f} GiB are left after the KV pool; a prefill batch of "
                         f"--max-prefill-tokens {max_prefill_tokens} needs {max_prefill_tokens * per_token / GIB:.1f} "
                         f"GiB of activations: {advice}")
    msg = (f"sglang_mux: prompts of {fits} tokens or more are refused with an error: one layer-wise prefill of "
           f"a {max_input_len}-token prompt needs {max_input_len * per_token / GIB:.1f} GiB of activations and "
           f"{free_bytes / GIB:.1f} GiB are left after the KV pool; to serve them, {advice}")
    return PromptLimit(fits, fits, msg)
