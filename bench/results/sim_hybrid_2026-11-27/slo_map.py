"""Predicted SLO map (CPU): hybrid, the dispatcher (today's mux) and chunked 512 / 1024 + mixed.

    PYTHONPATH=$PWD python3 bench/results/sim_hybrid_2026-11-27/slo_map.py > bench/results/sim_hybrid_2026-11-27/map.md

Rate steps per system from the lowest rate up; goodput = the last rate passed before the first
failure. A point passes with P99 TBT <= the SLO, the P99 TTFT SLO of the cell and no TTFT drift
(the simulators' own drift test). Calibrations as the earlier predictions used them (README).
Writes map.json beside this file; prints the markdown table.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from sglang_mux import sim
from sglang_mux.estimator import Estimator
from sglang_mux.sim_chunked import simulate_chunked

HERE = Path(__file__).resolve().parent
TABLE = "contention_tables/llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3"
TIMELINE = "bench/results/sim_calibration_s21/served_mux_3.timeline.jsonl.xz"  # host times, jitter
# workload: trace, span s, rates, input cap, (mux pool, chunked pool), chunked host ms, mux prefill slowdown,
#           TTFT rule ("flat", seconds) or ("length", seconds, ms per prompt token)
WORKLOADS = {
    "capped conversation (<= 8000)": dict(trace="conversation", span=45, cap=8000, pools=(None, None), chunk_host=2.0,
                                          slow=1.4, ttft=("flat", 5.0),
                                          rates=(2, 2.2, 2.4, 2.6, 2.8, 3, 3.3, 3.6, 4, 4.4, 4.8, 5.2, 5.7, 6.2)),
    "uncapped conversation (1 session in 20)": dict(trace="bench/data/conversation_sessions20.jsonl", span=90,
                                                    cap=None, pools=(358_800, 423_494), chunk_host=0.0,
                                                    slow="table", ttft=("length", 2.0, 0.2),
                                                    rates=(0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7,
                                                           0.75, 0.8, 0.9, 1, 1.1, 1.2, 1.3, 1.45, 1.6)),
    "Mooncake synthetic (<= 100K)": dict(trace="bench/data/synthetic_first500.jsonl", span=90, cap=100_000,
                                         pools=(358_800, 423_494), chunk_host=0.0, slow="table", ttft=("flat", 5.0),
                                         rates=(0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8,
                                                0.9, 1, 1.1, 1.2, 1.3, 1.45, 1.6, 1.75, 1.9, 2.1)),
}
# "hybrid": a fused iteration's host time drawn as a co-run mux iteration's (the served mux
# timeline: its prefill formation and launches); "hybrid, SGLang host": as the chunked
# baseline's calibrated iteration (2 ms capped, 0 uncapped / synthetic).
SYSTEMS = ("hybrid", "hybrid, SGLang host", "dispatcher", "chunked 512 + mixed", "chunked 1024 + mixed")
MUX = SYSTEMS[:3]


def ttft_p99(res, reqs, rule) -> float:
    """P99 TTFT (s), or for the length-aware rule P99 of TTFT - k x prompt tokens (s)."""
    t = np.asarray(res.ttft_s)
    if rule[0] == "length":
        t = t - rule[2] * 1e-3 * np.array([q.n_input for q in reqs])
    return float(np.percentile(t, 99))


def run_cell(est, jit, host, corun, w, tbt, name):
    points, good = [], None
    slow = corun if w["slow"] == "table" else w["slow"]
    for rate in w["rates"]:
        pool = w["pools"][0 if name in MUX else 1]
        reqs = sim.load_trace(w["trace"], limit=round(rate * w["span"]), rate=rate, arrival="poisson", seed=0,
                              cache_tokens=pool, input_cap=w["cap"])
        if name in MUX:
            r = sim.run_policies(reqs, est, name.split(",")[0], tbt_slo_ms=tbt, ttft_slo_ms=w["ttft"][1] * 1e3,
                                 jitter=jit, online_guard=True, prefill_slowdown=slow, host_draws=host, seed=0,
                                 fused_host_ms=w["chunk_host"] if "SGLang" in name else None)[0]
        else:
            r = simulate_chunked(reqs, est, budget=int(name.split()[1]), host_ms=w["chunk_host"], tbt_slo_ms=tbt,
                                 ttft_slo_ms=w["ttft"][1] * 1e3)
        s = r.summary
        tp = ttft_p99(r, reqs, w["ttft"])
        ok = tp <= w["ttft"][1] and s["tbt_p99_ms"] <= tbt and s["ttft_drift"]["ok"]
        pt = {"rate": rate, "requests": len(reqs), "ok": bool(ok), "ttft_p99_s": round(tp, 2),
              "tbt_p99_ms": round(s["tbt_p99_ms"], 1), "drift_ok": bool(s["ttft_drift"]["ok"])}
        if "partition_share" in s:
            sh = s["partition_share"]
            pt["fused_share"] = round(sh.get("fused", 0.0), 3)
            pt["decode_alone_share"] = round(sum(v for k, v in sh.items() if k.endswith("/P0")), 3)
            pt["spatial_share"] = round(1 - pt["fused_share"] - pt["decode_alone_share"], 3)
            pt["reasons"] = s["reasons"]
        points.append(pt)
        if not ok:
            break
        good = rate
    return good, points


def main() -> int:
    t0 = time.time()
    est = Estimator.from_table(TABLE)
    jit, host = sim.decode_jitter(TIMELINE), sim.served_host_ms(TIMELINE)
    corun = sim.table_prefill_slowdown(TABLE, est)
    out = {"date": "2026-11-27", "table": TABLE, "timeline": TIMELINE, "seed": 0, "cells": []}
    for tbt in (50.0, 30.0):
        for wname, w in WORKLOADS.items():
            cell = {"workload": wname, "tbt_slo_ms": tbt, "ttft_rule": w["ttft"], "goodput": {}, "points": {}}
            for name in SYSTEMS:
                cell["goodput"][name], cell["points"][name] = run_cell(est, jit, host, corun, w, tbt, name)
                print(f"{wname} TBT {tbt:g}: {name} {cell['goodput'][name]} ({time.time() - t0:.0f} s)", file=sys.stderr)
            out["cells"].append(cell)
    (HERE / "map.json").write_text(json.dumps(out, indent=1) + "\n")
    fmt = lambda g, lo: f"< {lo:g}" if g is None else f"{g:g}"  # noqa: E731
    print("| TBT ms | workload | " + " | ".join(SYSTEMS) + " | hybrid (both) / best chunked |")
    print("|---|---|" + "---:|" * (len(SYSTEMS) + 1))
    for c in out["cells"]:
        lo = WORKLOADS[c["workload"]]["rates"][0]
        g = c["goodput"]
        best = max((g[s] or 0) for s in SYSTEMS[3:])
        ratio = " / ".join("-" if not best else f"{(g[h] or 0) / best:.2f}" for h in SYSTEMS[:2])
        print(f"| {c['tbt_slo_ms']:g} | {c['workload']} | " + " | ".join(fmt(g[s], lo) for s in SYSTEMS) + f" | {ratio} |")
    print(f"\n{time.time() - t0:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
