"""Mooncake-format request traces: read, slice, sample and time them for replay.

A trace is JSON lines, one request each: ``timestamp`` (ms), ``input_length`` (prompt tokens,
>= 1), ``output_length`` (tokens) and optional ``hash_ids`` (one id per 512-token prompt block,
prefix-chained: equal ids = equal prefixes). ``conversation`` and ``synthetic`` name the first
300 requests of each Mooncake trace, shipped in ``sglang_mux/data/traces/``.

:func:`load_trace` gives :class:`TraceReq` in arrival order (seconds from the first arrival)
with each request's reused prefix tokens: a radix cache of unbounded capacity, or an LRU of
``cache_tokens``, fed in arrival order. :func:`sample_sessions`, :func:`warm_prefixes` and
:func:`poisson_arrivals` are the benchmark's own draws (``bench.workloads`` uses them), so a
simulated point replays the requests and arrivals a served one sends.

A missing file is ``FileNotFoundError``; a malformed one (not JSON, a field missing or not a
number, no requests) is :class:`TraceError` naming the file and line.
"""

from __future__ import annotations

import json
import math
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Sequence

import numpy as np

BLOCK = 512  # tokens per hash id
BUNDLED = {"conversation": "mooncake_conversation_head300.jsonl",
           "synthetic": "mooncake_synthetic_head300.jsonl"}
REQUIRED = ("timestamp", "input_length", "output_length")


class TraceError(ValueError):
    """A trace file that is not a Mooncake-format trace; the message names file and line."""


@dataclass
class TraceReq:
    rid: str
    arrival_s: float
    n_input: int
    output_len: int
    reused: int = 0


def trace_path(name_or_path: str) -> Path:
    """A file path, or the name of a bundled slice ('conversation', 'synthetic')."""
    p = Path(name_or_path)
    if p.is_file():
        return p
    fname = BUNDLED.get(name_or_path, name_or_path)
    q = resources.files("sglang_mux") / "data" / "traces" / fname
    if q.is_file():
        return Path(str(q))
    raise FileNotFoundError(f"no trace file {name_or_path!r} (bundled: {', '.join(BUNDLED)})")


def read_rows(name_or_path: str, stop_after: int | None = None) -> list[dict]:
    """The trace's rows (checked: see the module docstring), at most ``stop_after`` of them."""
    path = trace_path(name_or_path)
    rows = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                x = json.loads(line)
            except json.JSONDecodeError as e:
                raise TraceError(f"{path}: line {lineno} is not JSON ({e.msg}); a trace has one JSON "
                                 f"object per line") from None
            _check_row(x, path, lineno)
            rows.append(x)
            if stop_after is not None and len(rows) >= stop_after:
                break
    if not rows:
        raise TraceError(f"{path}: no requests (an empty trace)")
    return rows


def _check_row(x, path: Path, lineno: int) -> None:
    where = f"{path}: line {lineno}"
    if not isinstance(x, dict):
        raise TraceError(f"{where} is not a JSON object")
    missing = [k for k in REQUIRED if k not in x]
    if missing:
        raise TraceError(f"{where} lacks {', '.join(missing)}; a trace line needs {', '.join(REQUIRED)} "
                         f"(and optionally hash_ids)")
    for k in REQUIRED:
        if isinstance(x[k], bool) or not isinstance(x[k], (int, float)) or not math.isfinite(x[k]):
            raise TraceError(f"{where}: {k} must be a number, got {x[k]!r}")
    if x["input_length"] < 1:
        raise TraceError(f"{where}: input_length must be >= 1, got {x['input_length']}")
    ids = x.get("hash_ids")
    if ids is not None and not isinstance(ids, list):
        raise TraceError(f"{where}: hash_ids must be a list, got {type(ids).__name__}")


def poisson_arrivals(n: int, rate: float, seed: int) -> np.ndarray:
    """n arrival times (s) of a Poisson process at ``rate``/s, the first at 0."""
    if n <= 0:
        return np.zeros(0)
    gaps = np.random.default_rng([seed, 0x5057]).exponential(1.0 / rate, size=n)
    gaps[0] = 0.0
    return np.cumsum(gaps)


def sample_sessions(rows: Sequence[dict], every: int) -> list[dict]:
    """The rows of one session in ``every``, in order. A session is a request's second prefix
    block (the first, 0, is shared by all); every turn of a kept session is kept, so its prefix
    reuse survives (one GPU's KV pool keeps far less of a whole trace's reuse than of a sample:
    docs/sim.md)."""
    if every < 1:
        raise ValueError(f"session sample must be >= 1 (one session in N), got {every}")
    if every == 1:
        return list(rows)
    return [r for r in rows
            if zlib.crc32(str(r["hash_ids"][1] if len(r["hash_ids"]) > 1 else r["hash_ids"][:1]).encode())
            % every == 0]


