"""How much longer a layer-wise prefill takes in serving than its GPU time, learned online.

The estimator's T_P is a batch's GPU time on its prefill SMs, and its online correction follows
each chunk's measured GPU time. From a batch's start to its end the prefill stream also waits:
between chunks (the loop launches N_PL layers per decode step, and its host work comes first),
and while the policy holds prefill back. On an H100 the capped conversation's partitions took
1.7-2.0x their T_P of wall time, summed over batches (bench/results/capped_tbt50_h100_2026-11-27/).
The hybrid rates a partition's prefill by T_P; without this factor it chose partitions where
fused chunks were the faster way, and ran the dispatcher's plans.

``factor`` = Σ wall / Σ estimated over the last ``window`` finished batches (long batches weigh
as they cost), within [1, ``MAX_FACTOR``]; 1 until ``min_batches`` are seen. Not thread-safe (the
scheduler's thread only).
"""

from __future__ import annotations

from collections import deque

MAX_FACTOR = 4.0  # past this a batch waited on something else (a stall, a long hold), not its rate


class PrefillWall:
    """``observe(estimated_ms, wall_ms)`` when a layer-wise batch finishes; ``factor`` for the
    policy's rate of a new one."""

    def __init__(self, window: int = 32, min_batches: int = 4):
        if window < 1 or min_batches < 1:
            raise ValueError(f"bad PrefillWall settings: window={window} min_batches={min_batches}")
        self.min_batches = min_batches
        self._obs: deque[tuple[float, float]] = deque(maxlen=window)

    def observe(self, estimated_ms: float, wall_ms: float) -> float | None:
        """A batch estimated at ``estimated_ms`` of GPU time (the sum over its chunks) took
        ``wall_ms`` from its start to its end. Returns wall / estimated (None: not taken)."""
        if not (estimated_ms > 0 and wall_ms > 0):
            return None
        self._obs.append((estimated_ms, wall_ms))
        return wall_ms / estimated_ms

    @property
    def factor(self) -> float:
        if len(self._obs) < self.min_batches:
            return 1.0
        est = sum(e for e, _ in self._obs)
        wall = sum(w for _, w in self._obs)
        return min(max(wall / est, 1.0), MAX_FACTOR)
