"""Predicted SLO map (CPU): hybrid, the dispatcher (today's mux), chunked 512 / 1024 + mixed and the
capped baseline (chunked 2048 + mixed, 512 tokens a request a step).

    python -m bench.analysis.sim_hybrid_map > map.md   (repository root; the map of record's command:
        bench/results/sim_hybrid_s52_2026-11-28/README.md, with --fused-jitter)

What it simulates (issue 43 item 3), seed 0 (``--seed``), on the H100 FA3 table (TABLE), the mux with host
times and decode jitter drawn from a served mux timeline (TIMELINE) and the online guard, for seven
workloads (WORKLOADS): the capped conversation (bundled ``conversation``, <= 8000 tokens, 45 s per
rate), the uncapped conversation (bench/data/conversation_sessions20.jsonl, 90 s) and the Mooncake
synthetic slice (bench/data/synthetic_first500.jsonl, <= 100K, 90 s), each calibrated as the
earlier predictions were (bench/results/sim_hybrid_2026-11-27/README.md); and ``code``,
``chat-1k``, ``sharegpt`` (45 s) and ``loogle`` (300 s, the length-aware TTFT rule), built
in-process per rate by ``bench.workloads`` with bench.run's salt (``rate=<R>``, round(span R)
requests) and replayed with the very Poisson arrivals bench.run
sends (``sim.load_trace(..., arrival="poisson", rate=R, seed=SEED)``): no prefix reuse, chunked
prefill's time beyond the fused model as served points fit it (CHUNKED_HOST_MS), and the mux's
prefill beside decode at the table's co-run slowdown (served code on an H100 ran at 1.07-1.13x,
not the conversation's 1.4x).
A mixed batch on the whole GPU is priced alike whichever loop forms it, hybrid or SGLang's chunked
prefill: ``Estimator.fused_ms``, the solo prefill fit plus 0.027 ms per decode row
(``fused_price.DECODE_ROW_MS``; the solo fit alone underprices decode rows in an extend batch),
padded to the next size SGLang's prefill CUDA graph captured (up to the chunk size for chunked
prefill, 4096 for the hybrid), and both count the decode rows in the chunk size, as SGLang does. The
hybrid runs as the server now does: fused chunks through SGLang's prefill CUDA graph, launched
before the last one's result is processed. With ``--fused-jitter TIMELINE`` (the map of record) a
fused iteration takes its price times a draw of that served timeline's measured / base ratios and,
as host time, a draw of its gaps less measured time. Without it, at its price plus a host time of
2 ms (0 on the
uncapped and synthetic traces): with it the hybrid meets 7 of its 8 served TBT-50 verdicts on lone
H100s (chat-1k at 20 fails the drift test), where 0 ms passes two served failures (capped
conversation 4.8, chat-1k 24). Its price's prior is acted on from the start and learned. On an H100 chat-1k's
fused iterations (~150 decode rows) served at 1.16x the solo fit, of which the row term gives
~1.14x (bench/results/overlap_fused_h100_2026-11-27/).
Rate steps of about 10 % per system from the lowest rate up; goodput = the last rate passed before
the first failure. A point passes with P99 TBT <= the SLO (50 and 30 ms), the
cell's P99 TTFT rule (flat 5 s, or the length-aware 2 s + 0.2 ms per prompt token) and no TTFT
drift (the simulators' own drift test). For code and chat-1k the walk also goes on past the first
failure until two rates fail in a row (is that failure an edge, and the highest rate passed).
Besides the walks, every system at the rates an H100 run measures (H100_POINTS, TBT 50), whether
or not its walk reached them. ``--queue-drift`` judges the length-aware cells (uncapped
conversation, loogle) by the length-aware drift test instead of bench.run's (a proposal: the plain
test fails a tail of long later turns where no queue grows).

Output: the markdown tables (goodput per cell; the H100 points; past the first failure; plan shares) on
stdout; every point (P99 TTFT, P99 TBT, drift, plan shares over busy time, decision counts) as
JSON in ``--json``. About 3-3.5 minutes on 2 cores; progress on stderr.
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench import workloads
from bench.analysis.tbt_tail import fused_hosts
from sglang_mux import cli, sim
from sglang_mux.drift import LENGTH_AWARE_MIN_REQUESTS
from sglang_mux import cli_io as _cli_io
from sglang_mux.estimator import Estimator
from sglang_mux.policy import SLO
from sglang_mux.sim_chunked import simulate_chunked

TABLE = "contention_tables/llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3"
TIMELINE = "bench/results/sim_calibration_s21/served_mux_3.timeline.jsonl.xz"  # host times, jitter
MAP_JSON = "sim_hybrid_map.json"  # a scratch file: a map of record's --json goes to its results folder
# Chunked prefill's time per iteration beyond the fused model, by chunk budget: what reproduces
# every verdict served on lone H100s (bench.analysis.sim_chunked_check,
# results/sim_chunked_check_s45_2026-11-27/: 512 at 0 ms 14 of 14, 1024 at 2 ms 16 of 16). SGLang's
# overlap loop hides the host's work behind the GPU's, so 512 adds nothing. 1,024-token mixed
# batches cost more than the model says: served P99 TBT ran 1-5 ms over the simulated, even at 2 ms.
# Fitted on the H100 table's fused model; the H200 table has none (its map, sim_hybrid_s42, used 2 ms).
# 2048: the capped baseline's served mixed point (H100, 0.6 req/s: P99 TBT 37.9 ms served, 36.9
# predicted; bench/results/long_prompts_h100_2026-12-06/).
CHUNKED_HOST_MS = {512: 0.0, 1024: 2.0, 2048: 2.0}
# workload: trace (a file or bundled name) or generator (a bench.workloads synthetic set), span s,
#           rates, input cap, (mux pool, chunked pool), the hybrid's fused host ms, mux prefill slowdown,
#           TTFT rule ("flat", seconds) or ("length", seconds, ms per prompt token), walk_on: also walk on
#           past the first failure (walk_on below; the goodput stays the last pass before it),
#           layerwise_max: the longest prompt one layer-wise prefill holds on the served mux server (a
#           longer one the hybrid fuses in chunks): 84,932 tokens for the 8B shape on an H100 at
#           --mem-fraction-static 0.75, as long_prompts.sh serves the long-prompt workloads (its log,
#           2026-12-06: 14.7 GiB free for activations, less sglang_mux.prefill_memory's margin).
#           Another table's map is told its server's with --layerwise-max (the limit is the served
#           GPU's memory, not the table's)
LAYERWISE_MAX_8B_H100 = 84_932
WORKLOADS = {
    "capped conversation (<= 8000)": dict(trace="conversation", span=45, cap=8000, pools=(None, None), fused_host=2.0,
                                          slow=1.4, ttft=("flat", 5.0),
                                          rates=(2, 2.2, 2.4, 2.6, 2.8, 3, 3.3, 3.6, 4, 4.4, 4.8, 5.2, 5.7, 6.2)),
    "uncapped conversation (1 session in 20)": dict(trace="bench/data/conversation_sessions20.jsonl", span=90,
                                                    cap=None, pools=(358_800, 423_494), fused_host=0.0,
                                                    slow="table", ttft=("length", 2.0, 0.2),
                                                    layerwise_max=LAYERWISE_MAX_8B_H100,
                                                    rates=(0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7,
                                                           0.75, 0.8, 0.9, 1, 1.1, 1.2, 1.3, 1.45, 1.6)),
    "Mooncake synthetic (<= 100K)": dict(trace="bench/data/synthetic_first500.jsonl", span=90, cap=100_000,
                                         pools=(358_800, 423_494), fused_host=0.0, slow="table", ttft=("flat", 5.0),
                                         layerwise_max=LAYERWISE_MAX_8B_H100,
                                         rates=(0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8,
                                                0.9, 1, 1.1, 1.2, 1.3, 1.45, 1.6, 1.75, 1.9, 2.1)),
    "code": dict(generator="code", span=45, cap=None, pools=(None, None), fused_host=2.0, slow="table",
                 ttft=("flat", 5.0), walk_on=True, rates=(8, 9, 10, 11, 12, 13, 14, 15.5, 17, 18, 20, 22, 24, 26)),
    "chat-1k": dict(generator="chat-1k", span=45, cap=None, pools=(None, None), fused_host=2.0, slow="table",
                    ttft=("flat", 5.0), walk_on=True, rates=(10, 11, 12, 13, 14.5, 16, 17.5, 19, 20, 22, 24, 26, 29, 32)),
    "sharegpt": dict(generator="sharegpt", span=45, cap=None, pools=(None, None), fused_host=2.0, slow="table",
                     ttft=("flat", 5.0), walk_on=True,
                     rates=(16, 18, 20, 22, 24, 26, 29, 32, 35, 38, 42, 46, 50, 55, 60, 66, 72)),
    # loogle and mixed: the points bench/plans/long_prompts.sh serves (--duration-s 45, which
    # bench.run stretches to 100 requests under the length-aware rule), request for request.
    "loogle": dict(generator="loogle", span=45, cap=None, pools=(358_800, 423_494), fused_host=2.0, slow="table",
                   ttft=("length", 2.0, 0.2), walk_on=True, layerwise_max=LAYERWISE_MAX_8B_H100,
                   rates=(0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.8, 0.9, 1, 1.1, 1.2)),
    # mixed (MuxWise §4.4.3): half sharegpt, half loogle, shuffled
    "mixed": dict(generator="mixed", span=45, cap=None, pools=(358_800, 423_494), fused_host=2.0, slow="table",
                  ttft=("length", 2.0, 0.2), walk_on=True, layerwise_max=LAYERWISE_MAX_8B_H100,
                  rates=(0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1, 1.1, 1.2, 1.3, 1.45, 1.6, 1.8, 2)),
}
# The points H100 runs measured (bench.run; the hybrid and chunked 1024 / 512 + mixed), TBT 50:
# bench/results/overlap_fused_h100_2026-11-27/code, chat1k_h100_2026-11-27, capped_tbt50_h100_2026-11-27.
H100_POINTS = (("code", 18), ("code", 20), ("code", 22), ("chat-1k", 20), ("chat-1k", 22), ("chat-1k", 24),
               ("capped conversation (<= 8000)", 4), ("capped conversation (<= 8000)", 4.4),
               ("capped conversation (<= 8000)", 4.8))
H100_TBT = 50.0
# The last: the peers' answer to a long prompt's head-of-line blocking (bench.capped_prefill).
SYSTEMS = ("hybrid", "dispatcher", "chunked 512 + mixed", "chunked 1024 + mixed", "chunked 2048 + mixed, cap 512")
MUX = SYSTEMS[:2]


def ttft_p99(res, reqs, rule) -> float:
    """P99 TTFT (s), or for the length-aware rule P99 of TTFT - k x prompt tokens (s)."""
    t = np.asarray(res.ttft_s)
    if rule[0] == "length":
        t = t - rule[2] * 1e-3 * np.array([q.n_input for q in reqs])
    return float(np.percentile(t, 99))


def span_s(w: dict, rate: float) -> float:
    """A point's seconds of arrivals: the workload's, stretched under the length-aware rule to
    bench.run's LENGTH_AWARE_MIN_REQUESTS requests, as bench.run serves it."""
    if w["ttft"][0] == "length":
        return max(w["span"], LENGTH_AWARE_MIN_REQUESTS / rate)
    return w["span"]