def warm_prefixes(rows: Sequence[dict], offset: int, n: int, input_cap: int | None = None) -> list[tuple]:
    """The history that rows [offset, offset + n) reuse: for each, its leading run of full
    blocks that some row before ``offset`` had (ids are prefix-chained), within ``input_cap``;
    longest first, none a prefix of another. Prefilled before the window, they leave a cache
    as warm as the window's history would."""
    hist = {h for r in rows[:offset] for h in r["hash_ids"]}
    found = set()
    for r in rows[offset:offset + n]:
        ids = r["hash_ids"]
        full = min(r["input_length"], input_cap or r["input_length"]) // BLOCK
        k = next((i for i, h in enumerate(ids[:full]) if h not in hist), full)
        if k:
            found.add(tuple(ids[:k]))
    keep: list[tuple] = []
    for p in sorted(found, key=lambda p: (-len(p), p)):
        if not any(q[:len(p)] == p for q in keep):
            keep.append(p)
    return keep


def load_trace(name_or_path: str, *, limit: int | None = None, input_cap: int | None = None,
               rate: float | None = None, time_scale: float | None = None,
               cache_tokens: int | None = None, arrival: str = "trace",
               seed: int = 0, session_sample: int = 1, offset: int = 0,
               warm_history: bool = False) -> list[TraceReq]:
    """Requests in arrival order, arrivals shifted to start at 0, reuse computed.

    ``limit``: the first N requests (from ``offset``); ``rate``: rescale arrivals to R req/s
    over the slice; ``time_scale``: multiply the gaps; ``input_cap``: truncate prompts (and
    their hash_ids); ``arrival="poisson"``: keep requests and order, draw Poisson arrivals at
    ``rate`` instead (the trace's timestamps are rounded to 3 s, so they come in bursts);
    ``session_sample``: :func:`sample_sessions`; ``warm_history``: the cache starts with
    :func:`warm_prefixes`. Bad options: ValueError; bad file: see the module docstring."""
    if rate is not None and time_scale is not None:
        raise ValueError("give --rate or --time-scale, not both")
    if arrival not in ("trace", "poisson"):
        raise ValueError(f"arrival must be 'trace' or 'poisson', got {arrival!r}")
    if arrival == "poisson" and (rate is None or rate <= 0):
        raise ValueError("--arrival poisson needs --rate > 0")
    if rate is not None and rate <= 0:
        raise ValueError(f"--rate must be > 0, got {rate}")
    if time_scale is not None and time_scale < 0:
        raise ValueError(f"--time-scale must be >= 0, got {time_scale}")
    stop = offset + limit if limit is not None and session_sample == 1 else None
    rows = read_rows(name_or_path, stop)
    if session_sample != 1:  # the benchmark's own sample: a simulated slice is a served one
        rows = sample_sessions(rows, session_sample)
    warm = warm_prefixes(rows, offset, len(rows) if limit is None else limit, input_cap) if warm_history else []
    rows = rows[offset:None if limit is None else offset + limit]
    if not rows:
        raise TraceError(f"trace {name_or_path!r} has no requests in this slice (offset {offset}, "
                         f"limit {limit}, session sample {session_sample})")
    rows.sort(key=lambda x: x["timestamp"])  # stable: equal timestamps keep file order
    t0 = rows[0]["timestamp"] / 1e3
    span = rows[-1]["timestamp"] / 1e3 - t0
    scale = 1.0
    if rate is not None:
        scale = (len(rows) - 1) / rate / span if span > 0 else 0.0
    elif time_scale is not None:
        scale = time_scale
    poisson = poisson_arrivals(len(rows), rate, seed) if arrival == "poisson" else None
    cap_blocks = None if not cache_tokens else max(1, cache_tokens // BLOCK)
    cache: OrderedDict = OrderedDict((h, None) for p in warm for h in p)
    out = []
    for i, x in enumerate(rows):
        n, ids = int(x["input_length"]), list(x.get("hash_ids") or [])
        if input_cap is not None and n > input_cap:
            n, ids = input_cap, ids[: math.ceil(input_cap / BLOCK)]
        hit = 0
        for h in ids:  # longest prefix already cached
            if h not in cache:
                break
            hit += 1
        for h in ids:  # LRU: touch / insert every block of this request
            cache[h] = None
            cache.move_to_end(h)
        if cap_blocks is not None:
            while len(cache) > cap_blocks:
                cache.popitem(last=False)
        t_arr = (x["timestamp"] / 1e3 - t0) * scale
        if rate is not None and span <= 0:
            t_arr = i / rate
        if poisson is not None:
            t_arr = float(poisson[i])
        out.append(TraceReq(f"r{i}", t_arr, n, max(1, int(x["output_length"])),
                            min(hit * BLOCK, max(0, n - 1))))
    return out
