"""SGLang's triton decode-attention grid (SGLang 0.5.16's ``triton`` backend,
``decode_attention.py``), as the latency model needs it. FA3's grids are in ``fa3_kernels``.

One thread block per (request, head group, KV split); G head groups (``decode_head_groups``);
the split count is sized from the WHOLE GPU's SM count D (``get_num_kv_splits_triton``), a
split's keys are rounded up to MIN_BLOCK_KV (32), so each request has full splits of c keys and
a shorter last one; k blocks fit on an SM at once (measured: ``profiling.decode_kernel``).
The grid launches the request fastest and the split slowest, so every full split starts before
any last one, and each block takes the first free slot.

``decode_keys`` returns, in keys swept, when the step's last block ends (the latency model's
floor β·K charges it): exact for a uniform batch (SGLang's bs rule); for a mixed batch an upper
bound (every block charged c keys of SGLang's min/max rule at its cap, in whole waves).
Inputs are positive ints (``blocks_per_sm`` >= 1). docs/latency_model.md ("Triton decode: split
tails") gives the measurements.
"""

from __future__ import annotations

import math

MIN_BLOCK_KV = 32  # SGLang 0.5.16 decode_attention.py _MIN_BLOCK_KV


def decode_head_groups(num_heads: int, num_kv_heads: int) -> int:
    """G as in SGLang's ``get_num_kv_splits_triton``/``_decode_grouped_att_m_fwd``."""
    group = max(1, int(num_heads) // max(1, int(num_kv_heads)))
    return int(num_heads) if group == 1 else -(-int(num_heads) // min(16, group))


def _bs_splits(groups: int, max_splits: int, device_sms: int, bs: int, n: int) -> int:
    """``get_num_kv_splits_triton``'s split count for ``bs`` requests of ``n`` keys each, sized
    by the whole GPU's SMs."""
    ext = int(device_sms * max(math.log2(n / 64.0), 1.0))
    return min(-(-ext // (bs * groups)), max_splits)


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def _uniform_split(groups: int, max_splits: int, device_sms: int, min_block_kv: int, bs: int,
                   r: int) -> tuple[int, int, int]:
    """(c, active splits, keys of the last split) of ``bs`` requests of context ``r``: the step
    attends to L = r + 1 keys; a uniform batch has min = max context, so the first rule gives
    the split count; rounding a split up to MIN_BLOCK_KV keys leaves the last active split
    shorter and later ones empty."""
    n = r + 1
    splits = -(-n // -(-n // _bs_splits(groups, max_splits, device_sms, bs, n)))  # ⌈n / chunk⌉
    c = _round_up(-(-n // splits), min_block_kv)
    active = -(-n // c)
    return c, active, n - (active - 1) * c


def _greedy_keys(slots: int, n_full: int, c: int, n_last: int, last: int) -> float:
    """When the last of ``n_full`` blocks of ``c`` keys, then ``n_last`` of ``last`` ≤ c keys,
    ends (in keys swept), each block taking the first free of ``slots`` slots in launch order:
    the last blocks that wait start on the slots the first ones free."""
    q, rem = divmod(n_full, slots)
    t0 = q * c
    end = t0 + c if rem else t0
    if n_last <= 0 or last <= 0:
        return float(end)
    free = slots - rem  # free at t0; the rem others at t0 + c
    rounds = -(-c // last)  # starts of the free slots before t0 + c
    if n_last <= free * rounds:
        start = t0 + (-(-n_last // free) - 1) * last
    else:
        i, pos = divmod(n_last - free * rounds - 1, slots)
        start = t0 + c + i * last + (0 if pos < rem else rounds * last - c)
    return float(max(end, start + last))


def decode_keys(groups: int, max_splits: int, device_sms: int, min_block_kv: int, blocks_per_sm: int,
                sms: int, bs: int, sum_reused: float, r: int, uniform: bool) -> float:
    """The keys one of ``blocks_per_sm · sms`` slots sweeps until the step's last block ends.

    ``r``: the longest context. Uniform batch: SGLang's bs rule, exactly what the profiled rows
    ran, its in-kernel split lengths scheduled in launch order. Mixed batch: c = ⌈L_max / 8⌉
    (rounded up to MIN_BLOCK_KV), SGLang's min/max rule at its cap; blocks = min(bs·⌈L_max/c⌉,
    ⌊ΣL/c⌋ + bs) ≥ the real count, each charged c keys and run in whole waves. A mixed batch
    whose size was captured exactly splits less when its contexts are within 8x of each other;
    what that costs above this bound is left to the online guard refinement (the estimator does
    not know the captured sizes)."""
    slots = blocks_per_sm * sms
    if uniform:
        c, active, last = _uniform_split(groups, max_splits, device_sms, min_block_kv, bs, r)
        return _greedy_keys(slots, groups * bs * (active - 1), c, groups * bs, last)
    n = r + 1
    c = _round_up(-(-n // max_splits), min_block_kv)
    blocks = min(bs * -(-n // c), int(sum_reused + bs) // c + bs)
    return float(c * -(-(groups * blocks) // slots))
