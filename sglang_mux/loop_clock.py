"""Where the scheduler loop's host time goes: wall time per named phase between two decode
results, and the garbage collector's pauses inside them.

A token's gap is the decode iteration's GPU time plus whatever the host does between two
decode results; the dispatcher budgets one quantile of that host time (P90 by default), so
its tail is what pushes P99 TBT past the SLO. The loop calls ``lap(name)`` after each phase and ``take()`` when a
decode result is done; the timeline row of that iteration carries the laps (``host_ms``).
Plain Python: no torch.
"""

from __future__ import annotations

import gc
import time
from typing import Callable


class LoopClock:
    def __init__(self, clock: Callable[[], float] = time.perf_counter):
        self._clock = clock
        self._t = clock()
        self._laps: dict[str, float] = {}
        self._gc_ms = 0.0
        self._gc_start: float | None = None
        self._hooked = False

    def hook_gc(self) -> None:
        """Count the collector's pauses (gc.callbacks) into the current laps."""
        if not self._hooked:
            gc.callbacks.append(self._on_gc)
            self._hooked = True

    def unhook_gc(self) -> None:
        if self._hooked:
            gc.callbacks.remove(self._on_gc)
            self._hooked = False

    def _on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_start = self._clock()
        elif self._gc_start is not None:
            self._gc_ms += (self._clock() - self._gc_start) * 1e3
            self._gc_start = None

    def lap(self, name: str) -> None:
        """The time since the last lap (or take/reset) goes to `name` (summed if repeated)."""
        now = self._clock()
        self._laps[name] = self._laps.get(name, 0.0) + (now - self._t) * 1e3
        self._t = now

    def take(self) -> dict[str, float]:
        """The laps since the last take/reset (ms, plus ``gc`` when the collector ran), and reset."""
        out = {k: round(v, 3) for k, v in self._laps.items()}
        if self._gc_ms:
            out["gc"] = round(self._gc_ms, 3)
        self.reset()
        return out

    def reset(self) -> None:
        """Start afresh (an iteration without a decode result: its gap is not a token's)."""
        self._laps = {}
        self._gc_ms = 0.0
        self._t = self._clock()
