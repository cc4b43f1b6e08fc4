"""Solo-run latency regressors (MuxWise §3.3.2, Equations 1 and 2), one fit per SM partition.

    prefill (Eq. 1):  T = θ1·Σn_i² + θ2·Σn_i·r_i + θ3·Σn_i + θ4
    decode  (Eq. 2):  T = θ1·Σr_i  + θ2·bs       + θ3

n_i = new tokens, r_i = reused (cached) tokens of request i; T in ms, whole model.

Fitting uses scikit-learn's non-negative least squares (``LinearRegression(positive=True)``)
on *relative* error (sample_weight = 1/latency²) because the accuracy target is relative
(max ≤ 10%, mean ≤ 3%) and latencies span three decades. The intercept is an explicit
column of ones so it, too, is constrained ≥ 0. Prediction never touches sklearn/numpy: the
coefficients are plain floats and a prediction is a handful of multiplications (the
dispatcher calls it many times per scheduling step; budget ≤ 20 µs).

Unprofiled partitions (``s`` SMs, not in the table):
  - between two profiled partitions lo < s < hi: the coefficients are interpolated linearly
    in 1/SMs (exact for work that scales perfectly with SMs, ``T ∝ 1/s``; a convex mix of
    non-negative θs stays non-negative);
  - above the largest profiled partition: that partition's coefficients are used — a
    conservative overestimate, since more SMs do not make a kernel slower;
  - below the smallest profiled partition: :class:`UnprofiledPartition` (a ValueError) —
    extrapolating to fewer SMs would underestimate, which breaks SLO guarantees.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

PREFILL_FEATURES = ("sum_new_sq", "sum_new_reused", "sum_new", "one")
DECODE_FEATURES = ("sum_reused", "bs", "one")


@dataclass(frozen=True)
class PrefillReq:
    n: int  # new tokens
    r: int = 0  # reused (cached) tokens


class UnprofiledPartition(ValueError):
    """Prediction asked for an SM count below every profiled partition."""


def prefill_features(reqs: Iterable[PrefillReq]) -> tuple[int, int, int]:
    """(Σn², Σn·r, Σn) of a prefill batch."""
    sq = nr = n = 0
    for q in reqs:
        sq += q.n * q.n
        nr += q.n * q.r
        n += q.n
    return sq, nr, n


def fit_nonneg(X, y, relative: bool = True) -> tuple[float, ...]:
    """Non-negative least squares of y ≈ X·θ (X includes the ones column), relative error.

    Columns are rescaled to max 1 first: Σn² reaches 1e10 while the ones column is 1, and the
    NNLS solver is badly conditioned on such ranges. Scaling by positives keeps θ ≥ 0.
    """
    import numpy as np
    from sklearn.linear_model import LinearRegression

    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    scale = np.abs(X).max(axis=0)
    scale[scale == 0] = 1.0
    w = 1.0 / (y * y) if relative else None
    reg = LinearRegression(positive=True, fit_intercept=False).fit(X / scale, y, sample_weight=w)
    return tuple(float(max(c, 0.0)) for c in reg.coef_ / scale)


def _design_prefill(df):
    import numpy as np
    return np.column_stack([df["sum_new_sq"], df["sum_new_reused"], df["sum_new"], np.ones(len(df))])


def _design_decode(df):
    import numpy as np
    return np.column_stack([df["sum_reused"], df["bs"], np.ones(len(df))])


def fit_prefill_frame(df) -> tuple[float, float, float, float]:
    """θ of Eq. 1 from rows of solo_prefill.csv (one partition)."""
    return fit_nonneg(_design_prefill(df), df["latency_ms"])


def fit_decode_frame(df) -> tuple[float, float, float]:
    """θ of Eq. 2 from rows of solo_decode.csv (one partition)."""
    return fit_nonneg(_design_decode(df), df["latency_ms"])


def predict_prefill_frame(theta: Sequence[float], df):
    return _design_prefill(df) @ list(theta)


def predict_decode_frame(theta: Sequence[float], df):
    return _design_decode(df) @ list(theta)


class _PartitionTable:
    """θ per SM count with the interpolation policy of the module docstring."""

    def __init__(self, thetas: Mapping[int, Sequence[float]], kind: str, width: int):
        if not thetas:
            raise ValueError(f"no {kind} partitions")
        self.kind = kind
        self.profiled: dict[int, tuple[float, ...]] = {}
        for s, th in thetas.items():
            th = tuple(float(t) for t in th)
            if len(th) != width or any(not (t >= 0.0) or t == float("inf") for t in th):
                raise ValueError(f"{kind} θ for {s} SMs must be {width} finite non-negative floats, got {th}")
            self.profiled[int(s)] = th
        self.sms = sorted(self.profiled)
        self._cache = dict(self.profiled)  # profiled + interpolated, the hot-path lookup

    def __call__(self, sms: int) -> tuple[float, ...]:
        th = self._cache.get(sms)
        if th is None:
            th = self._cache[sms] = self._derive(sms)
        return th

    def _derive(self, s: int) -> tuple[float, ...]:
        if s <= 0:
            raise UnprofiledPartition(f"{self.kind} partition of {s} SMs is not a partition")
        i = bisect.bisect_left(self.sms, s)
        if i == 0:
            raise UnprofiledPartition(
                f"{self.kind} partition of {s} SMs is below every profiled one {self.sms}; "
                f"profile it (python -m profiling.run ...) — extrapolating would underestimate")
        if i == len(self.sms):
            return self.profiled[self.sms[-1]]  # more SMs than profiled: conservative
        lo, hi = self.sms[i - 1], self.sms[i]
        w = (1.0 / s - 1.0 / hi) / (1.0 / lo - 1.0 / hi)  # weight of lo, linear in 1/SMs
        return tuple(w * a + (1.0 - w) * b for a, b in zip(self.profiled[lo], self.profiled[hi]))


class SoloLatencyModel:
    """Eq. 1 / Eq. 2 per partition. ``prefill_ms``/``decode_ms`` are the hot path."""

    def __init__(self, prefill: Mapping[int, Sequence[float]], decode: Mapping[int, Sequence[float]]):
        self._prefill = _PartitionTable(prefill, "prefill", 4)
        self._decode = _PartitionTable(decode, "decode", 3)

    @property
    def prefill_sms(self) -> list[int]:
        return list(self._prefill.sms)

    @property
    def decode_sms(self) -> list[int]:
        return list(self._decode.sms)

    def prefill_theta(self, prefill_sms: int) -> tuple[float, float, float, float]:
        return self._prefill(prefill_sms)

    def decode_theta(self, decode_sms: int) -> tuple[float, float, float]:
        return self._decode(decode_sms)

    def prefill_ms(self, prefill_sms: int, reqs: Sequence[PrefillReq]) -> float:
        """Solo latency of one whole-model prefill forward; 0 for an empty batch."""
        t = self._prefill(prefill_sms)
        sq = nr = n = 0
        for q in reqs:
            qn = q.n
            sq += qn * qn
            nr += qn * q.r
            n += qn
        if n <= 0:
            return 0.0
        return t[0] * sq + t[1] * nr + t[2] * n + t[3]

    def prefill_ms_sums(self, prefill_sms: int, sum_new_sq: float, sum_new_reused: float, sum_new: float) -> float:
        t = self._prefill(prefill_sms)
        return t[0] * sum_new_sq + t[1] * sum_new_reused + t[2] * sum_new + t[3]

    def decode_ms(self, decode_sms: int, bs: int, sum_reused: int) -> float:
        """Solo latency of one decode iteration; 0 for an empty batch."""
        if bs <= 0:
            return 0.0
        t = self._decode(decode_sms)
        return t[0] * sum_reused + t[1] * bs + t[2]

    # -- fitting / (de)serialization

    @classmethod
    def fit(cls, solo_prefill, solo_decode) -> "SoloLatencyModel":
        """One non-negative relative-error fit per partition from the two solo CSV frames."""
        pre = {int(s): fit_prefill_frame(g) for s, g in solo_prefill.groupby("prefill_sms")}
        dec = {int(s): fit_decode_frame(g) for s, g in solo_decode.groupby("decode_sms")}
        return cls(pre, dec)

    def to_dict(self) -> dict:
        """fit.json's core: {"prefill": {"<sms>": {"theta": [...]}}, "decode": {...}}."""
        return {
            "format": 1,
            "prefill_features": list(PREFILL_FEATURES),
            "decode_features": list(DECODE_FEATURES),
            "prefill": {str(s): {"theta": list(self._prefill.profiled[s])} for s in self._prefill.sms},
            "decode": {str(s): {"theta": list(self._decode.profiled[s])} for s in self._decode.sms},
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> "SoloLatencyModel":
        def thetas(kind):
            out = {}
            for s, v in d[kind].items():
                out[int(s)] = v["theta"] if isinstance(v, Mapping) else v
            return out
        return cls(thetas("prefill"), thetas("decode"))