def requests(w: dict, rate: float, pool: int | None, tmp: Path, seed: int = 0) -> list:
    """One rate point's requests: a trace's first round(rate x span), or the generator's bench.run
    point (its salt, round(rate x span) requests) written as a trace; Poisson arrivals, ``seed``
    (bench.run's --seed: the arrivals and a generator's draws)."""
    if "generator" not in w:
        return sim.load_trace(w["trace"], limit=round(rate * span_s(w, rate)), rate=rate, arrival="poisson", seed=seed,
                              cache_tokens=pool, input_cap=w["cap"])
    wl = workloads.build(w["generator"], rate=rate, duration_s=span_s(w, rate), seed=seed, salt=f"rate={rate:g}",
                         input_cap=w["cap"])
    path = tmp / f"{w['generator']}__{rate:g}__{seed}.jsonl"
    workloads.write_trace(wl, path)
    return sim.load_trace(str(path), rate=rate, arrival="poisson", seed=seed, cache_tokens=pool)


def run_point(est, jit, host, corun, w, tbt, name, rate, tmp: Path, fused_host=None, start_host=None,
              seed: int = 0, **sim_kw) -> dict:
    """One system at one rate; ``fused_host``: the mux's fused host time in place of the
    workload's ``fused_host`` (a number, or draws: sim.simulate's ``fused_host_ms``);
    ``start_host``: draws for iterations that start a layer-wise batch (``start_host_ms``);
    ``seed``: the workload's (`requests`); ``sim_kw``: more of `sim.Calibration`'s settings for the
    mux (e.g. ``fused_host_quantile``), or ``ttft_ms_per_token`` / ``layerwise_max_tokens`` in place of
    the workload's."""
    slow = corun if w["slow"] == "table" else w["slow"]
    pool = w["pools"][0 if name in MUX else 1]
    reqs = requests(w, rate, pool, tmp, seed)
    if name in MUX:
        # under the length-aware rule the mux is told it, as the served plans do
        # (--mux-ttft-ms-per-token): its preemption decides on each prompt's own deadline
        per_token = sim_kw.pop("ttft_ms_per_token", w["ttft"][2] if w["ttft"][0] == "length" else 0.0)
        # the served server's memory: a longer prompt is fused in chunks
        layerwise = sim_kw.pop("layerwise_max_tokens", w.get("layerwise_max"))
        fcfs = sim_kw.pop("fcfs", False)  # the server's --mux-fcfs-prefill
        calib = sim.Calibration(jitter=jit, prefill_slowdown=slow, host_draws=host, start_host_ms=start_host,
                                fused_host_ms=w["fused_host"] if fused_host is None else fused_host, **sim_kw)
        r = sim.run_policies(reqs, est, name, calib, slo=SLO(tbt, w["ttft"][1] * 1e3, per_token), online_guard=True,
                             seed=0, prefill_graph=True, layerwise_max_tokens=layerwise, fcfs=fcfs)[0]
    else:
        budget = int(name.split()[1])
        cap = int(name.rsplit(" ", 1)[1]) if ", cap " in name else None
        if budget not in CHUNKED_HOST_MS:
            raise ValueError(f"chunked {budget}: no served calibration in CHUNKED_HOST_MS "
                             f"(has {sorted(CHUNKED_HOST_MS)}); serve it and run bench.analysis.sim_chunked_check")
        r = simulate_chunked(reqs, est, budget=budget, host_ms=CHUNKED_HOST_MS[budget], slo=SLO(tbt, w["ttft"][1] * 1e3),
                             cap=cap)
    s = r.summary
    tp = ttft_p99(r, reqs, w["ttft"])
    # a length-aware cell may judge the wait beyond each prompt's own prefill (--queue-drift): its
    # sessions' later turns are longer, and the plain test fails a tail of them with no queue
    drift_ok = s["ttft_queue_drift" if w.get("drift") == "queue" else "ttft_drift"]["ok"]
    ok = tp <= w["ttft"][1] and s["tbt_p99_ms"] <= tbt and drift_ok
    pt = {"rate": rate, "requests": len(reqs), "ok": bool(ok), "ttft_p99_s": round(tp, 2),
          "tbt_p99_ms": round(s["tbt_p99_ms"], 1), "drift_ok": bool(drift_ok)}
    if "partition_share" in s:  # spatial: every partition with prefill SMs, prefill alone (D0) included
        sh = s["partition_share"]
        pt["fused_share"] = round(sh.get("fused", 0.0), 3)
        pt["decode_alone_share"] = round(sum(v for k, v in sh.items() if k.endswith("/P0")), 3)
        pt["spatial_share"] = round(1 - pt["fused_share"] - pt["decode_alone_share"], 3)
        pt["reasons"] = s["reasons"]
    return pt


