"""Cold-start solo latency: attention-aware roofline (DuetServe §4.1) per SM partition.

Used only when no contention table matches the model and GPU. Each operator costs
``max(flops / Π(s), bytes / B(s))`` where Π(s) and B(s) are the probed bf16 GEMM FLOP/s and
copy bandwidth of an ``s``-SM partition; the model time is the sum over operators:

- token-level, per layer: QKV, O, gate-up and down projections (``F = 2·n·d_i·d_o``,
  ``B = (n·d_i + d_i·d_o + n·d_o)·s``) and one element-wise op (2 RMSNorms, SiLU·mul,
  2 residual adds — bytes only matter);
- sequence-level, per layer and per request: attention with ``q`` new and ``c`` cached tokens,
  ``B = 2·h_q·q·d_h·s + 2·h_kv·(q+c)·d_h·s``. Deviation from DuetServe: FLOPs use the causal
  count of attended pairs, ``q·c + q(q+1)/2``, instead of ``q·(q+c)`` — FlashAttention skips the
  masked half, so DuetServe's count would double long-prompt attention time;
- decode attention is summed over the batch in one term (always memory-bound, so the sum of
  per-request maxima equals the max of the sums); the occupancy floor of the fitted model
  (r_max, latency_model) has no roofline counterpart, so ``decode_ms`` ignores r_max;
- the LM head on the last token of each request (prefill) or every token (decode);
- ``layer_overhead_ms`` per layer for kernel ramp/tail that a roofline does not see (rough).

No tensor parallelism (single GPU): DuetServe's all-reduce term is zero.

Probe format: ``{sm_count: (flops_per_s, bytes_per_s)}``; values in between are linearly
interpolated, below the smallest count scaled from (0, 0), above the largest clamped.
"""

from __future__ import annotations

import bisect
from typing import Mapping, Sequence

from .latency_model import DecodeRows, PrefillReq
from .tables import ModelShape

# Measured on an H200 (132 SMs) — the name is the project's interface; an H100 SXM has the
# same SM count and GEMM rate but ~3.35 TB/s HBM, so on an H100 run the real probe.
# bf16 GEMM: ~111 TFLOP/s per 16 SMs, 789 TFLOP/s on the full GPU.
# Copy bandwidth: 16 SMs 1.2 TB/s, 32: 2.2, 48: 3.0, 64: 3.6, full: 4.2 TB/s.
DEFAULT_H100_PROBE: dict[int, tuple[float, float]] = {
    16: (111e12, 1.2e12),
    32: (222e12, 2.2e12),
    48: (333e12, 3.0e12),
    64: (444e12, 3.6e12),
    80: (555e12, 3.6e12 + (4.2e12 - 3.6e12) * (80 - 64) / (132 - 64)),
    96: (666e12, 3.6e12 + (4.2e12 - 3.6e12) * (96 - 64) / (132 - 64)),
    112: (777e12, 3.6e12 + (4.2e12 - 3.6e12) * (112 - 64) / (132 - 64)),
    132: (789e12, 4.2e12),
}
DEFAULT_H200_PROBE = DEFAULT_H100_PROBE

LAYER_OVERHEAD_MS = 0.01


def probe_at(probe: Mapping, sms: int) -> tuple[float, float]:
    """(FLOP/s, bytes/s) of an ``sms``-SM partition, interpolated from the probe."""
    pts = sorted((int(k), float(v[0]), float(v[1])) for k, v in probe.items())
    if not pts:
        raise ValueError("empty probe")
    xs = [p[0] for p in pts]
    i = bisect.bisect_left(xs, sms)
    if i < len(xs) and xs[i] == sms:
        return pts[i][1], pts[i][2]
    if i == len(xs):
        return pts[-1][1], pts[-1][2]
    lo = (0, 0.0, 0.0) if i == 0 else pts[i - 1]
    hi = pts[i]
    w = (sms - lo[0]) / (hi[0] - lo[0])
    return lo[1] + w * (hi[1] - lo[1]), lo[2] + w * (hi[2] - lo[2])


