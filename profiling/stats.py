"""Small pure helpers of the profiler (CPU-tested): medians, spread, co-run overlap."""

from __future__ import annotations

import math
import statistics
from typing import Iterable, Sequence

INF = math.inf


def median(xs: Sequence[float]) -> float:
    if not xs:
        raise ValueError("no samples")
    return float(statistics.median(xs))


def spread_pct(xs: Sequence[float]) -> float:
    """(max - min) / median in percent; 0 for fewer than two samples."""
    if len(xs) < 2:
        return 0.0
    m = median(xs)
    return 100.0 * (max(xs) - min(xs)) / m if m > 0 else INF


def merge_intervals(intervals: Iterable[tuple[float, float]], gap_tol: float = 0.05) -> list[tuple[float, float]]:
    """Union of [start, end] intervals (ms); gaps up to ``gap_tol`` are bridged (the prefill
    stream stays busy across back-to-back launches). ``end`` may be INF (still running)."""
    out: list[list[float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1] + gap_tol:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def inside(ts: float, te: float, merged: Sequence[tuple[float, float]]) -> bool:
    """Does [ts, te] lie within one interval of the union?"""
    return any(a <= ts and te <= b for a, b in merged)


def classify_overlap(decode: Sequence[tuple[float, float]], prefill: Sequence[tuple[float, float]],
                     gap_tol: float = 0.05) -> tuple[list[float], list[float]]:
    """Split decode iterations [(start, end)] into (overlapped durations, other durations):
    overlapped = fully inside the union of prefill launch intervals."""
    merged = merge_intervals(prefill, gap_tol)
    over, other = [], []
    for ts, te in decode:
        (over if inside(ts, te, merged) else other).append(te - ts)
    return over, other


def overhead_pct(base_ms: float, other_ms: float) -> float:
    return 100.0 * (other_ms - base_ms) / base_ms
