"""Replay a trace with the estimator playing the GPU, every policy side by side.

    python -m sglang_mux.sim --table NAME|DIR [--trace conversation|synthetic|FILE]
        [--policy hybrid|dispatcher|batch-size|fixed:<decode SMs>|all|a,b,...] [--rate R | --time-scale S]
        [--limit N] [--input-cap T] [--tbt-slo-ms 50] [--ttft-slo-ms 2000] [--ttft-ms-per-token 0.2] [--json] [--verbose] ...

Prints one row per policy (the columns are explained below the table; ``sim_chunked`` prints the
same table for SGLang's chunked prefill), or with ``--json`` the settings and every summary.
Calibrations (``--host-ms`` / ``--host-from``, ``--decode-jitter``, ``--fused-jitter``,
``--prefill-slowdown``, ``--online-guard``, ``--prefill-graph``) make the simulated GPU and host
behave as served ones did; docs/sim.md says what each models. Bad arguments or a malformed trace:
one ``error:`` line and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Sequence

import numpy as np

from sglang_mux import cli
from sglang_mux.estimator import from_table_arg
from sglang_mux.mux_args import MuxArgs
from sglang_mux.mux_metrics import TimelineWriter
from sglang_mux.policy import SLO
from sglang_mux.sim.calibration import (Calibration, decode_jitter, fused_jitter, served_host_ms,
                                            table_prefill_slowdown)
from sglang_mux.sim.report import setup_line, table
from sglang_mux.sim.runs import policy_names, run_policies
from sglang_mux.sim.summary import SimResult
from sglang_mux.tables import resolve_table
from sglang_mux.traces import TraceReq, load_trace


def add_trace_args(ap: argparse.ArgumentParser) -> None:
    """The replayed requests, their arrivals, the SLOs and the output (``sim``'s and ``sim_chunked``'s)."""
    pos, nonneg = cli.positive, lambda kind: cli.positive(kind, allow_zero=True)
    ap.add_argument("--trace", default="conversation", help="trace file (JSON lines), or bundled: conversation | "
                    "synthetic")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--rate", type=pos(float), help="rescale arrivals to this many requests/s")
    g.add_argument("--time-scale", type=pos(float), help="multiply inter-arrival times by this")
    ap.add_argument("--arrival", choices=("trace", "poisson"), default="trace",
                    help="trace timestamps (bursty: rounded to 3 s), or Poisson at --rate "
                         "(the draws bench.run --arrival poisson uses)")
    ap.add_argument("--limit", type=pos(int), help="first N requests of the trace")
    ap.add_argument("--session-sample", type=int, default=1, metavar="K",
                    help="keep one session in K, every turn of it (as bench.run --session-sample)")
    ap.add_argument("--input-cap", type=pos(int), help="truncate prompts to this many tokens")
    ap.add_argument("--cache-tokens", type=pos(int), help="prefix cache capacity in tokens (LRU); default unbounded")
    ap.add_argument("--seed", type=cli.seed, default=0, help="the arrivals' and the draws' seed")
    ap.add_argument("--tbt-slo-ms", type=pos(float), default=50.0, help="time-between-tokens SLO (ms)")
    ap.add_argument("--ttft-slo-ms", type=pos(float), default=MuxArgs.ttft_slo_ms,
                    help="time-to-first-token SLO intercept (ms; the server's default)")
    ap.add_argument("--ttft-ms-per-token", type=nonneg(float), default=MuxArgs.ttft_ms_per_token,
                    help="length-aware TTFT SLO: += this x prompt tokens (the server's default; 0: flat, which never "
                         "preempts)")
    ap.add_argument("--verbose", action="store_true", help="print the replay's settings before the table")
    ap.add_argument("--table", help="a shipped table's name (e.g. llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3) or a "
                    "contention_tables/<model>__<gpu>__<backend>/ dir; the estimator plays the GPU")


def trace_from_args(ap: argparse.ArgumentParser, a: argparse.Namespace) -> list[TraceReq]:
    """``load_trace`` for the parsed arguments; a missing or malformed trace is a usage error."""
    if a.session_sample < 1:
        ap.error("--session-sample K keeps one session in K: give K >= 1 (1 keeps the whole trace)")
    try:
        return load_trace(a.trace, limit=a.limit, input_cap=a.input_cap, rate=a.rate, time_scale=a.time_scale,
                          cache_tokens=a.cache_tokens, arrival=a.arrival, seed=a.seed,
                          session_sample=a.session_sample)
    except FileNotFoundError as e:
        ap.error(f"--trace: {e.args[0] if e.args else e}")
    except ValueError as e:  # TraceError, and options load_trace refuses
        ap.error(f"--trace {a.trace}: {e}")


def estimator_from_args(ap: argparse.ArgumentParser, a: argparse.Namespace, estimator):
    """The given estimator (tests), else the ``--table``'s; neither is a usage error."""
    if estimator is not None:
        return estimator
    if not a.table:
        ap.error("the following arguments are required: --table (a shipped table's name or a table dir)")
    return from_table_arg(ap, a.table)