# ----------------------------------------------------------------------------- pure cost functions
# An op is (name, flops, bytes) for the whole model (per-layer ops already × num_layers).

def _linears(m: ModelShape):
    h, hd = m.hidden_size, m.head_dim
    return (("qkv", h, (m.num_heads + 2 * m.num_kv_heads) * hd), ("o", m.num_heads * hd, h),
            ("gate_up", h, 2 * m.intermediate_size), ("down", m.intermediate_size, h))


def token_ops(m: ModelShape, tokens: int, lm_tokens: int, s: int = 2) -> list[tuple[str, float, float]]:
    """Token-level ops for ``tokens`` tokens through all layers + the LM head on ``lm_tokens``."""
    L, n = m.num_layers, tokens
    ops = [(name, L * 2.0 * n * di * do, L * float(n * di + di * do + n * do) * s)
           for name, di, do in _linears(m)]
    # 2 RMSNorm (r+w), SiLU·mul (2r+w of intermediate), 2 residual adds (2r+w).
    ew_bytes = n * (2 * 2 * m.hidden_size + 3 * m.intermediate_size + 2 * 3 * m.hidden_size) * s
    ew_flops = n * (2 * 4 * m.hidden_size + 4 * m.intermediate_size + 2 * m.hidden_size)
    ops.append(("elementwise", L * float(ew_flops), L * float(ew_bytes)))
    h, V = m.hidden_size, m.vocab_size
    ops.append(("lm_head", 2.0 * lm_tokens * h * V, float(lm_tokens * h + h * V + lm_tokens * V) * s))
    return ops


def attention_cost(m: ModelShape, q: int, c: int, s: int = 2) -> tuple[float, float]:
    """(flops, bytes) of one request's attention in one layer (causal)."""
    pairs = q * c + q * (q + 1) / 2.0
    flops = (4.0 * m.num_heads * m.head_dim + 2.0 * m.num_heads) * pairs
    byts = (2.0 * m.num_heads * q * m.head_dim + 2.0 * m.num_kv_heads * (q + c) * m.head_dim) * s
    return flops, byts


def prefill_ops(m: ModelShape, reqs: Sequence[PrefillReq], s: int = 2) -> list[tuple[str, float, float]]:
    """All ops of one prefill forward of ``reqs`` (one attention op per request)."""
    n = sum(q.n for q in reqs)
    ops = token_ops(m, n, len(reqs), s)
    L = m.num_layers
    for q in reqs:
        f, b = attention_cost(m, q.n, q.r, s)
        ops.append(("attention", L * f, L * b))
    return ops


def decode_ops(m: ModelShape, bs: int, sum_reused: int, s: int = 2) -> list[tuple[str, float, float]]:
    """All ops of one decode iteration: bs tokens, Σr cached tokens (attention summed)."""
    ops = token_ops(m, bs, bs, s)
    L, hd = m.num_layers, m.head_dim
    pairs = bs + sum_reused  # each request attends its c cached tokens + itself
    flops = (4.0 * m.num_heads * hd + 2.0 * m.num_heads) * pairs
    byts = (2.0 * m.num_heads * bs * hd + 2.0 * m.num_kv_heads * pairs * hd) * s
    ops.append(("attention", L * flops, L * byts))
    return ops


def batch_cost(ops) -> tuple[float, float]:
    """Total (flops, bytes) of a list of ops."""
    return sum(o[1] for o in ops), sum(o[2] for o in ops)


def roofline_ms(ops, flops_per_s: float, bytes_per_s: float) -> float:
    return 1e3 * sum(max(f / flops_per_s, b / bytes_per_s) for _, f, b in ops)


