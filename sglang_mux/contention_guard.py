"""Contention guard (MuxWise §3.3.2): the max decode slowdown of a grid cell.

Grid: per decode partition (decode_sms), four axes (``AXES``: prefill_new, prefill_reused,
decode_bs, decode_reused_per_req), each the sorted distinct values of contention.csv. A query
falls in the cell [p_i, p_i+1) of each axis (the last closed); a cell's value is the max
slowdown measured at its corners (corun / solo, and corun / predicted solo when ``build`` gets
a predictor, so that predicted solo × guard >= measured corun on every row). A cell with no
measured corner gets its partition's max.

``lookup`` (about 1-2 µs) returns a slowdown >= 1.0 (``FLOOR``):
- outside the grid: the nearest edge cell (coordinates clamped) × ``outside_margin`` (>= 1, 1.1);
- an unprofiled decode partition: the max of its two profiled neighbours' values; below or
  above every profiled one, the nearest × ``outside_margin``;
- ``profiled=True``: the table's value, without online refinement.

Online refinement (``observe``): until a partition has ``SCALE_MIN_OBS`` served co-runs, a
cell's value in use is at least the largest slowdown served in it; from then on the table's
values times the host scale, the ``SCALE_QUANTILE`` quantile of the last ``SCALE_WINDOW``
ratios served / table (up or down). Malformed axes, cells or margins raise ValueError.
docs/estimator.md ("Contention guard") gives the measurements behind these rules.
"""

from __future__ import annotations

import bisect
from bisect import bisect_right
import heapq
import itertools
import math
from collections import deque
from typing import Callable, Mapping, Sequence

AXES = ("prefill_new", "prefill_reused", "decode_bs", "decode_reused_per_req")
OUTSIDE_MARGIN = 1.1
FLOOR = 1.0
SCALE_WINDOW = 512  # served co-runs a partition's host scale looks back on (15-30 s of serving)
SCALE_MIN_OBS = 128
SCALE_QUANTILE = 0.99
SCALE_EVERY = 16  # recompute the quantile every this many observations (it moves slowly)


def _num(v: float):
    v = float(v)
    return int(v) if v.is_integer() else v