def slo_from_args(a: argparse.Namespace) -> SLO:
    return SLO(a.tbt_slo_ms, a.ttft_slo_ms, a.ttft_ms_per_token)


def print_results(a: argparse.Namespace, setup: dict, results: Sequence[SimResult]) -> None:
    """``--json``: the settings and summaries; else ``--verbose``'s settings line and the table."""
    if a.json:
        print(json.dumps({"setup": setup, "results": [r.summary for r in results]}, indent=1))
        return
    if a.verbose:
        print(setup_line(setup))
    print(table(results))


def main(argv: Sequence[str] | None = None, estimator=None) -> int:
    ap = cli.ArgumentParser(prog="python -m sglang_mux.sim", description=__doc__.split("\n\n")[0])
    add_trace_args(ap)
    ap.add_argument("--policy", default=MuxArgs.policy, help="hybrid | dispatcher | batch-size | fixed:<decode SMs> | "
                    "all | comma list")
    ap.add_argument("--no-preemption", action="store_true")
    ap.add_argument("--fcfs-prefill", action="store_true",
                    help="the server's --mux-fcfs-prefill: prefills in arrival order, not earliest TTFT deadline first")
    ap.add_argument("--slowdown", choices=("uniform", "worst", "none"), default="uniform",
                    help="actual co-run decode slowdown: U(1, guard), the guard, or none")
    hg = ap.add_mutually_exclusive_group()
    hg.add_argument("--host-ms", type=cli.positive(float, allow_zero=True), default=0.0,
                    help="the loop's host time per decode iteration (ms; measure it with bench.timeline_profile); "
                         "the dispatcher budgets it as the server does")
    hg.add_argument("--host-from", metavar="TIMELINE",
                    help="draw each decode iteration's host time from a served --mux-timeline (.jsonl or .xz) "
                         "instead; the dispatcher budgets their recent P90 as the server does")
    ap.add_argument("--fused-host-ms", type=cli.positive(float, allow_zero=True), default=None,
                    help="host time of a fused iteration (--policy hybrid; default: a co-run decode iteration's, "
                         "--host-ms or a --host-from draw)")
    ap.add_argument("--fused-price", metavar="FIXED_MS,SLOPE",
                    help="a fused iteration's GPU time as served: FIXED_MS + SLOPE x its base price (the server's "
                         "learned fused_price, a --mux-timeline's fused rows; default: the solo price)")
    ap.add_argument("--decode-jitter", metavar="TIMELINE",
                    help="a served point's --mux-timeline (.jsonl or .xz): co-run decode takes the table's worst "
                         "case times a draw of its measured / worst-case ratios (overrides --slowdown there)")
    ap.add_argument("--fused-jitter", metavar="TIMELINE",
                    help="a served hybrid point's --mux-timeline: a fused iteration takes its price times a draw "
                         "of that timeline's fused measured / base ratios (default: the price exactly)")
    ap.add_argument("--prefill-slowdown", default="1", metavar="X|table",
                    help="prefill beside a decode runs X times its table estimate, or per decode partition as the "
                         "table's co-run cells measured it ('table'); 1 is the paper's model")
    ap.add_argument("--online-guard", action="store_true",
                    help="the policy plans with a guard raised online to what serving measures, and a fused price "
                         "learned from the base price up, as the server's are (default: the table's guard and the "
                         "true fused price)")
    ap.add_argument("--prefill-graph", action="store_true",
                    help="fused batches run through SGLang's prefill CUDA graph, as the server's hybrid runs them: "
                         "padded to its captured sizes, and with --online-guard the fused price's prior (the base "
                         "price) acted on in full from the start")
    ap.add_argument("--timeline", help="append every decision to this JSONL file")
    ap.add_argument("--json", action="store_true", help="print the settings and summaries as JSON")
    a = ap.parse_args(argv)
    if a.prefill_slowdown != "table":
        try:
            a.prefill_slowdown = float(a.prefill_slowdown)
        except ValueError:
            ap.error(f"--prefill-slowdown takes a number X >= 1 or 'table', got {a.prefill_slowdown!r}")
        if not 1.0 <= a.prefill_slowdown < math.inf:
            ap.error(f"--prefill-slowdown X multiplies prefill beside decode: give X >= 1, got {a.prefill_slowdown}")

    def from_timeline(flag, read, path):
        try:
            return read(path) if path else None
        except (OSError, ValueError) as e:
            ap.error(f"{flag}: {e}")

    jitter = from_timeline("--decode-jitter", decode_jitter, a.decode_jitter)
    fjitter = from_timeline("--fused-jitter", fused_jitter, a.fused_jitter)
    host_draws = from_timeline("--host-from", served_host_ms, a.host_from)
    estimator = estimator_from_args(ap, a, estimator)
    if a.fused_price:
        try:
            fixed, slope = (float(x) for x in a.fused_price.split(","))
        except ValueError:
            ap.error(f"--fused-price takes FIXED_MS,SLOPE (e.g. 15.1,0.85), got {a.fused_price!r}")
        if not (0 <= fixed < math.inf and 0 < slope < math.inf):
            ap.error(f"--fused-price: FIXED_MS >= 0 and SLOPE > 0, both finite, got {a.fused_price!r}")
        estimator.fused_price.fixed, estimator.fused_price.slope = fixed, slope
    try:
        policy_names(a.policy, estimator)
    except cli.UsageError as e:
        ap.error(str(e))
    prefill_slowdown = a.prefill_slowdown
    if prefill_slowdown == "table":
        if not a.table:
            ap.error("--prefill-slowdown table needs --table")
        try:
            prefill_slowdown = table_prefill_slowdown(resolve_table(a.table), estimator)
        except ValueError as e:
            ap.error(f"--prefill-slowdown table: {e}")
    reqs = trace_from_args(ap, a)
    tl = None
    if a.timeline:
        tl = TimelineWriter(a.timeline)
    try:
        calib = Calibration(slowdown=a.slowdown, host_ms=a.host_ms, jitter=jitter, prefill_slowdown=prefill_slowdown,
                            host_draws=host_draws, fused_host_ms=a.fused_host_ms, fused_jitter=fjitter)
        res = run_policies(reqs, estimator, a.policy, calib, slo=slo_from_args(a), preemption=not a.no_preemption,
                           seed=a.seed, timeline=tl, online_guard=a.online_guard, prefill_graph=a.prefill_graph,
                           fcfs=a.fcfs_prefill)
    finally:
        if tl is not None:
            tl.close()
    setup = {"trace": a.trace, "requests": len(reqs), "rate": a.rate, "time_scale": a.time_scale,
             "arrival": a.arrival, "host_ms": a.host_ms, "host_from": a.host_from, "decode_jitter": a.decode_jitter,
             "fused_jitter": a.fused_jitter,
             "online_guard": a.online_guard, "prefill_slowdown": prefill_slowdown, "fused_host_ms": a.fused_host_ms,
             "fused_price": a.fused_price, "prefill_graph": a.prefill_graph,
             "input_cap": a.input_cap, "cache_tokens": a.cache_tokens, "tbt_slo_ms": a.tbt_slo_ms,
             "ttft_slo_ms": a.ttft_slo_ms, "ttft_ms_per_token": a.ttft_ms_per_token, "preemption": not a.no_preemption,
             "fcfs_prefill": a.fcfs_prefill, "slowdown": a.slowdown, "seed": a.seed,
             "offered_req_s": (len(reqs) - 1) / reqs[-1].arrival_s if reqs[-1].arrival_s > 0 else None,
             "mean_input": float(np.mean([q.n_input for q in reqs])),
             "reused_share": float(sum(q.reused for q in reqs) / max(1, sum(q.n_input for q in reqs)))}
    print_results(a, setup, res)
    return 0