class RooflineModel:
    """Solo latency from a probe; same ``prefill_ms``/``decode_ms`` as SoloLatencyModel."""

    def __init__(self, probe: Mapping, model_shape, dtype_bytes: int = 2,
                 layer_overhead_ms: float = LAYER_OVERHEAD_MS):
        self.probe = {int(k): (float(v[0]), float(v[1])) for k, v in probe.items()}
        if not self.probe or any(f <= 0 or b <= 0 for f, b in self.probe.values()):
            raise ValueError(f"probe must map SM counts to positive (flops/s, bytes/s), got {probe}")
        self.shape = ModelShape.coerce(model_shape)
        self.s = dtype_bytes
        self.overhead_ms = layer_overhead_ms * self.shape.num_layers
        self._rates: dict[int, tuple[float, float]] = {}
        # Per-token flops, per-token bytes and fixed bytes of each op, from the pure functions
        # (ops are affine in the token count), so the hot path is a few multiply-adds.
        m, s = self.shape, dtype_bytes
        one, two = token_ops(m, 1, 1, s), token_ops(m, 2, 2, s)
        self._tok = [(f2 - f1, b2 - b1, b1 - (b2 - b1)) for (_, f1, b1), (_, f2, b2) in zip(one[:-1], two[:-1])]
        (_, f1, b1), (_, f2, b2) = one[-1], two[-1]
        self._lm = (f2 - f1, b2 - b1, b1 - (b2 - b1))
        L = m.num_layers
        self._attn = (L * (4.0 * m.num_heads * m.head_dim + 2.0 * m.num_heads),
                      L * 2.0 * m.num_heads * m.head_dim * s, L * 2.0 * m.num_kv_heads * m.head_dim * s)

    @classmethod
    def from_probe(cls, probe_dict: Mapping, model_shape, **kw) -> "RooflineModel":
        return cls(probe_dict, model_shape, **kw)

    def rates(self, sms: int) -> tuple[float, float]:
        r = self._rates.get(sms)
        if r is None:
            if sms <= 0:
                raise ValueError(f"partition of {sms} SMs")
            r = self._rates[sms] = probe_at(self.probe, sms)
        return r

    def prefill_ms(self, prefill_sms: int, reqs: Sequence[PrefillReq], extra: DecodeRows | None = None) -> float:
        """= roofline_ms(prefill_ops(...)) + overhead, without building the op list; ``extra``:
        one-token rows (`decode_rows`)."""
        if extra is not None:
            reqs = [*reqs, *extra.rows()]
        n = 0
        for q in reqs:
            n += q.n
        if n <= 0:
            return 0.0
        F, B = self.rates(prefill_sms)
        t = self._token_s(n, len(reqs), F, B)
        fa, ba, bkv = self._attn
        for q in reqs:
            qn = q.n
            f = fa * (qn * q.r + qn * (qn + 1) * 0.5) / F
            b = (ba * qn + bkv * (qn + q.r)) / B
            t += f if f > b else b
        return 1e3 * t + self.overhead_ms

    @staticmethod
    def decode_rows(contexts: Sequence[int]) -> DecodeRows:
        """One-token rows for `prefill_ms`'s ``extra``: their contexts alone (a roofline sums over
        rows; there is nothing to add up beforehand)."""
        return DecodeRows(tuple(sorted((int(c) for c in contexts), reverse=True)), 0, 0, (), (), 0)

    def decode_ms(self, decode_sms: int, bs: int, sum_reused: int, max_reused: float | None = None) -> float:
        """= roofline_ms(decode_ops(...)) + overhead, without building the op list.

        ``max_reused`` is accepted for SoloLatencyModel's interface and not used: a roofline
        has no notion of kernel occupancy (its decode attention is one memory-bound sum)."""
        if bs <= 0:
            return 0.0
        F, B = self.rates(decode_sms)
        fa, ba, bkv = self._attn
        pairs = bs + sum_reused
        f = fa * pairs / F
        b = (ba * bs + bkv * pairs) / B
        return 1e3 * (self._token_s(bs, bs, F, B) + (f if f > b else b)) + self.overhead_ms

    def _token_s(self, n: int, lm_tokens: int, F: float, B: float) -> float:
        t = 0.0
        for fpt, bpt, w in self._tok:
            f = fpt * n / F
            b = (bpt * n + w) / B
            t += f if f > b else b
        f = self._lm[0] * lm_tokens / F
        b = (self._lm[1] * lm_tokens + self._lm[2]) / B
        return t + (f if f > b else b)
