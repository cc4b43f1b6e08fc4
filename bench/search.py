"""Find a system's goodput by bisection instead of hand-picked rates (``bench.run --search``).

The rates tried so far and whether each passed decide the next one, so a search resumes from
the points already on disk: rerunning the same command replays them and goes on. The goodput
lies in [highest pass below the lowest failure, lowest failure); the search stops once the
interval's middle is within ±``tol`` of both its ends (±5 % by default), or when the lower
bound fails (goodput < lo) or the upper one passes (goodput ≥ hi).
"""
from __future__ import annotations

from typing import Mapping


def bracket(results: Mapping[float, bool]) -> tuple[float | None, float | None]:
    """(highest passing rate below the lowest failing one, lowest failing rate); None where
    there is none. A pass above a failure (noise) does not raise the lower bound."""
    fails = [r for r, ok in results.items() if not ok]
    f = min(fails) if fails else None
    passes = [r for r, ok in results.items() if ok and (f is None or r < f)]
    return (max(passes) if passes else None), f


def _round(x: float) -> float:
    return float(f"{x:.3g}")  # rate labels (and point files) stay readable


def next_rate(results: Mapping[float, bool], lo: float, hi: float, tol: float = 0.05) -> float | None:
    """The next rate to run, or None when the search is over."""
    if not 0 < lo < hi:
        raise ValueError(f"--search needs 0 < LO < HI, got {lo}, {hi}")
    if lo not in results:
        return lo
    p, f = bracket(results)
    if p is None:
        return None  # lo failed: goodput < lo
    if f is None:
        return hi if hi not in results else None  # hi passed: goodput >= hi
    if (f - p) / (f + p) <= tol:  # the middle is within ±tol of both ends
        return None
    mid = _round((p + f) / 2)
    return mid if p < mid < f and mid not in results else None