def run_cell(est, jit, host, corun, w, tbt, name, tmp: Path, seed: int = 0, **sim_kw):
    """The walk: rates from the lowest up to the first failure; (goodput, points). ``sim_kw``:
    `run_point`'s."""
    points, good = [], None
    for rate in w["rates"]:
        pt = run_point(est, jit, host, corun, w, tbt, name, rate, tmp, seed=seed, **sim_kw)
        points.append(pt)
        if not pt["ok"]:
            break
        good = rate
    return good, points


def walk_on(est, jit, host, corun, w, tbt, name, points, tmp: Path, seed: int = 0, **sim_kw) -> dict:
    """Past the walk's first failure, on up the rates until two fail in a row: whether that
    failure was an edge (a later rate passes) and the highest rate passed, as bench.run
    --no-stop-on-fail would find it on this grid."""
    rest = [r for r in w["rates"] if r > points[-1]["rate"]] if not points[-1]["ok"] else []
    more, fails = [], 1
    for rate in rest:
        if fails >= 2:
            break
        more.append(run_point(est, jit, host, corun, w, tbt, name, rate, tmp, seed=seed, **sim_kw))
        fails = 0 if more[-1]["ok"] else fails + 1
    passed = [p["rate"] for p in points + more if p["ok"]]
    return {"highest_pass": max(passed) if passed else None, "points": more}


