"""The host time a token's gap pays beyond the GPU's: measured per kind of iteration, told the policy.

`DecodeHostTime` keeps one budget (a quantile of recent gaps less GPU time); `HostBudgets` owns the
four a server keeps and fills a `Snapshot`'s host fields from them. The scheduler loop and the
simulator both book into a `HostBudgets` and read a snapshot's fields from it, so that they plan
alike. docs/engine.md says why each budget exists.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

FUSED_HOST_QUANTILE = 0.99  # a fused iteration's budget: the TBT SLO's own percentile


class DecodeHostTime:
    """The ``quantile`` of the last ``window`` gaps (wall time between two consecutive results
    that gave decoding requests a token, less the later one's GPU time), recomputed every
    ``refresh`` observations to keep the loop's cost flat. ``stall_ms``: gaps over it are stalls
    that no plan avoids, so the quantile is taken over the rest while the rest is most of the
    window (more often than that, they are the host's pace). The median counts them all.
    ``ready``: enough observations that the quantile is not the largest one seen; ``budget_ms``:
    what a policy books, before that too."""

    def __init__(self, window: int = 256, quantile: float = 0.9, refresh: int = 32,
                 stall_ms: float | None = None):
        if window <= 0 or refresh <= 0 or not 0.0 <= quantile <= 1.0:
            raise ValueError("window and refresh must be positive and quantile in [0, 1]")
        if stall_ms is not None and not stall_ms > 0.0:
            raise ValueError(f"stall_ms must be > 0 ms or None, got {stall_ms}")
        self.window, self.quantile, self.refresh = int(window), float(quantile), int(refresh)
        self.stall_ms = stall_ms
        self._gaps: list[float] = []
        self._seen = 0
        self.value_ms = 0.0
        self.median_ms = 0.0  # the same window's median (what an iteration adds on the median)
        self.resolved_ms = 0.0  # the quantile, or (too few seen) the highest rank with two above it

    def observe(self, wall_ms: float, gpu_ms: float) -> None:
        if not (wall_ms >= 0.0 and gpu_ms >= 0.0):
            return
        self._gaps.append(max(0.0, wall_ms - gpu_ms))
        if len(self._gaps) > self.window:
            del self._gaps[0]
        self._seen += 1
        if self._seen % self.refresh == 0 or self._seen <= self.refresh:
            g = sorted(self._gaps)
            self.median_ms = g[len(g) // 2]
            if self.stall_ms is not None:
                k = bisect.bisect_right(g, self.stall_ms)
                if k > len(g) // 2:
                    g = g[:k]
            i = int(self.quantile * len(g))
            self.value_ms = g[min(len(g) - 1, i)]
            self.resolved_ms = g[max(0, min(i, len(g) - 3))]

    @property
    def ready(self) -> bool:
        """Whether the window holds 2 / (1 - quantile) observations (200 for a P99): below that
        the quantile is the window's maximum, and a budget taken from one outlier may fit no
        chunk again, so that no iteration comes to lower it."""
        return self.quantile < 1.0 and len(self._gaps) >= min(self.window, 2.0 / (1.0 - self.quantile))

    @property
    def budget_ms(self) -> float | None:
        """``value_ms`` once ``ready``; before, from 3 observations on, ``resolved_ms``: the
        quantile's rank or, where that is among the two largest, the rank below them. None with
        fewer (the policy then books the decode's host time). Neither extreme works: the largest
        overrun seen can fit no chunk again, and a decode's host time (0 beside overlapped
        decodes) lets the first fused iterations fill the SLO."""
        if self.ready:
            return self.value_ms
        return self.resolved_ms if len(self._gaps) >= 3 else None


@dataclass
class HostBudgets:
    """The budgets of a token's gap by the kind of iteration that gave it: ``decode`` (any decode
    iteration), ``fused`` (a fused iteration, against its planned price), ``start`` (a decode
    iteration whose plan started a layer-wise batch, also booked to ``decode``) and
    ``fused_start`` (the first fused iteration of a streak, not booked to ``fused``). A None
    budget is not kept: the policy is told ``decode_ms`` for a decode (a fixed host time; 0 by
    default) and ``fused_ms`` for a fused iteration (None: the decode's)."""

    decode: DecodeHostTime | None = None
    fused: DecodeHostTime | None = None
    start: DecodeHostTime | None = None
    fused_start: DecodeHostTime | None = None
    decode_ms: float = 0.0
    fused_ms: float | None = None

    @classmethod
    def measured(cls, stall_ms: float, *, quantile: float = 0.9, fused_quantile: float = FUSED_HOST_QUANTILE,
                 decode: bool = True, fused: bool = True, start: bool = True, fused_start: bool = False,
                 decode_ms: float = 0.0, fused_ms: float | None = None) -> "HostBudgets":
        """Budgets learned from what runs: decode and starts at ``quantile``, fused iterations at
        ``fused_quantile`` with gaps over ``stall_ms`` left out as stalls (None: kept)."""
        return cls(decode=DecodeHostTime(quantile=quantile) if decode else None,
                   fused=DecodeHostTime(quantile=fused_quantile, stall_ms=stall_ms) if fused else None,
                   start=DecodeHostTime(quantile=quantile) if start else None,
                   fused_start=DecodeHostTime(quantile=fused_quantile, stall_ms=stall_ms) if fused_start else None,
                   decode_ms=decode_ms, fused_ms=fused_ms)

    def view(self, *, fused_streak: bool) -> dict:
        """The `Snapshot` fields these budgets fill (``fused_streak``: a fused batch is in flight)."""
        return {
            "decode_host_ms": self.decode.value_ms if self.decode is not None else self.decode_ms,
            "fused_host_ms": self.fused.budget_ms if self.fused is not None else self.fused_ms,
            "fused_rate_host_ms": self.fused.median_ms if self.fused is not None else None,
            "start_host_ms": self.start.value_ms if self.start is not None else None,
            "fused_streak": fused_streak,
            "fused_start_host_ms": self.fused_start.value_ms if self.fused_start is not None else None,
        }

    def book_decode(self, wall_ms: float, gpu_ms: float, *, starts_batch: bool) -> None:
        """A decode iteration's gap of ``wall_ms`` with ``gpu_ms`` of GPU time; ``starts_batch``:
        its plan started a layer-wise batch."""
        if self.decode is not None:
            self.decode.observe(wall_ms, gpu_ms)
        if starts_batch and self.start is not None:
            self.start.observe(wall_ms, gpu_ms)

    def book_fused(self, wall_ms: float, *, planned_ms: float, gpu_ms: float, starts_streak: bool) -> None:
        """A fused iteration's gap against its planned price (a host that outlasts the GPU shows
        as GPU time, as kernels wait for their launches, so against the measured time a budget
        would not see it); without a fused budget, a decode's gap against ``gpu_ms``."""
        if starts_streak and self.fused_start is not None:
            self.fused_start.observe(wall_ms, planned_ms)
        elif self.fused is not None:
            self.fused.observe(wall_ms, planned_ms)
        else:
            self.book_decode(wall_ms, gpu_ms, starts_batch=False)
