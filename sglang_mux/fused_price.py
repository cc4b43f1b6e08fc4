"""What a fused iteration costs in serving, learned online from its base GPU price.

The base price is the table's fused model (``latency_model.fused``, fitted on its measured fused
iterations) or, for a table without them, the solo prefill fit over the fused batch's rows plus
``DECODE_ROW_MS`` per decode row (`Estimator.fused_base_ms`). What is served can differ, and not by a
constant factor (eagerly, the layers' kernel launches bound small chunks); through SGLang's prefill
CUDA graph a table's base price is near the truth (``prior_holds``; a roofline's is not,
`Estimator.fused_prior_holds`). So served ms = ``fixed`` + ``slope`` x base ms, fitted by least squares on the last ``window``
iterations (refitted every ``refit``, and at each of the first ``warmup`` unless the prior holds),
plus ``margin``: the ``quantile`` of the residuals once ``warmup`` are seen, as a token's gap is
judged at P99. Until the middle half of base prices spreads over ``MIN_SPREAD`` of their median,
or where the fitted slope leaves ``SLOPE_BOUNDS``, a slope cannot be told from noise: the price is
then the higher of the median excess (slope 1, ``fixed``) and the median ratio (``ratio`` x base),
so that a chunk larger than those seen is not priced low. A batch's padded token count (the
prefill graph's size it runs at) adds ``bias`` where that size runs over the line more than the
rest: its median residual less the median of all, once ``SIZE_MIN_OBS`` of its batches are seen.
No size is priced below the line, so the price only rises where a size's own batches show it.
docs/measurements.md ("Fused price") gives the measurements behind each constant below.
"""

from __future__ import annotations

import bisect
from collections import deque
from typing import Callable, Sequence

import numpy as np

DECODE_ROW_MS = 0.027  # a one-token row's cost in an extend batch beyond its one-token query's
# SGLang 0.5.16's prefill CUDA graph runs an extend batch at the next token count it captured, the
# padding rows through every GEMM, unless that is over this factor of the batch or past the largest
# captured: then eagerly, unpadded (PrefillCudaGraphRunner.can_run).
GRAPH_PAD_FACTOR = 2
# The launcher captures the hybrid's prefill graph up to its largest fused batch: the largest of
# policy.CHUNK_SIZES, which count the decode rows.
HYBRID_GRAPH_MAX_TOKENS = 4096
# Outside this a fit is chasing noise or an outlier: the price takes the narrow spread's form instead.
SLOPE_BOUNDS = (0.5, 2.0)
RATIO_BOUNDS = (0.25, 10.0)  # measured / solo outside this is a glitch or a stall, not a price
# A slope needs base prices whose middle half (P25 to P75) spans this share of their median: fitted
# on one chunk size's cluster (or a few warm-up batches), noise sets the slope.
MIN_SPREAD = 0.25
SPREAD_QUANTILES = (0.25, 0.75)
# A size's own median residual needs this many of its batches (the last SIZE_WINDOW kept per size):
# the line over all sizes misses cuBLAS's per-size choices, and the hybrid, filling its budget with
# the largest chunk that fits, would take the underpriced sizes. Priced up only.
SIZE_MIN_OBS = 16
SIZE_WINDOW = 64


def sglang_graph_tokens(max_tokens: int) -> tuple[int, ...]:
    """The token counts SGLang 0.5.16 captures its prefill graph at, up to ``max_tokens`` (its
    ServerArgs._generate_prefill_cuda_graph_batch_sizes): for the simulator; a server reads them
    from its graph runner."""
    sizes = (*range(4, 33, 4), *range(48, 257, 16), *range(288, 513, 32), *range(576, 1025, 64),
             *range(1280, 4097, 256), *range(4608, max_tokens + 1, 512))
    return tuple(s for s in sizes if s <= max_tokens)


HYBRID_GRAPH_TOKENS = sglang_graph_tokens(HYBRID_GRAPH_MAX_TOKENS)