def _verdict(p: dict, tbt: float, ttft: float) -> str:
    why = [k for k, bad in (("TTFT", p["ttft_p99_s"] > ttft), ("TBT", p["tbt_p99_ms"] > tbt),
                            ("drift", not p["drift_ok"])) if bad]
    return "✓" if p["ok"] else "✗ " + ", ".join(why)


def _shares(p: dict) -> str:
    return (f"{p['fused_share']:.0%} / {p['spatial_share']:.0%} / {p['decode_alone_share']:.0%}"
            if "fused_share" in p else "-")


def simulator_inputs(table: str = TABLE, timeline: str = TIMELINE) -> tuple:
    """(truth estimator, decode jitter, host draws, co-run prefill slowdown): what every point is
    played with, from ``table`` and a served ``timeline`` (TIMELINE: the 8B's on an H100; another
    model's loop spends other host times: the 70B at TP 2 reproduced its served point only with its
    own, bench/results/h200x4_s50_2026-11-28/)."""
    est = Estimator.from_table(table)
    return est, sim.decode_jitter(timeline), sim.served_host_ms(timeline), sim.table_prefill_slowdown(table, est)


def chosen_workloads(names: tuple[str, ...] | None = None, span_s: float | None = None,
                     queue_drift: bool = False, layerwise_max: int | None = LAYERWISE_MAX_8B_H100) -> dict:
    """WORKLOADS' entries named (None: all), each point ``span_s`` seconds of arrivals when given
    (bench.run's --duration-s) instead of its own; ``queue_drift``: the cells judged by the
    length-aware TTFT rule take the length-aware drift test (`sglang_mux.drift.queue_drift`);
    ``layerwise_max``: the served mux server's layer-wise limit for the cells that have one
    (None: no limit)."""
    out = {k: (dict(w, span=span_s) if span_s else w) for k, w in WORKLOADS.items() if names is None or k in names}
    out = {k: (dict(w, layerwise_max=layerwise_max) if "layerwise_max" in w and w["layerwise_max"] != layerwise_max
               else w) for k, w in out.items()}
    return {k: (dict(w, drift="queue") if queue_drift and w["ttft"][0] == "length" else w) for k, w in out.items()}


