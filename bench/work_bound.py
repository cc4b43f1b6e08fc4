"""How much of one GPU a workload needs at a rate, from a table's full-GPU solo times: an upper
bound on the goodput any scheduler can reach, and on the mux's lead over chunked prefill.

    python -m bench.work_bound --table TABLE --input-cap 8000 --tbt-slo-ms 30 \\
        --rates 3,3.5,4,4.5,5,6 [--chunk 512] [--baseline 4] [--trace conversation] [--limit 300]
        [--host-ms 2] [--min-bs 32] [--json]

Per second of serving at rate R (requests of the trace slice, prefix reuse as the simulator
computes it):

- prefill: R x the mean full-GPU solo prefill time of a request (the table's fit);
- decode: an iteration every t = TBT SLO - host ms at most, with bs = R x mean output x t
  running requests (Little's law), each iteration the full-GPU solo decode time of bs requests
  all at the mean context (no long request setting a floor): decode(bs) / t of the GPU;
- weights: decode(1 request, 1 token of context) / t, the part of decode that a mixed chunk
  shares with the prefill's GEMMs (the weights are read once for both);
- chunked prefill (``--chunk B``): R x the mean over requests of the sum over their B-token
  chunks, each at the fit's time for B new tokens after the prefix already there (small GEMMs,
  the prefix's KV read again by every chunk); without ``--chunk``, the whole-prompt prefill.

The schedules compared: **time-slicing** (decode and prefill one after the other at full-GPU
speed) fits where prefill + decode <= 1; **mixed chunks** where chunked prefill + decode -
weights <= 1; **spatial co-running** where prefill + decode <= E, E being a co-run efficiency
the table's own co-run cells measured (decode's share of its full-GPU rate plus prefill's
share of its full-GPU rate, over cells with at least ``--min-bs`` decode requests; 1 = no gain
over time-slicing): their max (every co-run as good as the best cell: the bound) and their
median. Queueing, host
stalls and TTFT are left out, so each is a bound from above. ``--baseline R``: a measured
goodput of the best chunked prefill; the mux's lead over it is at most the co-run bound / R.
"""

from __future__ import annotations

import json
import sys
from statistics import median
from typing import Sequence

import numpy as np
from tqdm import tqdm

from sglang_mux import cli
from sglang_mux.tables import TableError

from sglang_mux import cli_io as _cli_io


def corun_efficiency(table_dir, estimator, min_bs: int = 32) -> dict:
    """The table's co-run cells with >= min_bs decode requests: max and median efficiency."""
    from sglang_mux.sim import cell_prefill_solo_ms
    from sglang_mux.tables import corun_cells

    total = estimator.total_sms
    eff = []
    for c in corun_cells(table_dir):
        if c["decode_bs"] < min_bs:
            continue
        r = c["decode_reused"]
        dec = estimator.decode_solo_ms(total, c["decode_bs"], c["decode_bs"] * r, max_reused=r)
        pre = cell_prefill_solo_ms(estimator, c, total)
        eff.append(dec / c["decode_corun_ms"] + pre / c["prefill_launch_ms"])
    if not eff:
        raise ValueError(f"{table_dir}: no co-run cell with >= {min_bs} decode requests")
    return {"max": round(max(eff), 3), "median": round(median(eff), 3), "cells": len(eff), "min_bs": min_bs}


def chunked_prefill_ms(estimator, n: int, reused: int, chunk: int) -> float:
    """A prompt's prefill on the full GPU in `chunk`-token pieces, each after the ones before."""
    from sglang_mux.estimator import PrefillReq

    t, done = 0.0, 0
    while done < n:
        c = min(chunk, n - done)
        t += estimator.prefill_ms(estimator.total_sms, [PrefillReq(c, reused + done)])
        done += c
    return t


