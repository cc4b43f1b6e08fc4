"""The prefill projections' measured time per partition and batch token count (a table's
``gemm_curve.csv``, made by ``python -m profiling.gemm_curve``; fit.json ``gemm_curve``).

The prefill model (θ10, ``gemm_curve_ms``) multiplies this curve instead of modelling the
projections, whose cuBLAS kernels jump with the token count (docs/latency_model.md). Between
measured token counts the curve is linear; past the largest it goes on along its last two points; below the smallest it stays at the smallest's time. Between two
profiled partitions it is interpolated linearly in 1/SMs (as the θs are); above the largest,
that partition's curve is used; below the smallest there is none (``UnprofiledCurve``, a
ValueError). Times are ms (whole model); a curve needs >= 2 distinct positive token counts and
positive finite times per partition, else ValueError.
"""

from __future__ import annotations

import bisect
from typing import Mapping, Sequence


def _lerp(t0: float, t1: float, y0: float, y1: float, m: float) -> float:
    return y0 + (y1 - y0) * (m - t0) / (t1 - t0)


class UnprofiledCurve(ValueError):
    """No curve for an SM count below every profiled partition."""


class GemmCurves:
    """{prefill SMs: (token counts, whole-model projection ms)}; ``at`` is the hot path."""

    def __init__(self, curves: Mapping[int, tuple[Sequence[float], Sequence[float]]]):
        if not curves:
            raise ValueError("a GEMM curve needs at least one partition")
        self._pts: dict[int, tuple[list[float], list[float]]] = {}
        for s, (tok, ms) in curves.items():
            pts = sorted(zip((float(t) for t in tok), (float(m) for m in ms)))
            if len(pts) < 2 or len({t for t, _ in pts}) != len(pts):
                raise ValueError(f"GEMM curve of {s} SMs needs at least 2 distinct token counts, got {len(pts)}")
            if any(not (t > 0 and m > 0 and m < float("inf")) for t, m in pts):
                raise ValueError(f"GEMM curve of {s} SMs has a non-positive or non-finite point")
            self._pts[int(s)] = ([t for t, _ in pts], [m for _, m in pts])
        self.sms = sorted(self._pts)

    @classmethod
    def from_frame(cls, df) -> "GemmCurves":
        """From gemm_curve.csv rows (prefill_sms, tokens, gemm_ms); repeated points: their median."""
        g = df.groupby(["prefill_sms", "tokens"], as_index=False)["gemm_ms"].median()
        return cls({int(s): (part["tokens"].tolist(), part["gemm_ms"].tolist())
                    for s, part in g.groupby("prefill_sms")})

    def to_dict(self) -> dict:
        return {str(s): {"tokens": [int(t) for t in tok], "ms": list(ms)}
                for s, (tok, ms) in sorted(self._pts.items())}

    @classmethod
    def from_dict(cls, d: Mapping) -> "GemmCurves":
        try:
            return cls({int(s): (v["tokens"], v["ms"]) for s, v in d.items()})
        except (KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"gemm_curve must map SM counts to {{'tokens': [...], 'ms': [...]}} ({e!r})") from None

    def points(self, sms: int) -> tuple[list[float], list[float]]:
        return self._pts[sms]

    def _one(self, sms: int, m: float) -> float:
        tok, ms = self._pts[sms]
        i = bisect.bisect_left(tok, m)
        if i < len(tok) and tok[i] == m:
            return ms[i]
        if i == 0:
            return ms[0]
        if i == len(tok):
            i -= 1  # past the last point: along the last two
        return _lerp(tok[i - 1], tok[i], ms[i - 1], ms[i], m)

    def at(self, sms: int, m: float) -> float:
        """Projection time (ms, whole model) of an m-token batch on an ``sms``-SM partition."""
        if sms in self._pts:
            return self._one(sms, m)
        i = bisect.bisect_left(self.sms, sms)
        if i == 0:
            raise UnprofiledCurve(f"no GEMM curve for {sms} SMs: below every profiled partition {self.sms}")
        if i == len(self.sms):
            return self._one(self.sms[-1], m)
        lo, hi = self.sms[i - 1], self.sms[i]
        w = (1.0 / sms - 1.0 / hi) / (1.0 / lo - 1.0 / hi)
        return w * self._one(lo, m) + (1.0 - w) * self._one(hi, m)

    def column(self, sms: int, tokens) -> list[float]:
        return [self.at(sms, float(m)) for m in tokens]

    def leave_one_out(self, sms: int) -> list[tuple[float, float]]:
        """(tokens, interpolated/measured − 1) of each inner point predicted from its two
        neighbours alone: how far off a token count between measured ones may be."""
        tok, ms = self._pts[sms]
        out = []
        for i in range(1, len(tok) - 1):
            out.append((tok[i], _lerp(tok[i - 1], tok[i + 1], ms[i - 1], ms[i + 1], tok[i]) / ms[i] - 1.0))
        return out