def needs_layerwise_max(names: tuple[str, ...] | None) -> list[str]:
    """The chosen workloads (None: all) whose prompts may pass a server's layer-wise limit."""
    return [k for k, w in WORKLOADS.items() if "layerwise_max" in w and (names is None or k in names)]


def build_map(json_path: Path, table: str = TABLE, workloads_: tuple[str, ...] | None = None,
              tbts: tuple[float, ...] = (50.0, 30.0), seed: int = 0, span_s: float | None = None,
              queue_drift: bool = False, fused_jitter: str | None = None,
              layerwise_max: int | None = LAYERWISE_MAX_8B_H100, fcfs: bool = False) -> None:
    """``table``: another GPU's (the H100 points are then left out); ``workloads_``: WORKLOADS keys
    (None: all); ``tbts``: the TBT SLO columns; ``seed``: the workloads' (bench.run's --seed; the
    H100 points are seed 0's and left out for another); ``span_s``: seconds of arrivals per point
    in place of each workload's own; ``queue_drift``: `chosen_workloads`'; ``fused_jitter``: a
    served hybrid timeline whose fused measured / base ratios the mux's fused iterations draw
    (`sim.fused_jitter`), and whose fused gaps less their measured time are their host time in place
    of each workload's fixed ``fused_host`` (`tbt_tail.fused_hosts`; None: they run at their
    price, with that fixed host time); ``layerwise_max``: `chosen_workloads`'; ``fcfs``: the mux
    servers run with --mux-fcfs-prefill."""
    t0 = time.time()
    est, jit, host, corun = simulator_inputs(table)
    kw = {} if fused_jitter is None else {"fused_jitter": sim.fused_jitter(fused_jitter),
                                          "fused_host": list(fused_hosts(fused_jitter))}
    if fcfs:
        kw["fcfs"] = True
    out = {"date": time.strftime("%Y-%m-%d"), "table": table, "timeline": TIMELINE, "seed": seed, "span_s": span_s,
           "queue_drift": queue_drift, "fused_jitter": fused_jitter, "layerwise_max": layerwise_max, "fcfs": fcfs,
           "cells": []}
    chosen = chosen_workloads(workloads_, span_s, queue_drift, layerwise_max)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for tbt in tbts:
            for wname, w in chosen.items():
                cell = {"workload": wname, "tbt_slo_ms": tbt, "ttft_rule": w["ttft"], "goodput": {}, "points": {}}
                for name in SYSTEMS:
                    cell["goodput"][name], cell["points"][name] = run_cell(est, jit, host, corun, w, tbt, name, tmp,
                                                                           seed, **kw)
                    if w.get("walk_on"):
                        cell.setdefault("past_first_failure", {})[name] = walk_on(
                            est, jit, host, corun, w, tbt, name, cell["points"][name], tmp, seed, **kw)
                    print(f"{wname} TBT {tbt:g}: {name} {cell['goodput'][name]} ({time.time() - t0:.0f} s)",
                          file=sys.stderr)
                out["cells"].append(cell)
        h100 = []
        served = table == TABLE and H100_TBT in tbts and seed == 0 and span_s is None  # as the H100 ran them
        for wname, rate in (H100_POINTS if served else ()):
            if wname not in chosen:
                continue
            cell = next(c for c in out["cells"] if c["workload"] == wname and c["tbt_slo_ms"] == H100_TBT)
            pts = {}
            for name in SYSTEMS:  # the walk's point where it got there, else simulated now (the same, seed 0)
                walked = cell["points"][name] + cell.get("past_first_failure", {}).get(name, {}).get("points", [])
                pts[name] = next((p for p in walked if p["rate"] == rate), None) or run_point(
                    est, jit, host, corun, chosen[wname], H100_TBT, name, rate, tmp, **kw)
            h100.append({"workload": wname, "rate": rate, "tbt_slo_ms": H100_TBT, "points": pts})
        print(f"H100 points ({time.time() - t0:.0f} s)", file=sys.stderr)
    out["h100_points"] = h100
    json_path.write_text(json.dumps(out, indent=1) + "\n")

    fmt = lambda g, lo: f"< {lo:g}" if g is None else f"{g:g}"  # noqa: E731
    print("| TBT ms | workload | " + " | ".join(SYSTEMS) + " | hybrid / best chunked |")
    print("|---|---|" + "---:|" * (len(SYSTEMS) + 1))
    for c in out["cells"]:
        lo = WORKLOADS[c["workload"]]["rates"][0]
        g = c["goodput"]
        best = max((g[s] or 0) for s in SYSTEMS[2:])
        ratio = "-" if not best else f"{(g['hybrid'] or 0) / best:.2f}"
        print(f"| {c['tbt_slo_ms']:g} | {c['workload']} | " + " | ".join(fmt(g[s], lo) for s in SYSTEMS) + f" | {ratio} |")

    if h100:
        print(f"\n## The H100 points (TBT {H100_TBT:g} ms, P99 TTFT <= 5 s): P99 TTFT s, P99 TBT ms, pass\n")
        print("| workload | req/s | " + " | ".join(SYSTEMS) + " |")
        print("|---|---:|" + "---|" * len(SYSTEMS))
    for h in h100:
        tt = WORKLOADS[h["workload"]]["ttft"][1]
        print(f"| {h['workload']} | {h['rate']:g} | " + " | ".join(
            f"{p['ttft_p99_s']:.2f} s, {p['tbt_p99_ms']:.1f} ms {_verdict(p, H100_TBT, tt)}"
            for p in (h["points"][s] for s in SYSTEMS)) + " |")

    print("\n## Past the first failure (code, chat-1k): on up the rates until two fail in a row\n")
    print("| TBT ms | workload | " + " | ".join(SYSTEMS) + " |")
    print("|---|---|" + "---|" * len(SYSTEMS))
    for c in out["cells"]:
        if "past_first_failure" not in c:
            continue
        cols = []
        for s in SYSTEMS:
            pf = c["past_first_failure"][s]
            fail = [p for p in c["points"][s] if not p["ok"]]
            walked = " ".join(f"{p['rate']:g} {'✓' if p['ok'] else '✗'}" for p in fail + pf["points"])
            cols.append(f"highest pass {fmt(pf['highest_pass'], WORKLOADS[c['workload']]['rates'][0])}"
                        + (f" ({walked})" if walked else ""))
        print(f"| {c['tbt_slo_ms']:g} | {c['workload']} | " + " | ".join(cols) + " |")

    print("\n## Plan shares of busy time, fused / spatial / decode alone, at the goodput and the first failure\n")
    print("| TBT ms | workload | " + " | ".join(MUX) + " |")
    print("|---|---|" + "---|" * len(MUX))
    for c in out["cells"]:
        cols = []
        for s in MUX:
            pts = c["points"][s]
            last = [p for p in pts if p["ok"]][-1:]
            fail = [p for p in pts if not p["ok"]]
            cols.append("; ".join(f"{p['rate']:g} {'✓' if p['ok'] else '✗'}: {_shares(p)}" for p in last + fail))
        print(f"| {c['tbt_slo_ms']:g} | {c['workload']} | " + " | ".join(cols) + " |")
    print(f"\n{time.time() - t0:.0f} s", file=sys.stderr)


