"""FA3's attention grids (SGLang 0.5.16's ``fa3`` backend, sgl_kernel's FlashAttention-3 for
Hopper), as the latency model needs them: how many blocks a batch launches and how many keys
each sweeps.

- Prefill (``Fa3Grid``): the query heads of one KV head are packed into a tile of 128 rows
  (``block_tokens`` = 128·H_kv/H tokens of one request); the keys are split by FA3's split-KV
  heuristic (``num_splits``) sized for the WHOLE GPU's ``device_sms``, whatever partition runs it.
- Decode (``decode_keys``): one tile per request and KV head, split the same way; an SM holding
  m blocks takes 1 + γ·(m − 1) blocks' time.

Units: tokens, keys, blocks (ints); ``decode_keys`` returns keys (a float, weighted by γ).
Inputs are positive ints; γ in [0, 1]. docs/latency_model.md ("The kernels' grids") gives the
rules' sources in FA3 and the table rows that show them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

BLOCK_M = 128  # query rows per tile (head dim 128, sm90)
BLOCK_N = 128  # keys per block (head dim 128, causal)
MAX_SPLITS = 128  # FA3's cap on split-KV


@lru_cache(maxsize=None)
def _splits(tiles: int, device_sms: int, n_blocks: int) -> int:
    if tiles >= 0.8 * device_sms or n_blocks <= 4:
        return 1  # (the L2 branch of a full grid applies to non-causal attention only)
    most = min(MAX_SPLITS, device_sms, n_blocks)
    eff = [(w := tiles * s / device_sms) / math.ceil(w) for s in range(1, most + 1)]
    best = max(eff)
    return next(s for s, e in enumerate(eff, 1) if e >= 0.85 * best)


def num_splits(tiles: int, device_sms: int, n_blocks: int) -> int:
    """FA3's split-KV count for ``tiles`` query tiles over keys of ``n_blocks`` blocks."""
    # beyond most splits the key-block count no longer changes the answer: bound the cache
    return _splits(int(tiles), int(device_sms), min(int(n_blocks), MAX_SPLITS, int(device_sms)))


@dataclass(frozen=True)
class Fa3Grid:
    """The grid of one model's prefill attention on FA3 (heads and the device's SM count)."""

    heads: int
    kv_heads: int
    device_sms: int

    @property
    def block_tokens(self) -> int:
        """Tokens of one request per tile (query heads of a KV head packed into its rows)."""
        return max(1, BLOCK_M * self.kv_heads // self.heads)

    @property
    def tokens_per_sm(self) -> int:
        """Query tokens (of all heads) one SM takes per wave: the latency model's τ."""
        return max(1, BLOCK_M // self.heads)

    def tiles(self, n: int) -> int:
        return self.kv_heads * -(-int(n) // self.block_tokens)

    def splits(self, bs: int, n_max: int, keys_max: int) -> int:
        """Splits of a batch of ``bs`` requests, the longest query ``n_max`` and the longest
        key range ``keys_max`` (cached + new tokens): FA3 sizes a varlen grid by the maxima."""
        return num_splits(bs * self.tiles(n_max), self.device_sms, -(-int(keys_max) // BLOCK_N))


# ------------------------------------------------------------------------------------- decode

DECODE_BLOCK_N = 128  # keys per block of FA3's decode (the paged, one-token-query path)


def decode_keys(kv_heads: int, device_sms: int, sms: int, bs: int, keys: int, gamma: float) -> float:
    """The keys the busiest of ``sms`` SMs sweeps in one decode step, weighted for sharing.

    A decode step is ``bs · kv_heads`` tiles (packed GQA: one tile holds the query heads of a
    KV head), split ``num_splits`` ways for the whole GPU's ``device_sms``, each block sweeping
    ⌈blocks of ``keys`` / splits⌉ · 128 keys. An SM that holds m of them at once takes
    (1 + γ·(m − 1)) times one block's time, m = ⌈blocks / sms⌉: the blocks are memory-bound and
    share the SM's bandwidth rather than wait for each other (``gamma`` = γ, fitted per partition)."""
    nb = -(-(int(keys)) // DECODE_BLOCK_N)
    tiles = int(bs) * int(kv_heads)
    splits = num_splits(tiles, device_sms, nb)
    per = -(-nb // splits) * DECODE_BLOCK_N
    m = -(-(tiles * splits) // int(sms))
    return float(per * (1.0 + gamma * (m - 1)))
