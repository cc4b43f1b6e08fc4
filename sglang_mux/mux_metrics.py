"""Prometheus metrics of the multiplexing state, and a JSONL timeline of dispatch decisions.

`MuxMetrics(registry=None)` registers its collectors in `registry` (default: prometheus_client's
default REGISTRY, which SGLang serves at /metrics with --enable-metrics). Registration is
idempotent: a second MuxMetrics on the same registry reuses the collectors already there
instead of raising "Duplicated timeseries".

    sglang_mux:decode_sms / sglang_mux:prefill_sms         Gauge     current partition
    sglang_mux:decisions_total{reason}                     Counter   decisions by Plan.reason
    sglang_mux:preemptions_total                           Counter   prefill preemptions
    sglang_mux:decode_latency_ratio                        Histogram measured / worst-case estimate
    sglang_mux:decision_seconds                            Histogram CPU time of one decision
    sglang_mux:guard_refinements_total                     Counter   contention-guard raises
    sglang_mux:decode_fixed_cost_ms                        Gauge     decode cost beyond the table's, learned alone
    sglang_mux:prefill_busy_seconds_total                  Counter   GPU time of prefill chunks
    sglang_mux:prefill_idle_seconds_total                  Counter   gaps between two chunks of one batch
    sglang_mux:prefill_latency_ratio                       Histogram measured / estimated prefill
    sglang_mux:cuda_allocated_bytes / cuda_reserved_bytes  Gauge     allocator: used by tensors / held
    sglang_mux:cuda_alloc_retries                          Gauge     cache flushes to retry a cudaMalloc

`TimelineWriter(path)` appends one JSON object per decision (time, the Plan's fields, decode bs,
measured decode latency when known, anything else given); `load_timeline(path)` reads it back
as a pandas DataFrame (a torn last line from a crash is skipped).
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, Mapping

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

PREFIX = "sglang_mux:"
RATIO_BUCKETS = (0.25, 0.5, 0.7, 0.8, 0.9, 0.95, 1.0, 1.05, 1.1, 1.2, 1.3, 1.5, 2.0, 3.0)
DECISION_BUCKETS = (5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 5e-3)
_lock = threading.Lock()


def _get_or_create(cls, name: str, doc: str, labelnames, registry: CollectorRegistry, **kw):
    """The collector `name` in `registry`: the existing one, else a new one registered there."""
    with _lock:
        existing = getattr(registry, "_names_to_collectors", {}).get(name)
        if existing is not None:
            if not isinstance(existing, cls):
                raise ValueError(f"metric {name} is already registered as a {type(existing).__name__}")
            return existing
        try:
            return cls(name, doc, labelnames=labelnames, registry=registry, **kw)
        except ValueError:  # a racing registration in another code path: take that one
            existing = getattr(registry, "_names_to_collectors", {}).get(name)
            if existing is None:
                raise
            return existing


def replica_path(path: str, dp_rank: int | None) -> str:
    """A data-parallel replica's own file: ``path.dp<N>`` (``path`` itself without DP)."""
    return path if dp_rank is None else f"{path}.dp{int(dp_rank)}"