def hybrid_batch_size(tokens) -> int | None:
    """The captured size the hybrid's prefill graph runs a fused batch of ``tokens`` at (a served
    timeline row's ``extend_tokens``); None where it runs eagerly or the count is missing (None,
    NaN)."""
    if tokens is None or tokens != tokens:
        return None
    return captured_size(int(tokens), HYBRID_GRAPH_TOKENS)


def graph_cliffs(captured: Sequence[int], gemm_ms: Callable[[int], float]) -> dict[int, float]:
    """{captured size: ms its projections (``gemm_ms``: the table's GEMM curve on the whole GPU)
    take beyond the cheapest larger captured size's}, for every size that no larger one beats:
    cuBLAS's slow token counts, which the fused model's bands, fitted on other sizes, do not see
    (docs/measurements.md). ``captured`` ascending."""
    out: dict[int, float] = {}
    best = float("inf")
    for s in reversed(captured):
        g = gemm_ms(s)
        if g >= best:
            out[s] = g - best
        best = min(best, g)
    return out


def captured_size(tokens: int, captured: Sequence[int]) -> int | None:
    """The captured size SGLang's prefill graph runs an extend batch of ``tokens`` at (the batch
    padded, `graph_padding`), or None where it runs eagerly; ``captured`` ascending."""
    pad = graph_padding(tokens, captured)
    if pad:
        return tokens + pad
    i = bisect.bisect_left(captured, tokens)
    return tokens if tokens > 0 and i < len(captured) and captured[i] == tokens else None


def graph_padding(tokens: int, captured: Sequence[int]) -> int:
    """The rows SGLang's prefill graph adds to an extend batch of ``tokens`` (0: nothing
    captured, or the batch runs eagerly); ``captured`` ascending."""
    i = bisect.bisect_left(captured, tokens)
    if tokens <= 0 or i == len(captured) or captured[i] > GRAPH_PAD_FACTOR * tokens:
        return 0
    return captured[i] - tokens