def shares(reqs, estimator, rate: float, tbt_slo_ms: float, host_ms: float = 2.0,
           chunk: int | None = None) -> dict:
    """The GPU's shares at `rate` (module docstring)."""
    from sglang_mux.estimator import PrefillReq

    total = estimator.total_sms
    t_it = tbt_slo_ms - host_ms
    if not t_it > 0:
        raise ValueError(f"the TBT SLO ({tbt_slo_ms} ms) leaves no decode time after {host_ms} ms of host")
    pre_s = float(np.mean([estimator.prefill_ms(total, [PrefillReq(q.n_input - q.reused, q.reused)])
                           for q in reqs])) / 1e3
    chunk_s = pre_s if not chunk else float(np.mean(
        [chunked_prefill_ms(estimator, q.n_input - q.reused, q.reused, chunk) for q in reqs])) / 1e3
    out = float(np.mean([q.output_len for q in reqs]))
    ctx = float(np.mean([q.n_input for q in reqs])) + out / 2
    bs = max(1, round(rate * out * t_it / 1e3))
    # a uniform batch at the mean context: the smallest occupancy floor, as a bound wants
    dec_ms = estimator.decode_solo_ms(total, bs, int(bs * ctx), max_reused=None)
    w_ms = estimator.decode_solo_ms(total, 1, 1, max_reused=1)
    p, pc, d, w = rate * pre_s, rate * chunk_s, dec_ms / t_it, w_ms / t_it
    return {"rate": rate, "prefill": round(p, 3), "chunked_prefill": round(pc, 3), "decode": round(d, 3),
            "weights": round(w, 3), "decode_bs": bs, "decode_ms": round(dec_ms, 2), "iteration_ms": t_it,
            "time_slicing": round(p + d, 3), "mixed": round(pc + d - w, 3)}


def bounds(rows: Sequence[dict], efficiency: dict, baseline: float | None = None) -> dict:
    """The highest rate of `rows` each schedule fits (None: not even the lowest); with a
    measured `baseline` goodput, the largest lead over it the co-run bound leaves."""
    def top(fits):
        ok = [r["rate"] for r in rows if fits(r)]
        return max(ok) if ok else None
    out = {"time_slicing": top(lambda r: r["time_slicing"] <= 1.0), "mixed": top(lambda r: r["mixed"] <= 1.0),
           "co_run_at_max_E": top(lambda r: r["time_slicing"] <= efficiency["max"]),
           "co_run_at_median_E": top(lambda r: r["time_slicing"] <= efficiency["median"])}
    if baseline:
        out["baseline"] = baseline
        out["lead_at_most"] = None if out["co_run_at_max_E"] is None else round(out["co_run_at_max_E"] / baseline, 3)
    return out


