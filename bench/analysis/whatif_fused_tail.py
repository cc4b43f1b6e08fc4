"""The hybrid at TBT 30 with its served fused host tail (CPU): would the P99 fused budget pass?

    python -m bench.analysis.whatif_fused_tail [--quantiles 0.9,0.95,0.99 | --streaks | --stalls
                                                | --overruns-from TIMELINE [--span S]]   (repository root)

The predicted map (``sim_hybrid_map``) gives every fused iteration 2 ms of host time, as
calibrated on chunked prefill's served points. Served at TBT 30 on an H100, the hybrid's fused gaps
exceeded their planned price by -0.8 ms at the median but 5-6 ms at P99, and it failed both cells
on P99 TBT (bench/results/capped_tbt30_h100_2026-11-27/, code_tbt30_h100_2026-11-27/). This
replays the hybrid as the code now plans (each fused iteration budgeted for the P99 of its gap
over its price) on those two workloads, with each fused iteration's overrun drawn from its cell's
served timeline (``bench.analysis.tbt_tail.gaps``: fused rows' gap less ``t_decode_worst_ms``),
beside the map's fixed 2 ms and chunked 512 + mixed as the map plays it; and with, besides, each
iteration that starts a layer-wise batch drawing its host time from the served ones (gap less the
decode's GPU time: SGLang's batch formation and the first launch), which the hybrid budgets for
(``Snapshot.start_host_ms``, session 37's third change). Everything else is the
map's (``sim_hybrid_map``: the H100 FA3 table, seed 0, host times and jitter of the served s21
timeline). It assumes the served overrun does not depend on the chunk size; the served one came
from chunks planned to the old, looser budget. A what-if, not the map of record. CPU, ~1 minute.
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from bench.analysis import sim_hybrid_map as M
from bench.analysis.tbt_tail import fused_hosts, fused_overruns, gaps  # noqa: F401 (fused_hosts: API)
from sglang_mux import cli
from sglang_mux.policy import HOST_STALL_SHARE
from sglang_mux.mux_metrics import load_timeline

TBT = 30.0
CELLS = {  # workload (sim_hybrid_map.WORKLOADS) -> (served hybrid timeline, rates)
    "capped conversation (<= 8000)": ("bench/results/capped_tbt30_h100_2026-11-27/mux-hybrid.timeline.jsonl.xz",
                                      (3, 3.3, 3.6, 4, 4.4)),
    "code": ("bench/results/code_tbt30_h100_2026-11-27/mux-hybrid.timeline.jsonl.xz", (14, 15.5, 17, 18.5, 20)),
}


def overruns(timeline: str) -> np.ndarray:
    """The served fused iterations' gap less their planned price (ms)."""
    return fused_overruns(gaps(load_timeline(timeline)))


def start_hosts(timeline: str) -> np.ndarray:
    """The served decode iterations that started a layer-wise batch: gap less the decode's GPU
    time (ms), what the server's start budget books (``MuxLoop.book_host``)."""
    g = gaps(load_timeline(timeline))
    s = g[g.started & g.gpu_ms.notna()]
    return np.maximum((s.gap_ms - s.gpu_ms).to_numpy(), 0.0)


def point_text(p: dict) -> str:
    """A simulated point as a table cell: pass, P99 TTFT s, P99 TBT ms."""
    return f"{'✓' if p['ok'] else '✗'} {p['ttft_p99_s']:.2f} s, {p['tbt_p99_ms']:.1f} ms"


