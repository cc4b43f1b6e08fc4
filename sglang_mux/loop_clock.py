"""Where the scheduler loop's host time goes: wall time per named phase between two decode
results, and the garbage collector's pauses inside them.

A token's gap is the decode iteration's GPU time plus whatever the host does between two
decode results; the dispatcher budgets one quantile of that host time (P90 by default), so
its tail is what pushes P99 TBT past the SLO. The loop calls ``lap(name)`` after each phase and
``take()`` when a decode result is done; the timeline row of that iteration carries the laps
(``host_ms``).

Whether a slow lap ran code or waited is a second question: ``last_os`` holds, for the same
iteration, the wall time the loop's thread spent off its CPU (wall less ``time.thread_time``)
and the steal time the whole VM reported meanwhile (``/proc/stat``, all vCPUs, in 10 ms
ticks). Stalls in which every phase slows at once are either the host taking the CPU away or
code that blocks; these two numbers tell which.
Plain Python: no torch.
"""

from __future__ import annotations

import gc
import os
import time
from typing import Callable

_TICK_MS = 1000.0 / os.sysconf("SC_CLK_TCK")


def cpu_ticks(path: str = "/proc/stat") -> list[int] | None:
    """All CPUs' time so far, in clock ticks: user nice system idle iowait irq softirq steal
    ...; None where there is no /proc/stat."""
    try:
        with open(path, "rb") as f:
            fields = f.readline().split()
        return [int(x) for x in fields[1:]] if fields[:1] == [b"cpu"] else None
    except (OSError, ValueError):
        return None


def steal_ticks(path: str = "/proc/stat") -> int | None:
    """The VM's steal time so far, all vCPUs, in clock ticks; None where there is none."""
    t = cpu_ticks(path)
    return t[7] if t is not None and len(t) > 7 else None


class LoopClock:
    def __init__(self, clock: Callable[[], float] = time.perf_counter,
                 cpu_clock: Callable[[], float] = time.thread_time,
                 steal: Callable[[], int | None] = steal_ticks, os_stats: bool = True):
        # os_stats off (no timeline to carry them): no /proc/stat read on every loop iteration
        self._clock, self._cpu_clock, self._steal = clock, cpu_clock, steal
        self._os = os_stats
        self._laps: dict[str, float] = {}
        self._gc_ms = 0.0
        self._gc_start: float | None = None
        self._hooked = False
        self.last_os: dict[str, float] | None = None  # the last take()'s off-CPU and steal ms (os_stats)
        self.reset()

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
        """The laps since the last take/reset (ms, plus ``gc`` when the collector ran), and reset;
        ``last_os`` then holds the same span's ``off_cpu`` ms and ``steal`` ms (None if unknown)."""
        out = {k: round(v, 3) for k, v in self._laps.items()}
        if self._gc_ms:
            out["gc"] = round(self._gc_ms, 3)
        now, (cpu, steal) = self._clock(), self._os_now()
        if self._os:
            self.last_os = {"off_cpu": round(max(0.0, (now - self._t0) - (cpu - self._cpu0)) * 1e3, 3),
                            "steal": None if steal is None or self._steal0 is None
                            else round((steal - self._steal0) * _TICK_MS, 1)}
        self._start(now, cpu, steal)  # one reading ends this span and begins the next
        return out

    def reset(self) -> None:
        """Start afresh (an iteration without a decode result: its gap is not a token's)."""
        self._start(self._clock(), *self._os_now())

    def _os_now(self) -> tuple[float, int | None]:
        return (self._cpu_clock(), self._steal()) if self._os else (0.0, None)

    def _start(self, now: float, cpu: float, steal: int | None) -> None:
        self._laps = {}
        self._gc_ms = 0.0
        self._t = self._t0 = now
        self._cpu0, self._steal0 = cpu, steal
