"""How much longer a layer-wise prefill takes in serving than the policy planned, learned online.

The policy rates a new partition's prefill by T_P: the batch's GPU time on the prefill SMs of the
partition it starts on. Served, a batch then runs as the partitions after it allow: where the
decode batch grows, decode takes SMs and the prefill runs on fewer, so a batch's wall time can be a
multiple of its T_P though each chunk's GPU time matches its estimate (docs/measurements.md).

``factor`` = Σ wall / Σ planned over the last ``window`` finished batches (long batches weigh as
they cost), within [1, ``MAX_FACTOR``]; 1 until ``min_batches`` are seen. Not thread-safe (the
scheduler's thread only).
"""

from __future__ import annotations

from collections import deque

MAX_FACTOR = 4.0  # past this the batches waited on something else (a stall, long holds), not a rate


class PrefillWall:
    """``observe(estimated_ms, wall_ms)`` when a layer-wise batch finishes; ``factor`` for the
    policy's rate of a new one."""

    def __init__(self, window: int = 32, min_batches: int = 4):
        if window < 1 or min_batches < 1:
            raise ValueError(f"bad PrefillWall settings: window={window} min_batches={min_batches}")
        self.min_batches = min_batches
        self._obs: deque[tuple[float, float]] = deque(maxlen=window)

    def observe(self, planned_ms: float, wall_ms: float) -> float | None:
        """A batch planned at ``planned_ms`` (its T_P when formed) took ``wall_ms`` from its
        formation to its end. Returns wall / planned (None: not taken)."""
        if not (planned_ms > 0 and wall_ms > 0):
            return None
        self._obs.append((planned_ms, wall_ms))
        return wall_ms / planned_ms

    @property
    def factor(self) -> float:
        if len(self._obs) < self.min_batches:
            return 1.0
        planned = sum(p for p, _ in self._obs)
        wall = sum(w for _, w in self._obs)
        return min(max(wall / planned, 1.0), MAX_FACTOR)