def quantiles(text: str) -> list[float]:
    try:
        qs = [float(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"numbers in (0, 1) separated by commas, got {text!r}") from None
    if not qs or not all(0.0 < q < 1.0 for q in qs):
        raise argparse.ArgumentTypeError(f"numbers in (0, 1), got {text!r}")
    return qs


def by_quantile(qs: list[float]) -> int:
    """The served-overruns-and-starts column at each fused budget quantile: what budgeting the
    fused tail less (or more) tightly trades."""
    est, jit, host, corun = M.simulator_inputs()
    print(f"TBT {TBT:g} ms; the hybrid with served fused overruns and batch starts; each point: "
          "pass, P99 TTFT s, P99 TBT ms\n")
    with tempfile.TemporaryDirectory() as d:
        for wname, (timeline, rates) in CELLS.items():
            o, st = overruns(timeline), start_hosts(timeline)
            print(f"## {wname}\n\n| fused budget quantile | " + " | ".join(f"{r:g} req/s" for r in rates) +
                  " |\n|---:|" + "---|" * len(rates))
            for q in qs:
                pts = [M.run_point(est, jit, host, corun, M.WORKLOADS[wname], TBT, "hybrid", rate, Path(d),
                                   fused_host=list(o), start_host=list(st), fused_host_quantile=q) for rate in rates]
                print(f"| {q:g} | " + " | ".join(map(point_text, pts)) + " |")
            print()
    return 0


def by_streak() -> int:
    """The served overruns and batch starts at the server's budget quantile, a fused streak's
    first iterations (``tbt_tail.gaps``' ``starts_streak``) pooled with the rest, as the server
    booked them when served, or drawn and budgeted apart (``Snapshot.fused_start_host_ms``)."""
    est, jit, host, corun = M.simulator_inputs()
    print(f"TBT {TBT:g} ms; the hybrid with served fused overruns and batch starts; each point: "
          "pass, P99 TTFT s, P99 TBT ms\n")
    with tempfile.TemporaryDirectory() as d:
        for wname, (timeline, rates) in CELLS.items():
            w, g, st = M.WORKLOADS[wname], gaps(load_timeline(timeline)), start_hosts(timeline)
            inside, first = fused_overruns(g, starts=False), fused_overruns(g, starts=True)
            print(f"## {wname}: fused overruns within a streak {len(inside)}, P99 {np.percentile(inside, 99):.1f} ms; "
                  f"a streak's first {len(first)}, P50 {np.median(first):.1f} ms, P99 {np.percentile(first, 99):.1f} ms\n")
            print("| req/s | pooled (one budget) | apart (a streak's first budgeted on its own) | chunked 512 + mixed |")
            print("|---:|---|---|---|")
            for rate in rates:
                cells = [M.run_point(est, jit, host, corun, w, TBT, "hybrid", rate, Path(d),
                                     fused_host=[*inside, *first], start_host=list(st)),
                         M.run_point(est, jit, host, corun, w, TBT, "hybrid", rate, Path(d), fused_host=list(inside),
                                     start_host=list(st), fused_start_host_ms=list(first)),
                         M.run_point(est, jit, host, corun, w, TBT, "chunked 512 + mixed", rate, Path(d))]
                print(f"| {rate:g} | " + " | ".join(map(point_text, cells)) + " |")
            print()
    return 0


STALL_CELLS = {  # the capped conversation on session 43's H100 too: its fused overruns had a stall cluster
    **CELLS, "capped conversation (<= 8000), session 43's host": (
        "bench/results/x4_s43_2026-11-27/cap30/mux-hybrid.timeline.jsonl.xz", (2.4, 2.9, 3.3, 3.6, 4))}


def by_stalls() -> int:
    """The served overruns and batch starts at the server's budget quantile, overruns over half the
    SLO booked in it (the server before) or left out (``DecodeHostTime``'s ``stall_ms``)."""
    est, jit, host, corun = M.simulator_inputs()
    print(f"TBT {TBT:g} ms; the hybrid with served fused overruns and batch starts; each point: "
          "pass, P99 TTFT s, P99 TBT ms\n")
    with tempfile.TemporaryDirectory() as d:
        for wname, (timeline, rates) in STALL_CELLS.items():
            w = M.WORKLOADS[wname.split(", session")[0]]
            o, st = overruns(timeline), start_hosts(timeline)
            stall_ms = HOST_STALL_SHARE * TBT
            stall = o > stall_ms
            print(f"## {wname}: {len(o)} fused overruns, {stall.mean():.2%} over {stall_ms:g} ms; P99 "
                  f"{np.percentile(o, 99):.1f} ms, {np.percentile(o[~stall], 99):.1f} ms without those\n")
            print("| req/s | stalls booked | stalls left out | chunked 512 + mixed |\n|---:|---|---|---|")
            for rate in rates:
                cells = [M.run_point(est, jit, host, corun, w, TBT, "hybrid", rate, Path(d), fused_host=list(o),
                                     start_host=list(st), fused_stalls_apart=apart) for apart in (False, True)]
                cells.append(M.run_point(est, jit, host, corun, w, TBT, "chunked 512 + mixed", rate, Path(d)))
                print(f"| {rate:g} | " + " | ".join(map(point_text, cells)) + " |")
            print()
    return 0


def measured_overruns(timeline: str, span_s: float | None = None) -> np.ndarray:
    """A served hybrid's fused iterations' measured gap (``measured_decode_ms``, the GPU's clock
    from the last batch's end) less their planned price (ms), within ``span_s`` seconds of its
    first row (None: all)."""
    t = load_timeline(timeline)
    if span_s is not None:
        t = t[t.time - t.time.iloc[0] < span_s]
    g = gaps(t)
    f = g[(g.kind == "fused") & (g.planned_ms > 0) & g.gpu_ms.notna()]
    if f.empty:
        raise cli.UsageError(f"{timeline}: no fused iteration with a measured gap in that span")
    return (f.gpu_ms - f.planned_ms).to_numpy()


def by_borrowed(timeline: str, span_s: float | None) -> int:
    """Each cell with another run's fused overruns (``measured_overruns``): the current loop's,
    where a cell's own were served by an older one."""
    o = measured_overruns(timeline, span_s)
    est, jit, host, corun = M.simulator_inputs()
    print(f"TBT {TBT:g} ms; the hybrid with the fused overruns of {timeline} ({len(o)}, P50 {np.median(o):.1f} ms, "
          f"P99 {np.percentile(o, 99):.1f} ms) and each cell's own batch starts; each point: pass, P99 TTFT s, "
          "P99 TBT ms\n")
    with tempfile.TemporaryDirectory() as d:
        for wname, (cell_timeline, rates) in CELLS.items():
            w, st = M.WORKLOADS[wname], start_hosts(cell_timeline)
            print(f"## {wname}\n\n| req/s | hybrid, borrowed overruns | chunked 512 + mixed |\n|---:|---|---|")
            for rate in (*rates, round(rates[-1] * 1.1, 2)):  # one step past the cell's rates
                cells = [M.run_point(est, jit, host, corun, w, TBT, "hybrid", rate, Path(d), fused_host=list(o),
                                     start_host=list(st)),
                         M.run_point(est, jit, host, corun, w, TBT, "chunked 512 + mixed", rate, Path(d))]
                print(f"| {rate:g} | " + " | ".join(map(point_text, cells)) + " |")
            print()
    return 0


def main(argv=None) -> int:
    ap = cli.ArgumentParser(prog="python -m bench.analysis.whatif_fused_tail", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quantiles", type=quantiles, default=None,
                    help="instead, the hybrid with served overruns and batch starts at each of these fused "
                         "budget quantiles (e.g. 0.9,0.95,0.99; the server's is mux_args.FUSED_HOST_QUANTILE)")
    ap.add_argument("--streaks", action="store_true",
                    help="instead, a fused streak's first iterations pooled with the rest or budgeted apart")
    ap.add_argument("--stalls", action="store_true",
                    help="instead, the fused budget with overruns over half the SLO booked or left out")
    ap.add_argument("--overruns-from", default=None, metavar="TIMELINE",
                    help="instead, every cell with this served hybrid timeline's fused overruns")
    ap.add_argument("--span", type=cli.positive(float), default=None,
                    help="with --overruns-from: its first S seconds only (e.g. before a profiler started)")
    a = ap.parse_args(argv)
    if a.overruns_from:
        return by_borrowed(a.overruns_from, a.span)
    if a.stalls:
        return by_stalls()
    if a.quantiles:
        return by_quantile(a.quantiles)
    if a.streaks:
        return by_streak()
    est, jit, host, corun = M.simulator_inputs()
    print(f"TBT {TBT:g} ms; each point: pass, P99 TTFT s, P99 TBT ms\n")
    with tempfile.TemporaryDirectory() as d:
        for wname, (timeline, rates) in CELLS.items():
            w = M.WORKLOADS[wname]
            o, st = overruns(timeline), start_hosts(timeline)
            print(f"## {wname}: {len(o)} served fused overruns, P50 {np.median(o):.1f} ms, "
                  f"P99 {np.percentile(o, 99):.1f} ms; {len(st)} served batch starts' host time, "
                  f"P50 {np.median(st):.1f} ms, P90 {np.percentile(st, 90):.1f} ms\n")
            print("| req/s | hybrid, 2 ms fused host (the map) | hybrid, served fused overruns "
                  "| hybrid, served overruns and batch starts | chunked 512 + mixed |")
            print("|---:|---|---|---|---|")
            for rate in rates:
                cells = [M.run_point(est, jit, host, corun, w, TBT, "hybrid", rate, Path(d)),
                         M.run_point(est, jit, host, corun, w, TBT, "hybrid", rate, Path(d), fused_host=list(o)),
                         M.run_point(est, jit, host, corun, w, TBT, "hybrid", rate, Path(d), fused_host=list(o),
                                     start_host=list(st)),
                         M.run_point(est, jit, host, corun, w, TBT, "chunked 512 + mixed", rate, Path(d))]
                print(f"| {rate:g} | " + " | ".join(map(point_text, cells)) + " |")
            print()
    return 0


if __name__ == "__main__":
    cli.run(main)
