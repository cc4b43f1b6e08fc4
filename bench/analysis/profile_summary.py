"""Where a server's host time went, from a torch-profiler trace (SGLang's /start_profile).

    python -m bench.analysis.profile_summary TRACE.json[.gz] [--top 25]      (repository root)

Served at TBT 30 on H100s, the hybrid's fused iterations spent 8-10 ms at the median, and ~28 ms
in the iterations over the SLO, in the ``fused_launch`` lap: SGLang's launch of a mixed batch
through its prefill CUDA graph (bench/results/x4_s44_2026-11-27/). The loop's clock cannot tell
launching from waiting for the GPU: a blocking copy or synchronisation spins on the CPU. The CUDA
runtime calls in a trace can: this tables them (count, total and largest ms), beside the CPU
operators with the most time, and the waits for the GPU by the SGLang step and operator that made
them, so a run of the hybrid and one of chunked prefill can be set side by side. Plain Python
(pandas), no GPU.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd

from sglang_mux import cli

KINDS = ("cuda_runtime", "cuda_driver", "cpu_op", "user_annotation", "python_function")


def load_events(path: str | Path) -> pd.DataFrame:
    """The trace's complete events (``ph`` X) of the kinds in KINDS: kind, name, pid, tid, ts
    and dur (µs)."""
    p = Path(path)
    opener = gzip.open if p.suffix == ".gz" else open
    try:
        with opener(p, "rt") as f:
            trace = json.load(f)
    except (OSError, json.JSONDecodeError, EOFError) as e:
        raise cli.UsageError(f"{p}: not a readable torch-profiler trace ({e}); give the .json or .json.gz "
                             "that SGLang's /stop_profile wrote") from None
    events = trace.get("traceEvents") if isinstance(trace, dict) else trace
    if not isinstance(events, list):
        raise cli.UsageError(f"{p}: no traceEvents list; is it a chrome trace?")
    rows = [(e.get("cat"), e.get("name"), e.get("pid"), e.get("tid"), float(e.get("ts", 0.0)), float(e.get("dur", 0.0)))
            for e in events if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") in KINDS]
    return pd.DataFrame(rows, columns=["kind", "name", "pid", "tid", "ts", "dur"])


def _durations_by_name(named: pd.DataFrame) -> pd.DataFrame:
    """Rows of ``name`` and ``dur`` (µs) grouped by name: count, total, median and largest ms, most
    total first."""
    if named.empty:
        return pd.DataFrame(columns=["count", "total_ms", "median_ms", "max_ms"])
    g = named.groupby("name").dur
    out = pd.DataFrame({"count": g.size(), "total_ms": g.sum() / 1e3, "median_ms": g.median() / 1e3,
                        "max_ms": g.max() / 1e3})
    return out.sort_values("total_ms", ascending=False)


def by_name(ev: pd.DataFrame, kind: str, top: int) -> pd.DataFrame:
    """Events of ``kind`` grouped by name: count, total, median and largest ms, most total first."""
    return _durations_by_name(ev[ev.kind == kind]).head(top)


SYNCS = ("cudaStreamSynchronize", "cudaEventSynchronize", "cudaDeviceSynchronize", "cudaMemcpy")


def syncs_by_caller(ev: pd.DataFrame) -> pd.DataFrame:
    """The host's waits for the GPU (the CUDA runtime calls in SYNCS) grouped by what called them:
    the innermost SGLang step around each (``user_annotation``, e.g. ``scheduler.run_batch``) and
    the innermost CPU operator (e.g. ``aten::_local_scalar_dense``: a ``.item()``), on the same
    thread; "-" where none encloses it. Count, total, median and largest ms, most total first. A
    wait inside a launch keeps the GPU from running ahead of the host."""
    waits = ev[(ev.kind == "cuda_runtime") & ev.name.isin(SYNCS)]
    rows = []
    for w in waits.itertuples():
        around = ev[(ev.pid == w.pid) & (ev.tid == w.tid) & (ev.ts <= w.ts) & (ev.ts + ev.dur >= w.ts + w.dur)]
        inner = {k: around[around.kind == k].sort_values("ts").name.iloc[-1] if (around.kind == k).any() else "-"
                 for k in ("user_annotation", "cpu_op")}
        rows.append((f"{w.name} in {inner['user_annotation']} / {inner['cpu_op']}", w.dur))
    return _durations_by_name(pd.DataFrame(rows, columns=["name", "dur"]))


def markdown(df: pd.DataFrame) -> str:
    head = "| name | count | total ms | median ms | max ms |\n|---|---:|---:|---:|---:|"
    rows = [f"| `{n}` | {int(r['count'])} | {r.total_ms:.2f} | {r.median_ms:.3f} | {r.max_ms:.2f} |"
            for n, r in df.iterrows()]
    return "\n".join([head, *rows])


def main(argv=None) -> int:
    ap = cli.ArgumentParser(prog="python -m bench.analysis.profile_summary", description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", help="a torch-profiler chrome trace (.json or .json.gz)")
    ap.add_argument("--top", type=cli.positive(int), default=25, help="rows per table")
    a = ap.parse_args(argv)
    ev = load_events(a.trace)
    if ev.empty:
        raise cli.UsageError(f"{a.trace}: no CPU or CUDA-runtime events (was the profile started with CPU activity?)")
    span = (ev.ts + ev.dur).max() - ev.ts.min()
    print(f"{a.trace}: {len(ev)} events over {span / 1e3:.1f} ms\n")
    for kind in ("cuda_runtime", "cuda_driver", "cpu_op", "user_annotation"):
        print(f"## {kind}\n\n{markdown(by_name(ev, kind, a.top))}\n")
    print(f"## waits for the GPU, by caller (SGLang step / CPU operator)\n\n{markdown(syncs_by_caller(ev).head(a.top))}\n")
    return 0


if __name__ == "__main__":
    cli.run(main)