class ContentionGuard:
    """Grid-cell max slowdown per decode partition; see the module docstring for the policy."""

    def __init__(self, axes: Mapping[str, Sequence[float]], cells: Mapping[int, list],
                 outside_margin: float = OUTSIDE_MARGIN, points: Mapping[int, list] | None = None,
                 measured_range: tuple[float, float] | None = None):
        self.axes = {a: [_num(v) for v in axes[a]] for a in AXES}
        for a, pts in self.axes.items():
            if not pts or any(b <= a_ for a_, b in zip(pts, pts[1:])):
                raise ValueError(f"guard axis {a} must be non-empty and strictly increasing, got {pts}")
        if not outside_margin >= 1.0:
            raise ValueError(f"outside_margin must be >= 1, got {outside_margin}")
        self.outside_margin = float(outside_margin)
        self._ax = [self.axes[a] for a in AXES]  # hot-path copies
        self._lastidx = [len(p) - 1 for p in self._ax]
        self._maxcell = [max(len(p) - 2, 0) for p in self._ax]
        shape = [max(len(p) - 1, 1) for p in self._ax]
        self._cells: dict[int, list] = {}  # the table's values; refinement never writes them
        for d, c in cells.items():
            _check_shape(c, shape, f"cells[{d}]")
            self._cells[int(d)] = _copy(c)
        self._seen = {d: _zeros(c) for d, c in self._cells.items()}  # max slowdown served per cell
        if not self._cells:
            raise ValueError("guard has no decode partitions")
        self.partitions = sorted(self._cells)
        self._points = {int(d): p for d, p in (points or {}).items()}
        self.measured_range = measured_range
        self._outside: dict[tuple, float] = {}  # (d, i0..i3) -> max slowdown seen outside the grid
        self._unprofiled: dict[int, float] = {}  # decode_sms not profiled -> max slowdown seen
        self._ratios: dict[int, deque] = {}  # profiled decode_sms -> served slowdown / table's value
        self._scale: dict[int, float] = {}  # profiled decode_sms -> host scale, once SCALE_MIN_OBS are in
        self._nobs: dict[int, int] = {}

    # ------------------------------------------------------------------ hot path

    def lookup(self, decode_sms: int, bs: int, sum_reused: float, prefill_new: float,
               prefill_reused: float, profiled: bool = False) -> float:
        """Worst-case decode slowdown (>= 1) for this decode batch next to this prefill;
        ``profiled``: the table's value, without what serving has refined."""
        cells = self._cells.get(decode_sms)
        if cells is None:
            return self._lookup_unprofiled(decode_sms, bs, sum_reused, prefill_new, prefill_reused, profiled)
        i0, i1, i2, i3, out = self._locate4(bs, sum_reused, prefill_new, prefill_reused)
        v = cells[i0][i1][i2][i3]
        if out:
            v *= self.outside_margin
        if not profiled:
            s = self._scale.get(decode_sms)
            if s is not None:
                v *= s
            else:
                seen = self._outside.get((decode_sms, i0, i1, i2, i3), 0.0) if out else \
                    self._seen[decode_sms][i0][i1][i2][i3]
                if seen > v:
                    v = seen
        return v if v > FLOOR else FLOOR

    def _locate4(self, bs, sum_reused, prefill_new, prefill_reused):
        """Cell indices on the 4 axes and whether the query is outside the grid. Cell i of an
        axis is [p_i, p_i+1) (the last one closed); unrolled because this is the hot path."""
        a0, a1, a2, a3 = self._ax
        l0, l1, l2, l3 = self._lastidx
        out = False
        i0 = bisect_right(a0, prefill_new) - 1
        if i0 < 0:
            i0, out = 0, True
        elif i0 >= l0:
            out, i0 = out or prefill_new > a0[-1], self._maxcell[0]
        i1 = bisect_right(a1, prefill_reused) - 1
        if i1 < 0:
            i1, out = 0, True
        elif i1 >= l1:
            out, i1 = out or prefill_reused > a1[-1], self._maxcell[1]
        i2 = bisect_right(a2, bs) - 1
        if i2 < 0:
            i2, out = 0, True
        elif i2 >= l2:
            out, i2 = out or bs > a2[-1], self._maxcell[2]
        rr = sum_reused / bs if bs > 0 else 0.0
        i3 = bisect_right(a3, rr) - 1
        if i3 < 0:
            i3, out = 0, True
        elif i3 >= l3:
            out, i3 = out or rr > a3[-1], self._maxcell[3]
        return i0, i1, i2, i3, out

    def _lookup_unprofiled(self, d, bs, sum_reused, prefill_new, prefill_reused, profiled=False) -> float:
        ps = self.partitions
        i = bisect.bisect_left(ps, d)
        if 0 < i < len(ps):
            v = max(self.lookup(ps[i - 1], bs, sum_reused, prefill_new, prefill_reused, profiled),
                    self.lookup(ps[i], bs, sum_reused, prefill_new, prefill_reused, profiled))
        else:
            near = ps[0] if i == 0 else ps[-1]
            v = self.lookup(near, bs, sum_reused, prefill_new, prefill_reused, profiled) * self.outside_margin
        return v if profiled else max(v, self._unprofiled.get(d, FLOOR))

    # ------------------------------------------------------------------ refinement

    def observe(self, decode_sms: int, bs: int, sum_reused: float, prefill_new: float,
                prefill_reused: float, slowdown: float) -> None:
        """A served co-run's decode slowdown: raises its cell's value in use if larger, and
        feeds the partition's host scale."""
        if not (slowdown > 0.0 and math.isfinite(slowdown)):
            return
        cells = self._cells.get(decode_sms)
        if cells is None:
            if slowdown > self._unprofiled.get(decode_sms, 0.0):
                self._unprofiled[decode_sms] = slowdown
            return
        i0, i1, i2, i3, out = self._locate4(bs, sum_reused, prefill_new, prefill_reused)
        table = cells[i0][i1][i2][i3] * (self.outside_margin if out else 1.0)
        if decode_sms not in self._scale:  # the max raise, until the scale replaces it for good
            if out:
                key = (decode_sms, i0, i1, i2, i3)
                if slowdown > self._outside.get(key, 0.0):
                    self._outside[key] = slowdown
            else:
                row = self._seen[decode_sms][i0][i1][i2]
                if slowdown > row[i3]:
                    row[i3] = slowdown
        self._observe_scale(decode_sms, slowdown / (table if table > FLOOR else FLOOR))

    def _observe_scale(self, decode_sms: int, ratio: float) -> None:
        buf = self._ratios.get(decode_sms)
        if buf is None:
            buf = self._ratios[decode_sms] = deque(maxlen=SCALE_WINDOW)
            self._nobs[decode_sms] = 0
        buf.append(ratio)
        self._nobs[decode_sms] += 1
        if len(buf) < SCALE_MIN_OBS or self._nobs[decode_sms] % SCALE_EVERY:
            return
        n = len(buf)
        # The q-quantile as the k-th largest ratio (k >= 1: the 99th percentile of 512 is the 5th largest).
        k = max(1, int((1.0 - SCALE_QUANTILE) * n))
        self._scale[decode_sms] = heapq.nlargest(k, buf)[-1]

    def scale(self, decode_sms: int) -> float:
        """The host scale in use for a profiled partition (1.0 until it has SCALE_MIN_OBS co-runs)."""
        return self._scale.get(decode_sms, 1.0)

    # ------------------------------------------------------------------ inspection

    def cell_values(self, decode_sms: int) -> list[float]:
        """Flat list of the partition's cell values (check/report)."""
        return list(_flatten(self._cells[decode_sms]))

    def max_value(self) -> float:
        return max(max(self.cell_values(d)) for d in self.partitions)

    # ------------------------------------------------------------------ build / (de)serialize

    @classmethod
    def build(cls, contention, solo_predict: Callable[[int, int, int, float], float] | None = None,
              outside_margin: float = OUTSIDE_MARGIN) -> "ContentionGuard":
        """From contention.csv's frame; ``solo_predict(decode_sms, bs, sum_reused, max_reused)``
        optional (rows are uniform batches: max_reused = decode_reused_per_req)."""
        import numpy as np

        df = contention
        axes = {a: sorted(set(float(v) for v in df[a])) for a in AXES}
        shape_p = [len(axes[a]) for a in AXES]
        idx = [np.searchsorted(axes[a], df[a].to_numpy(dtype=float)) for a in AXES]
        corun = df["decode_corun_ms"].to_numpy(dtype=float)
        sd = corun / df["decode_solo_ms"].to_numpy(dtype=float)
        if solo_predict is not None:
            pred = np.array([solo_predict(int(d), int(b), int(round(b * r)), float(r)) for d, b, r in
                             zip(df["decode_sms"], df["decode_bs"], df["decode_reused_per_req"])])
            sd = np.maximum(sd, corun / pred)
        dsms = df["decode_sms"].to_numpy(dtype=int)
        cells, points = {}, {}
        # Corner offsets per axis: a 1-point axis has one "cell" whose only corner is offset 0.
        offsets = list(itertools.product(*[(0, 1) if k > 1 else (0,) for k in shape_p]))
        shape_c = [max(k - 1, 1) for k in shape_p]
        for d in sorted(set(dsms.tolist())):
            m = dsms == d
            P = np.full(shape_p, np.nan)
            np.fmax.at(P, tuple(i[m] for i in idx), sd[m])
            C = np.full(shape_c, np.nan)
            for off in offsets:
                sl = tuple(slice(o, o + n) for o, n in zip(off, shape_c))
                C = np.fmax(C, P[sl])
            C[np.isnan(C)] = np.nanmax(P)  # no measured corner: partition max (conservative)
            cells[int(d)] = C.tolist()
            points[int(d)] = [None if math.isnan(v) else v for v in P.ravel().tolist()]
        raw = (corun / df["decode_solo_ms"].to_numpy(dtype=float))
        return cls(axes, cells, outside_margin, points, (float(raw.min()), float(raw.max())))

    def to_dict(self) -> dict:
        """guard.json: axes, per-partition nested cell lists, measured grid points (flat, C order)."""
        return {
            "format": 1,
            "axes": {a: list(self.axes[a]) for a in AXES},
            "axis_order": list(AXES),
            "outside_margin": self.outside_margin,
            "floor": FLOOR,
            "measured_slowdown_min": self.measured_range[0] if self.measured_range else None,
            "measured_slowdown_max": self.measured_range[1] if self.measured_range else None,
            "cells": {str(d): _copy(self._cells[d]) for d in self.partitions},
            "points": {str(d): p for d, p in self._points.items()},
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> "ContentionGuard":
        mr = None
        if d.get("measured_slowdown_min") is not None:
            mr = (float(d["measured_slowdown_min"]), float(d["measured_slowdown_max"]))
        return cls(d["axes"], {int(k): v for k, v in d["cells"].items()},
                   float(d.get("outside_margin", OUTSIDE_MARGIN)),
                   {int(k): v for k, v in (d.get("points") or {}).items()}, mr)


class ConstantGuard:
    """Cold-start guard: one conservative slowdown everywhere (MuxWise's H100 max is 1.3),
    raised per partition by observations; never lowered."""

    def __init__(self, value: float = 1.3):
        if not value >= 1.0:
            raise ValueError(f"constant guard must be >= 1, got {value}")
        self.value = float(value)
        self._seen: dict[int, float] = {}

    def lookup(self, decode_sms, bs, sum_reused, prefill_new, prefill_reused, profiled: bool = False) -> float:
        v = None if profiled else self._seen.get(decode_sms)
        return self.value if v is None or v < self.value else v

    def observe(self, decode_sms, bs, sum_reused, prefill_new, prefill_reused, slowdown) -> None:
        if slowdown > self._seen.get(decode_sms, 0.0) and math.isfinite(slowdown):
            self._seen[decode_sms] = float(slowdown)

    def max_value(self) -> float:
        return max([self.value, *self._seen.values()])


def _check_shape(c, shape, what):
    if not isinstance(c, list) or len(c) != shape[0]:
        raise ValueError(f"guard {what}: expected length {shape[0]}, got {len(c) if isinstance(c, list) else type(c).__name__}")
    for sub in c:
        if len(shape) > 1:
            _check_shape(sub, shape[1:], what)
        elif not (isinstance(sub, (int, float)) and math.isfinite(sub) and sub > 0):
            raise ValueError(f"guard {what}: cell value must be a finite positive number, got {sub!r}")


def _zeros(c):
    return [_zeros(x) for x in c] if isinstance(c, list) else 0.0


def _copy(c):
    return [_copy(x) for x in c] if isinstance(c, list) else float(c)


def _flatten(c):
    for x in c:
        if isinstance(x, list):
            yield from _flatten(x)
        else:
            yield x
