"""FA3's attention grids, prefill and decode, as the latency model needs them (SGLang 0.5.16's
`fa3` backend, sgl_kernel's FlashAttention-3 for Hopper). Decode: ``decode_keys`` at the end.

SGLang calls FA3 with ``num_splits = 0`` (FA3 chooses) and variable-length queries, so FA3 packs
the query heads of one KV head into the rows of a tile (PackGQA: ``should_pack_gqa`` is true for
varlen queries). For head dim 128 with a causal mask a tile is kBlockM = 128 rows = 128 / g
tokens of the g = H / H_kv query heads that share a KV head, and it sweeps its keys in blocks of
kBlockN = 128. A request of n new tokens is H_kv · ⌈n / (128 / g)⌉ tiles.

FA3 then splits the keys (split-KV) when the batch has too few tiles to fill the GPU
(``num_splits_heuristic`` in FA3's flash_api.cpp): with at least 0.8 · D tiles one split;
with at most 4 key blocks one split; else the fewest splits whose waves are within 85 % of the
best wave efficiency, D being the device's multiprocessor count read from the device
properties: the WHOLE GPU's 132, not the partition's. A partition of S < D SMs therefore runs a
grid sized for D in ⌈tiles · splits / S⌉ waves, each block sweeping r / splits keys.

The H100 FA3 table (contention_tables/llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3) shows it: 128
new tokens over 32K cached ones are 32 tiles, which FA3 splits 4 ways into 128 blocks: one wave
on 132 SMs (11.1 ms), two on 116 and 100 (15.5 and 15.2 ms) where 132 / 116 is 1.14x; 512 new
tokens (128 tiles, no split) likewise take one wave on 132 SMs and two on 116. The model of the
triton backend (one block per request, head and 128-token query block, no split) missed those
rows held out by 12.7-28.2 % on 100-132 SMs; with this grid every partition of both FA3 tables
passes (latency_model docstring, "FA3").
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
    share the SM's bandwidth rather than wait for each other. Measured on the H200 FA3 table:
    16 requests of 32K keys are 128 blocks (one split), one per SM on 132 SMs (20.3 ms) and two
    on some of 112 or 96 (27.4 and 25.8 ms, not the 2x of a second wave); the fit chooses γ
    per partition, 0.44-1.00 below the full GPU on the three FA3 tables. Whole waves (γ = 1, or
    k blocks per SM per wave) missed those rows held out by 16-27 %."""
    nb = -(-(int(keys)) // DECODE_BLOCK_N)
    tiles = int(bs) * int(kv_heads)
    splits = num_splits(tiles, device_sms, nb)
    per = -(-nb // splits) * DECODE_BLOCK_N
    m = -(-(tiles * splits) // int(sms))
    return float(per * (1.0 + gamma * (m - 1)))