class MuxMetrics:
    """The mux's Prometheus collectors. `labels`: constant labels (e.g. model_name, tp_rank)."""

    def __init__(self, registry: CollectorRegistry | None = None, labels: Mapping[str, str] | None = None):
        self.registry = registry if registry is not None else REGISTRY
        self.labels = dict(labels or {})
        ln = tuple(self.labels)
        r = self.registry
        # mostrecent: under PROMETHEUS_MULTIPROC_DIR the scheduler's latest value wins.
        self._decode_sms = _get_or_create(Gauge, PREFIX + "decode_sms", "SMs of the decode partition now",
                                          ln, r, multiprocess_mode="mostrecent")
        self._prefill_sms = _get_or_create(Gauge, PREFIX + "prefill_sms", "SMs of the prefill partition now",
                                           ln, r, multiprocess_mode="mostrecent")
        self._decisions = _get_or_create(Counter, PREFIX + "decisions", "Dispatch decisions by the rule that fired",
                                         ln + ("reason",), r)
        self._preemptions = _get_or_create(Counter, PREFIX + "preemptions", "Prefill batches preempted", ln, r)
        self._ratio = _get_or_create(Histogram, PREFIX + "decode_latency_ratio",
                                     "Measured decode iteration latency / worst-case estimate", ln, r,
                                     buckets=RATIO_BUCKETS)
        self._decide = _get_or_create(Histogram, PREFIX + "decision_seconds", "CPU time of one dispatch decision",
                                      ln, r, buckets=DECISION_BUCKETS)
        self._refine = _get_or_create(Counter, PREFIX + "guard_refinements",
                                      "Contention-guard cells raised by online measurements", ln, r)
        self._p_busy = _get_or_create(Counter, PREFIX + "prefill_busy_seconds",
                                      "GPU time of prefill layer chunks", ln, r)
        self._p_idle = _get_or_create(Counter, PREFIX + "prefill_idle_seconds",
                                      "Prefill-stream idle time between two chunks of one batch", ln, r)
        self._d_fixed = _get_or_create(Gauge, PREFIX + "decode_fixed_cost_ms",
                                       "A served decode iteration's fixed cost beyond the table's graph replays "
                                       "(input copies, sampling), learned from decode alone; added to every "
                                       "decode estimate", ln, r, multiprocess_mode="mostrecent")
        self._p_host = _get_or_create(Counter, PREFIX + "prefill_launch_host_seconds",
                                      "Host (CPU) time spent launching prefill layer chunks; above "
                                      "prefill_busy_seconds, prefill waits on the host, not the GPU", ln, r)
        self._p_corr = _get_or_create(Gauge, PREFIX + "prefill_correction",
                                      "Online prefill correction per prefill partition: served / the table's solo "
                                      "estimate (EWMA); above 1, prefill runs slower beside decode than alone",
                                      ln + ("prefill_sms",), r, multiprocess_mode="mostrecent")
        self._p_ratio = _get_or_create(Histogram, PREFIX + "prefill_latency_ratio",
                                       "Measured prefill chunk latency (scaled to the model) / estimate",
                                       ln, r, buckets=RATIO_BUCKETS)

        # The memory gauges tell a leak (allocated bytes climb) from the caching allocator (reserved
        # bytes climb to the device's limit, then a retry empties the cache): nvidia-smi sees both alike.
        self._alloc = _get_or_create(Gauge, PREFIX + "cuda_allocated_bytes", "CUDA memory in use by tensors",
                                     ln, r, multiprocess_mode="mostrecent")
        self._reserved = _get_or_create(Gauge, PREFIX + "cuda_reserved_bytes",
                                        "CUDA memory held by PyTorch's caching allocator", ln, r,
                                        multiprocess_mode="mostrecent")
        self._retries = _get_or_create(Gauge, PREFIX + "cuda_alloc_retries",
                                       "cudaMalloc failures the caching allocator answered by emptying its cache",
                                       ln, r, multiprocess_mode="mostrecent")
        self._mem_at = float("-inf")

    def _l(self, m, **extra):
        return m.labels(**self.labels, **extra) if (self.labels or extra) else m

    # The scheduler loop's hooks.
    def on_partition(self, decode_sms: int, prefill_sms: int) -> None:
        self._l(self._decode_sms).set(decode_sms)
        self._l(self._prefill_sms).set(prefill_sms)

    def on_plan(self, plan, decide_us: float | None = None) -> None:
        """One decision (call once per Plan; on_decode does it for loops that call only that)."""
        self._l(self._decisions, reason=plan.reason).inc()
        if decide_us is not None:
            self._l(self._decide).observe(decide_us * 1e-6)

    def on_decode(self, plan, measured_ms: float, decide_us: float | None = None, *,
                  count_decision: bool = True, fixed_cost_ms: float | None = None) -> None:
        """A finished decode iteration launched by `plan` (one decision per iteration);
        `fixed_cost_ms`: the estimator's learned fixed decode cost after it."""
        if count_decision:
            self.on_plan(plan, decide_us)
        if plan.t_decode_worst_ms > 0 and measured_ms > 0:
            self._l(self._ratio).observe(measured_ms / plan.t_decode_worst_ms)
        if fixed_cost_ms is not None:
            self._l(self._d_fixed).set(fixed_cost_ms)

    def on_preemption(self) -> None:
        self._l(self._preemptions).inc()

    def on_prefill_chunk(self, busy_ms: float, idle_ms: float | None = None,
                         ratio: float | None = None) -> None:
        """A retired prefill chunk: its GPU time, the idle gap before it (None: first chunk of
        the batch or of a resumed one), measured / estimated latency when known."""
        if busy_ms > 0:
            self._l(self._p_busy).inc(busy_ms * 1e-3)
        if idle_ms is not None and idle_ms > 0:
            self._l(self._p_idle).inc(idle_ms * 1e-3)
        if ratio is not None and ratio > 0:
            self._l(self._p_ratio).observe(ratio)

    def on_prefill_correction(self, prefill_sms: int, value: float) -> None:
        self._l(self._p_corr, prefill_sms=str(prefill_sms)).set(value)

    def on_prefill_launch(self, host_ms: float) -> None:
        """The host's time to launch one prefill layer chunk."""
        if host_ms > 0:
            self._l(self._p_host).inc(host_ms * 1e-3)

    def on_memory(self, stats: Mapping[str, int] | None = None, *, now: float | None = None,
                  every_s: float = 5.0) -> bool:
        """The allocator's state, at most once per `every_s` seconds (memory_stats() walks its
        pools). `stats`: torch.cuda.memory_stats() or its keys; None reads it here. True if set."""
        now = time.monotonic() if now is None else now
        if now - self._mem_at < every_s:
            return False
        self._mem_at = now
        if stats is None:
            import torch
            stats = torch.cuda.memory_stats()
        self._l(self._alloc).set(stats.get("allocated_bytes.all.current", 0))
        self._l(self._reserved).set(stats.get("reserved_bytes.all.current", 0))
        self._l(self._retries).set(stats.get("num_alloc_retries", 0))
        return True

    def on_guard_refinement(self, n: int = 1) -> None:
        if n > 0:
            self._l(self._refine).inc(n)