def main(argv=None) -> int:
    ap = cli.ArgumentParser(prog="python -m bench.analysis.sim_hybrid_map", description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, default=Path(MAP_JSON), help="where to write every point")
    ap.add_argument("--table", default=TABLE, help="the latency table, a directory or a shipped name "
                    "(another GPU's leaves out the H100 points)")
    ap.add_argument("--workloads", default=None,
                    help="comma list of workloads (default all): " + ", ".join(WORKLOADS))
    ap.add_argument("--tbt", default="50,30", type=_cli_io.numbers(example="50,30"), help="TBT SLOs, ms, comma list")
    ap.add_argument("--seed", type=cli.seed, default=0, help="the workloads' seed (bench.run's --seed)")
    ap.add_argument("--span", type=cli.positive(float), default=None, metavar="SECONDS",
                    help="seconds of arrivals per point for every chosen workload, in place of its own "
                         "(e.g. 300 for the uncapped conversation: in 90 s its sessions' long later turns "
                         "barely come)")
    ap.add_argument("--queue-drift", action="store_true",
                    help="judge the length-aware cells (uncapped conversation, loogle) by the length-aware "
                         "drift test (each request's wait beyond its own prefill) instead of bench.run's")
    ap.add_argument("--fused-jitter", metavar="TIMELINE",
                    help="the mux's fused iterations draw this served hybrid timeline's measured / base "
                         "ratios (sim --fused-jitter) and its gaps less measured time as their host time; "
                         "default: they run at their price plus the workload's fixed host time")
    ap.add_argument("--fcfs-prefill", action="store_true",
                    help="the mux servers start prefills in arrival order (--mux-fcfs-prefill), not earliest "
                         "TTFT deadline first")
    ap.add_argument("--layerwise-max", default=None, metavar="TOKENS|none",
                    help="the served mux server's layer-wise limit: a longer prompt is fused in chunks (its "
                         "start-up log: 'a prompt of more than N new tokens runs as fused chunks'); default "
                         f"{LAYERWISE_MAX_8B_H100:,} on the H100 table, none set for another table")
    a = ap.parse_args(argv)
    if a.fused_jitter:
        try:
            sim.fused_jitter(a.fused_jitter)
        except (OSError, ValueError) as e:
            ap.error(f"--fused-jitter: {e}")
    chosen = None
    if a.workloads:
        chosen = tuple(x.strip() for x in a.workloads.split(","))
        bad = [x for x in chosen if x not in WORKLOADS]
        if bad:
            ap.error(f"--workloads: unknown {', '.join(bad)}; choose from {'; '.join(WORKLOADS)}")
    table = str(_cli_io.table_dir(a.table))
    table = TABLE if table == str(_cli_io.table_dir(TABLE)) else table
    if a.layerwise_max is None:
        if table != TABLE and needs_layerwise_max(chosen):
            ap.error(f"--layerwise-max: {', '.join(needs_layerwise_max(chosen))} may pass the served server's "
                     f"layer-wise limit, which depends on its GPU's memory; give it (TOKENS from the server's "
                     f"start-up log, or none), or leave those workloads out with --workloads")
        lw = LAYERWISE_MAX_8B_H100
    elif a.layerwise_max.lower() == "none":
        lw = None
    else:
        try:
            lw = int(a.layerwise_max.replace(",", "").replace("_", ""))
        except ValueError:
            lw = 0
        if lw <= 0:
            ap.error(f"--layerwise-max: a positive token count or none, got {a.layerwise_max!r}")
    build_map(a.json, table, chosen, tuple(a.tbt), a.seed, a.span, a.queue_drift, a.fused_jitter, lw, a.fcfs_prefill)
    return 0


if __name__ == "__main__":
    cli.run(main)
