"""A replay's result and its metrics, alike for the mux and for chunked prefill.

TTFT (s) = first token - arrival; TBT (ms) = the gap between a request's consecutive tokens; SLO
attainment = the share of requests whose TTFT meets its SLO and whose every gap meets the TBT SLO;
throughput over first arrival -> last finish; the drift tests of `sglang_mux.drift`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from sglang_mux.drift import drift, queue_drift
from sglang_mux.traces import TraceReq


@dataclass
class SimResult:
    policy: str
    summary: dict
    ttft_s: np.ndarray = field(repr=False)
    finish_s: np.ndarray = field(repr=False)


def weighted_percentile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """Weighted nearest-rank percentile."""
    if len(values) == 0 or weights.sum() <= 0:
        return float("nan")
    o = np.argsort(values, kind="stable")
    v, c = values[o], np.cumsum(weights[o])
    return float(v[min(len(v) - 1, int(np.searchsorted(c, q / 100.0 * c[-1])))])


def drift_tests(ttft_s: np.ndarray, reqs: Sequence[TraceReq]) -> dict:
    """The benchmark's own drift test and its length-aware twin (sglang_mux.drift), so that a
    simulated point is judged as a served one; `reqs` in arrival order, `ttft_s` theirs."""
    ms = np.asarray(ttft_s) * 1e3
    return {"ttft_drift": drift(ms), "ttft_queue_drift": queue_drift(ms, [q.n_input - q.reused for q in reqs])}
