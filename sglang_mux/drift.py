"""Does a point's queue still grow when arrivals stop? The drift tests on TTFTs in arrival order.

:func:`drift`: the median TTFT of the last ``DRIFT_TAIL`` of the requests above
``DRIFT_FACTOR`` x the first half's median + ``DRIFT_SLACK_MS`` fails the point (a queue that
grows through the run shows as the last arrivals waiting longest; the factor and slack keep
one burst or a handful of long prompts from tripping it). :func:`queue_drift`: the same on
each request's wait beyond its own prefill, for traces whose prompt lengths change along
the run. Both take milliseconds and return JSON-safe dicts (``None`` for undefined values,
``ok`` False for no requests). The benchmark's goodput rule (``bench.metrics``) and the
simulator judge points by the same functions.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

DRIFT_TAIL, DRIFT_FACTOR, DRIFT_SLACK_MS = 0.10, 2.0, 250.0
# A length-aware point is judged by queue_drift over its last tenth: with fewer requests a few
# long prompts at the end decide it (bench.run and the simulator's map stretch points to this).
LENGTH_AWARE_MIN_REQUESTS = 100
QUEUE_MIN_NEW = 2048  # prompts with this many new tokens or more: TTFT mostly their own prefill


def _num(x) -> float | None:
    """JSON-safe float (NaN/inf -> None)."""
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) or math.isinf(x) else round(x, 6)


def queue_drift(ttft_ms: Sequence[float], new_tokens: Sequence[float]) -> dict:
    """drift() of each request's wait beyond its own prefill: TTFT less c x its new (uncached)
    prompt tokens, c the 10th percentile of TTFT / new tokens over the first half's prompts of
    QUEUE_MIN_NEW new tokens or more. Where prompt lengths change along a trace (multi-turn
    sessions with long contexts), drift() also judges which prompts fell in the tail: a tail of
    long turns doubles its TTFT with no queue, and a head of long ones raises the limit a
    growing queue must pass. The goodput rule judges a length-aware point by it (a flat one by
    drift()); both are reported."""
    a = np.asarray(ttft_ms, float)
    n = np.maximum(1.0, np.asarray(new_tokens, float))
    h = math.ceil(len(a) / 2)
    big = n[:h] >= QUEUE_MIN_NEW
    c = float(np.percentile(a[:h][big] / n[:h][big], 10)) if big.any() else 0.0
    return {**drift(np.maximum(0.0, a - c * n)), "service_ms_per_token": _num(c)}


def drift(ttft_ms: Sequence[float]) -> dict:
    """TTFT drifting up: the median of the last DRIFT_TAIL of the requests (in arrival order)
    above DRIFT_FACTOR x the first half's median + DRIFT_SLACK_MS, i.e. a queue still growing
    when arrivals stop. ``tail_requests``: how many decided it (on a short point a few, which a
    burst in the trace can fill)."""
    a = np.asarray(ttft_ms, float)
    if not len(a):
        return {"tail_median_ms": None, "head_median_ms": None, "limit_ms": None, "tail_requests": 0, "ok": False}
    k = max(1, math.ceil(DRIFT_TAIL * len(a)))
    tail = float(np.median(a[-k:]))
    head = float(np.median(a[:math.ceil(len(a) / 2)]))
    limit = DRIFT_FACTOR * head + DRIFT_SLACK_MS
    return {"tail_median_ms": _num(tail), "head_median_ms": _num(head), "limit_ms": _num(limit),
            "tail_requests": k, "ok": bool(tail <= limit)}