class FusedPrice:
    """``price(solo_ms, size)``: the served time planned for; ``observe(solo_ms, measured_ms, size)``
    after each fused iteration (``size``: the batch's padded token count, `Estimator.fused_tokens`;
    None: no size of its own). Not thread-safe (the scheduler's thread only)."""

    def __init__(self, window: int = 256, refit: int = 32, warmup: int = 8, quantile: float = 0.9,
                 known: bool = False, prior_holds: bool = False):
        if window < 2 or refit < 1 or warmup < 0 or not 0.0 <= quantile <= 1.0:
            raise ValueError(f"bad FusedPrice settings: window={window} refit={refit} warmup={warmup} "
                             f"quantile={quantile}")
        self.fixed, self.slope, self.margin = 0.0, 1.0, 0.0
        self.ratio = 0.0  # the proportional floor of a narrow spread's price (0: none)
        self.bias: dict[int, float] = {}  # padded token count -> its excess over the line (ms, > 0)
        self.refit, self.warmup, self.quantile = refit, warmup, quantile
        self._obs: deque[tuple[float, float]] = deque(maxlen=window)
        self._by_size: dict[int, deque[tuple[float, float]]] = {}
        self._n = 0
        self.known = known  # set as the truth (a simulator's), not a prior to learn from
        # The prior (the base price: the solo fit and the row term) is near the truth, so it may
        # be acted on in full before any fused iteration is seen: through SGLang's prefill CUDA
        # graph an H100 served 5.3 ms + 0.937 x solo on code, 1.16 x solo on chat-1k's ~150-row
        # batches (~1.14 x is the row term); eagerly 15.1 ms + 0.854 x solo. It is still learned.
        self.prior_holds = prior_holds

    @property
    def learned(self) -> bool:
        """Whether the price may be acted on in full: ``known``, ``prior_holds``, or ``warmup``
        fused iterations seen."""
        return self.known or self.prior_holds or self._n >= self.warmup

    def price(self, solo_ms: float, size: int | None = None) -> float:
        return float(self._base(solo_ms)) + self.bias.get(size, 0.0) + self.margin if solo_ms > 0 else 0.0

    def _base(self, solo_ms):
        return np.maximum(self.fixed + self.slope * solo_ms, self.ratio * solo_ms)

    def observe(self, solo_ms: float, measured_ms: float, size: int | None = None) -> float | None:
        """Returns measured / the price in use before it (None: not taken, see RATIO_BOUNDS)."""
        if not (solo_ms > 0 and measured_ms > 0) or \
                not RATIO_BOUNDS[0] <= measured_ms / solo_ms <= RATIO_BOUNDS[1]:
            return None
        before = self.price(solo_ms, size)
        self._obs.append((solo_ms, measured_ms))
        if size is not None:
            self._by_size.setdefault(size, deque(maxlen=SIZE_WINDOW)).append((solo_ms, measured_ms))
        self._n += 1
        # A prior that holds is kept until ``refit`` iterations are seen: a server's first ones are
        # its warm-up's 1- and 64-token batches (2.2x and 0.5x the price on an H100), and a fit on
        # eight of them priced chat-1k's chunks 15 % high, and the hybrid never fused again.
        if (self._n <= self.warmup and not self.prior_holds) or self._n % self.refit == 0:
            self._fit()
        return measured_ms / before

    def _fit(self) -> None:
        x, y = np.array(self._obs).T
        q25, q75 = np.quantile(x, SPREAD_QUANTILES)
        slope = None
        if len(x) >= 2 and q75 - q25 >= MIN_SPREAD * np.median(x):
            slope, fixed = np.polyfit(x, y, 1)
            if fixed < 0:  # no fixed cost below zero: the slope through the origin (a clipped
                slope = x @ y / (x @ x)  # intercept left the slope too steep: 1.20 for a served 1.10)
        # A slope out of bounds is not clamped: clamped, it kept the outlier's pull in the fixed part
        # (served, a warm-up's 53 ms one-token batch among 31 chunks at 1.06 x gave 14 ms + 0.5 x,
        # pricing every small chunk 7 ms high, and the hybrid stopped fusing).
        if slope is not None and SLOPE_BOUNDS[0] <= slope <= SLOPE_BOUNDS[1]:
            slope, ratio = float(slope), 0.0
        else:
            slope, ratio = 1.0, float(np.median(y / x))
        self.slope, self.ratio = slope, ratio
        self.fixed = max(0.0, float(np.median(y - slope * x)))
        resid = y - self._base(x)
        typical = float(np.median(resid))
        self.bias = {}
        for size, obs in self._by_size.items():
            if len(obs) >= SIZE_MIN_OBS:
                sx, sy = np.array(obs).T
                excess = float(np.median(sy - self._base(sx))) - typical
                if excess > 0:
                    self.bias[size] = excess
        # A quantile of a few residuals is noise: on an H100 three fused iterations gave a 12 ms
        # margin, and no chunk fitted a TBT budget again.
        self.margin = max(0.0, float(np.quantile(resid, self.quantile))) if len(x) >= max(self.warmup, 2) else 0.0

    @staticmethod
    def base_of(price_ms: float, mapping: dict) -> float:
        """The base price whose `price` under ``mapping`` (`to_dict`'s, e.g. from a timeline row)
        is ``price_ms``: price = max(fixed + slope x base, ratio x base) + bias + margin, so the base
        is the smaller of the two branches' inverses. NaN if neither gives a positive one."""
        p = price_ms - mapping["margin_ms"] - mapping.get("bias_ms", 0.0)
        cands = []
        if mapping["slope"] > 0:
            cands.append((p - mapping["fixed_ms"]) / mapping["slope"])
        if mapping["ratio"] > 0:
            cands.append(p / mapping["ratio"])
        b = min(cands, default=float("nan"))
        return b if b > 0 else float("nan")

    def to_dict(self, size: int | None = None) -> dict[str, float]:
        """The price's state; with ``size``, that size's ``bias_ms`` too."""
        out = {"fixed_ms": round(self.fixed, 3), "slope": round(self.slope, 4), "ratio": round(self.ratio, 4),
               "margin_ms": round(self.margin, 3)}
        if size is not None:
            out["bias_ms"] = round(self.bias.get(size, 0.0), 3)
        return out