class TimelineWriter:
    """Appends one JSON line per decision; line-buffered so a crash loses at most one line.

    ``max_bytes``: past it the file is renamed to ``<path>.1`` (replacing the previous one) and
    a new one begins, so a long run keeps at most about twice that on disk (a decision is
    ~200 bytes: 256 MiB holds ~1.3 million of them, hours at full rate)."""

    def __init__(self, path: str | os.PathLike, mode: str = "a", max_bytes: int | None = None):
        self.path = os.fspath(path)
        self.max_bytes = max_bytes
        d = os.path.dirname(self.path)
        if d:
            os.makedirs(d, exist_ok=True)
        self._open(mode)

    def _open(self, mode: str) -> None:
        self._f = open(self.path, mode, buffering=1, encoding="utf-8")
        self._size = self._f.tell()
        if "a" in mode and self._size > 0:  # a torn last line must not swallow our first one
            with open(self.path, "rb") as f:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    self._f.write("\n")
                    self._size += 1

    def write(self, plan=None, *, now: float | None = None, **fields: Any) -> None:
        """Record `plan`'s fields at time `now` (default: wall clock); `fields` add or override
        (e.g. decode_bs=, measured_decode_ms=, policy=)."""
        rec: dict[str, Any] = {"time": time.time() if now is None else now}
        if plan is not None:
            rec.update(decode_sms=plan.decode_sms, prefill_sms=plan.prefill_sms,
                       t_decode_worst_ms=plan.t_decode_worst_ms, t_prefill_ms=plan.t_prefill_ms,
                       prefill_layers=plan.prefill_layers, new_prefill=len(plan.new_prefill_rids),
                       preempt=plan.preempt, reason=plan.reason)
        rec.update(fields)
        line = json.dumps(rec, separators=(",", ":"), default=str) + "\n"  # ASCII: chars = bytes
        if self.max_bytes and self._size and self._size + len(line) > self.max_bytes:
            self._f.close()
            os.replace(self.path, self.path + ".1")
            self._open("w")
        self._f.write(line)
        self._size += len(line)

    def close(self) -> None:
        if not self._f.closed:
            self._f.close()

    def __enter__(self) -> "TimelineWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def load_timeline(path: str | os.PathLike):
    """The timeline as a DataFrame, one row per decision, in file order (``.xz``: as results keep it)."""
    import lzma

    import pandas as pd

    rows = []
    opener = lzma.open if str(path).endswith(".xz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:  # torn last line of a crashed writer
                continue
    return pd.DataFrame(rows)


def fused_rows(t):
    """A hybrid timeline's served fused iterations (``reason`` fused, a measured time and the fused
    price's state), with ``base_ms``: the base price each was planned at, recovered from its planned
    price and that state (`FusedPrice.base_of`). Raises ValueError for a timeline without the
    state, or one whose states predate a field the inversion needs."""
    from .fused_price import FusedPrice
    from .policy.plan import FUSED_REASONS

    if "fused_price" not in t:
        raise ValueError("the timeline has no fused_price column (not a hybrid server's, or one from before it)")
    missing = sorted({"reason", "measured_decode_ms", "t_decode_worst_ms"} - set(t.columns))
    if missing:
        raise ValueError(f"the timeline lacks {', '.join(missing)} (not a server's --mux-timeline)")
    f = t[t["reason"].isin(FUSED_REASONS) & t["measured_decode_ms"].notna() & t["fused_price"].notna()]
    try:
        base = [FusedPrice.base_of(p, s) for p, s in zip(f["t_decode_worst_ms"], f["fused_price"])]
    except KeyError as e:
        raise ValueError(f"its fused_price rows lack {e} (a timeline from before the price had it: "
                         "take a later one)") from None
    return f.assign(base_ms=base)


def host_ms_per_decode(t):
    """Per decode iteration of a timeline (rows with the server's ``host_ms`` laps and a measured
    decode): the loop's host time, its laps between two decode results less the GPU's time
    ("gc" is a pause inside the other laps, so it is not added again)."""
    import pandas as pd

    if "host_ms" not in t or "measured_decode_ms" not in t:
        return pd.Series(dtype=float)
    rows = t[t["host_ms"].map(lambda x: isinstance(x, dict) and bool(x)) & t["measured_decode_ms"].notna()]
    if rows.empty:
        return pd.Series(dtype=float)
    laps = pd.DataFrame(list(rows["host_ms"]), index=rows.index).fillna(0.0)
    return laps.drop(columns=["gc"], errors="ignore").sum(axis=1) - rows["measured_decode_ms"]
