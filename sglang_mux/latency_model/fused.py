"""The fused iteration's GPU time ("token bands"), fitted on a table's profiled fused rows.

A fused iteration (SGLang's ``--enable-mixed-chunk``) is one extend batch on the whole GPU: a
prompt chunk's pieces (n new tokens over r cached ones each) and one-token decode rows (each on
its KV context). With T = the batch's tokens (the pieces' n, one per decode row):

    ms = θa·min(T, k1) + θb·min((T − k1)+, k2 − k1) + θc·(T − k2)+ + θd·Σn·r + θe·Σn² + θf·Σctx

Σn·r and Σn² over the pieces, Σctx over the decode rows; knots k1 < k2 in batch tokens. A row of
one new token is a decode row (its r its context), any other a piece. θ: ms per token, per token,
per token, per (token, cached key), per token², per context token; all >= 0 and finite. T in the
bands is at least ``min_tokens``, the fewest of a fitted batch: below it the bands would
extrapolate to no weight reads at all, so a smaller batch is priced as a bound (as the solo fit
prices batches below its smallest).

- ``FusedModel``: knots and θ; ``ms`` / ``price`` (hot path: plain floats, no numpy);
  ``to_dict`` / ``from_dict`` (fit.json's ``fused``; a bad one raises ValueError).
- ``sums``: (T, Σn·r, Σn², Σctx) of extend rows, one pass.
- ``fit`` (NNLS on relative error, the solo fit's ``fit_nonneg``) and ``heldout_errors``
  (k-fold, as the solo check's): numpy/scipy, imported when called.

docs/latency_model.md ("The fused iteration") says why each term and what it was measured on.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Sequence

from .terms import PrefillReq

# Batch tokens where the token-linear work's rate changes on an H100 (cuBLAS's tile steps: a
# 513-token batch already costs a 544-token one): chosen on H100 rows, fitted with them.
KNOTS = (384, 640)


class FusedTheta(NamedTuple):
    """The fused model's coefficients (fit.json ``fused.theta``, in this order)."""

    tokens_to_k1: float  # θa: ms per batch token up to k1
    tokens_k1_to_k2: float  # θb: ms per batch token from k1 to k2
    tokens_past_k2: float  # θc: ms per batch token past k2
    sum_new_reused: float  # θd: ms per (new token, cached key) of the pieces
    sum_new_sq: float  # θe: ms per new token² of the pieces
    decode_context: float  # θf: ms per context token of the decode rows


FUSED_FEATURES: tuple[str, ...] = FusedTheta._fields


def sums(rows: Sequence[PrefillReq]) -> tuple[int, int, int, int]:
    """(T, Σn·r, Σn², Σctx) of extend rows; a row of n = 1 is a decode row on context r."""
    t = nr = nn = ctx = 0
    for q in rows:
        n = q.n
        t += n
        if n == 1:
            ctx += q.r
        else:
            nr += n * q.r
            nn += n * n
    return t, nr, nn, ctx


class FusedModel:
    """Token bands over the knots ``knots`` with coefficients ``theta``, T raised to ``min_tokens``
    (module docstring)."""

    def __init__(self, knots: Sequence[int], theta: Sequence[float], min_tokens: int = 0):
        k1, k2 = (int(k) for k in knots)
        if not 0 < k1 < k2:
            raise ValueError(f"fused knots must be 0 < k1 < k2, got {list(knots)}")
        if not (isinstance(min_tokens, int) and min_tokens >= 0):
            raise ValueError(f"fused min_tokens must be an integer >= 0, got {min_tokens!r}")
        if len(theta) != len(FUSED_FEATURES):
            raise ValueError(f"fused θ must have {len(FUSED_FEATURES)} values {list(FUSED_FEATURES)}, "
                             f"got {len(theta)}")
        if not all(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0 for v in theta):
            raise ValueError(f"fused θ must be finite and >= 0, got {list(theta)}")
        self.knots = (k1, k2)
        self.theta = FusedTheta(*(float(v) for v in theta))
        self.min_tokens = min_tokens

    def ms(self, tokens: float, nr: float, nn: float, ctx: float) -> float:
        """GPU ms of a batch of ``tokens`` (T) with the pieces' Σn·r, Σn² and the decode rows' Σctx."""
        k1, k2 = self.knots
        a, b, c, d, e, f = self.theta
        if tokens < self.min_tokens:
            tokens = self.min_tokens
        return (a * min(tokens, k1) + b * min(max(tokens - k1, 0), k2 - k1) + c * max(tokens - k2, 0)
                + d * nr + e * nn + f * ctx)

    def price(self, rows: Sequence[PrefillReq]) -> float:
        """GPU ms of a batch of extend rows."""
        return self.ms(*sums(rows))

    def to_dict(self) -> dict:
        return {"features": list(FUSED_FEATURES), "knots": list(self.knots), "min_tokens": self.min_tokens,
                "theta": list(self.theta)}

    @classmethod
    def from_dict(cls, d) -> "FusedModel":
        if not isinstance(d, dict) or "knots" not in d or "theta" not in d:
            raise ValueError("fused must be an object with 'knots' and 'theta'")
        if d.get("features", list(FUSED_FEATURES)) != list(FUSED_FEATURES):
            raise ValueError(f"fused features {d['features']} are not this version's {list(FUSED_FEATURES)}")
        if not isinstance(d["knots"], list) or len(d["knots"]) != 2:
            raise ValueError(f"fused knots must be two token counts, got {d['knots']!r}")
        return cls(d["knots"], d["theta"], d.get("min_tokens", 0))


def features(rows: Sequence[PrefillReq], knots: Sequence[int] = KNOTS) -> list[float]:
    """The six features of a batch in FUSED_FEATURES order (θ · features = ``FusedModel.ms``)."""
    t, nr, nn, ctx = sums(rows)
    k1, k2 = knots
    return [min(t, k1), min(max(t - k1, 0), k2 - k1), max(t - k2, 0), nr, nn, ctx]


def fit(batches: Sequence[Sequence[PrefillReq]], measured_ms: Sequence[float],
        knots: Sequence[int] = KNOTS) -> FusedModel:
    """θ >= 0 minimizing the squared relative error over measured batches (at least one)."""
    from .fit import fit_nonneg

    X = [features(b, knots) for b in batches]
    return FusedModel(knots, fit_nonneg(X, measured_ms), min_tokens=min(sums(b)[0] for b in batches))


def heldout_errors(batches: Sequence[Sequence[PrefillReq]], measured_ms: Sequence[float], folds: int = 5,
                   seed: int = 0, knots: Sequence[int] = KNOTS):
    """|price / measured − 1| of each batch, priced by a fit without its fold (the rows in a seeded
    random order, every k-th a fold: the solo check's scheme). A numpy array."""
    import numpy as np

    from .fit import kfold

    y = np.asarray(measured_ms, dtype=float)
    err = np.empty(len(y))
    for test, train in kfold(len(y), folds, seed):
        m = fit([batches[i] for i in train], y[train], knots)
        err[test] = [abs(m.price(batches[i]) / y[i] - 1.0) for i in test]
    return err