def render(res: dict) -> str:
    e = res["corun_efficiency"]
    lines = [f"TBT SLO {res['tbt_slo_ms']:g} ms, {res['requests']} requests of {res['trace']} (inputs <= "
             f"{res['input_cap'] or 'uncapped'}; chunks of {res['chunk'] or 'the whole prompt'}); co-run efficiency E over the table's cells with >= {e['min_bs']} decode "
             f"requests: max {e['max']}, median {e['median']} ({e['cells']} cells)", "",
             "| rate | prefill | chunked prefill | decode (bs) | weights | time-slicing | mixed | fits: slicing / mixed / co-run ≤ E |",
             "|---:|---:|---:|---:|---:|---:|---:|---|"]
    yn = lambda ok: "✓" if ok else "✗"  # noqa: E731
    for r in res["rows"]:
        lines.append(f"| {r['rate']:g} | {r['prefill']:.2f} | {r['chunked_prefill']:.2f} | {r['decode']:.2f} ({r['decode_bs']}) | "
                     f"{r['weights']:.2f} | {r['time_slicing']:.2f} | {r['mixed']:.2f} | "
                     f"{yn(r['time_slicing'] <= 1)} / {yn(r['mixed'] <= 1)} / {yn(r['time_slicing'] <= e['max'])} |")
    b = res["bounds"]
    f = lambda x: "below the lowest rate" if x is None else f"{x:g}"  # noqa: E731
    lines += ["", f"highest rate that fits: time-slicing {f(b['time_slicing'])}, mixed chunks {f(b['mixed'])}, "
                  f"co-running {f(b['co_run_at_max_E'])} at the max E, {f(b['co_run_at_median_E'])} at the median E"]
    if "baseline" in b:
        lead = "—" if b["lead_at_most"] is None else f"{b['lead_at_most']:.3g}x"
        lines.append(f"against a measured best chunked goodput of {b['baseline']:g}: a lead of at most {lead}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    pos, pos_i = cli.positive(float), cli.positive(int)
    ap = cli.ArgumentParser(prog="python -m bench.work_bound", description=_cli_io.about(__doc__))
    ap.add_argument("--table", required=True, type=_cli_io.table_arg, help="a table directory or a shipped table's name "
                                                   "(contention_tables/<model>__<gpu>__<backend>)")
    ap.add_argument("--trace", default="conversation", help="trace file, or bundled: conversation | synthetic")
    ap.add_argument("--limit", type=pos_i, default=300, help="first N requests of the trace")
    ap.add_argument("--input-cap", type=pos_i, help="truncate prompts to this many tokens")
    ap.add_argument("--tbt-slo-ms", type=pos, default=50.0, help="P99 TBT SLO")
    ap.add_argument("--host-ms", type=cli.positive(float, allow_zero=True), default=2.0,
                    help="host time per decode iteration (served P50: ~2)")
    ap.add_argument("--rates", required=True, type=_cli_io.numbers(example="3,4,5"),
                    help="comma list of request rates")
    ap.add_argument("--min-bs", type=pos_i, default=32, help="co-run cells with at least this many decode requests")
    ap.add_argument("--baseline", type=pos, help="a measured goodput of the best chunked prefill (req/s)")
    ap.add_argument("--chunk", type=pos_i, help="the mixed schedule's prefill chunk (tokens; default: whole prompts)")
    ap.add_argument("--no-allreduce", action="store_true",
                    help="a TP table: leave its all-reduces out (the rank's slice alone), the bound from the other "
                         "side of their eagerly timed price")
    ap.add_argument("--json", action="store_true", help="print JSON instead of the table")
    a = ap.parse_args(argv)
    rates = sorted(a.rates)
    if a.host_ms >= a.tbt_slo_ms:
        ap.error(f"--host-ms {a.host_ms:g} leaves no decode time within --tbt-slo-ms {a.tbt_slo_ms:g}: "
                 "give a host time below the SLO")
    est = _cli_io.estimator(a.table)
    if a.no_allreduce:
        if est.allreduce is None:
            ap.error("--no-allreduce: the table has no all-reduces to leave out (a TP-1 table)")
        est.allreduce = None
    reqs = _cli_io.load_trace(a.trace, limit=a.limit, input_cap=a.input_cap)
    try:
        eff = corun_efficiency(a.table, est, a.min_bs)
    except TableError as e:  # no cells.jsonl
        raise cli.UsageError(f"--table: {e}") from None
    except ValueError as e:  # no co-run cell that large
        raise cli.UsageError(f"--min-bs: {e}") from None
    # some seconds a rate with a small --chunk: progress on a terminal
    rows = [shares(reqs, est, r, a.tbt_slo_ms, a.host_ms, a.chunk)
            for r in tqdm(rates, desc="rates", unit="rate", disable=None, file=sys.stderr, leave=False)]
    res = {"table": str(a.table), "trace": a.trace, "requests": len(reqs), "input_cap": a.input_cap, "chunk": a.chunk,
           "tbt_slo_ms": a.tbt_slo_ms, "host_ms": a.host_ms, "corun_efficiency": eff, "rows": rows,
           "bounds": bounds(rows, eff, a.baseline), "command": "python -m bench.work_bound " + " ".join(
               argv if argv is not None else sys.argv[1:])}
    print(json.dumps(res, indent=1) if a.json else render(res))
    return 0


if __name__ == "__main__":
    cli.run(main)
