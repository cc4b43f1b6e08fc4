"""Where a mux point's time went, from the dispatcher timeline (``--mux-timeline``).

    python -m bench.timeline_profile RUN_DIR --system mux --rate 4 [--json OUT]

Per partition configuration: the share of the point's wall time, decisions, the median decode
batch, the median measured decode iteration and the median worst-case estimate. Then the
estimator against the GPU (measured / worst-case decode: above 1 means the estimate was not
a worst case — solo-fit error at D132/P0, fit or contention beyond the guard elsewhere; its
median alone and beside a prefill, which the overall one mixes), and
the host time between decode iterations (decision interval − measured decode: scheduling,
result processing, prefill launches — a bubble for decode), and, from a server that records
them, the loop's phases (``host_ms``: which one makes the tail) and the contention guard each
co-run iteration was planned with over the table's value (``guard``: what online refinement
has made of it since the server started, raises or the host scale). The point's bytes of the timeline
come from its ``.meta.json`` (``timeline_bytes``), so the decisions are exactly that point's.

With ``--enable-metrics`` on the server, ``bench.run`` keeps the ``sglang_mux`` counters after
each point (``.metrics.prom``); the prefill stream's GPU time, its idle gaps between chunks of a
batch (bubbles) and the measured/estimated prefill latency are then reported too, as the
difference from the previous point's counters (they count from server start).

``--table DIR`` scores the point's decode iterations against another table (a refit, say)
without serving it again: each iteration's worst case from that table's solo fit and guard, times
the online refinement the server had made by then (``guard``), plus the fixed decode cost it
had learned (``decode_offset_ms``), over what was measured. The decisions stay the served
table's, so this checks the estimate, not the goodput. It needs a timeline that records the
estimate's inputs (``decode_sum_reused`` …; older servers did not).
"""
from __future__ import annotations

import json
import lzma
import sys
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from sglang_mux import cli
from sglang_mux.cli import UsageError
from sglang_mux.mux_metrics import host_ms_per_decode

from . import record
from sglang_mux import cli_io as _cli_io
from . import run as runmod


def point_timeline(run_dir: Path, system: str, rate: float) -> pd.DataFrame:
    meta_path = runmod.point_file(run_dir, system, rate, ".meta.json")
    meta = runmod.read_json(meta_path)
    if meta is None:
        raise UsageError(f"no point {system}@{rate:g} in {run_dir} ({meta_path.name} missing)")
    rng = meta.get("timeline_bytes")
    rows = runmod.timeline_records(run_dir / f"{system}.timeline.jsonl", rng)
    if rows is None:
        raise UsageError(f"{system}@{rate:g} has no dispatcher timeline (a mux system started "
                         "with --mux-timeline records one)")
    return pd.DataFrame(rows)


def ratio_summary(r: pd.Series) -> dict:
    """Measured / estimated ratios: quantiles, max and the share above 1 (not a bound)."""
    return {"p50": round(float(r.median()), 4), "p90": round(float(r.quantile(0.9)), 4),
            "p99": round(float(r.quantile(0.99)), 4), "max": round(float(r.max()), 4),
            "share_above_1": round(float((r > 1).mean()), 4)}


def profile(t: pd.DataFrame) -> dict:
    if t.empty:
        return {"decisions": 0}
    t = t.sort_values("time").reset_index(drop=True)
    t["dt_s"] = t["time"].diff().shift(-1)  # until the next decision (the last one: unknown)
    t["config"] = "D" + t["decode_sms"].astype(int).astype(str) + "/P" + t["prefill_sms"].astype(int).astype(str)
    span = float(t["time"].iloc[-1] - t["time"].iloc[0])
    meas = t["measured_decode_ms"] if "measured_decode_ms" in t else pd.Series(float("nan"), index=t.index)
    by = t.assign(measured=meas).groupby("config").agg(
        decisions=("dt_s", "size"), time_s=("dt_s", "sum"), decode_bs=("decode_bs", "median"),
        measured_decode_ms=("measured", "median"), worst_decode_ms=("t_decode_worst_ms", "median"))
    by["share"] = by["time_s"] / span if span > 0 else float("nan")
    by = by.sort_values("time_s", ascending=False)
    out = {"decisions": int(len(t)), "span_s": round(span, 3),
           "configs": {k: {c: (None if pd.isna(v) else round(float(v), 4)) for c, v in row.items()}
                       for k, row in by.iterrows()}}
    m = t[meas.notna() & (t["t_decode_worst_ms"] > 0)]
    if len(m):
        r = m["measured_decode_ms"] / m["t_decode_worst_ms"]
        over = m[r > 1]
        # The median mixes two estimates: decode alone (the solo fit) and beside a prefill
        # (solo x the guard, a cell's worst case); each has its own median.
        alone = (m["prefill_sms"] <= 0) | (m["prefill_new"] <= 0 if "prefill_new" in m else False)
        out["measured_over_worst"] = {
            **ratio_summary(r), "above_1_by_config": {k: int(v) for k, v in over["config"].value_counts().items()},
            "p50_alone": _median(r[alone]), "p50_corun": _median(r[~alone])}
        gap = (m["dt_s"] * 1e3 - m["measured_decode_ms"]).dropna()
        if len(gap):
            out["host_gap_ms"] = {"p50": round(float(gap.median()), 3), "p90": round(float(gap.quantile(0.9)), 3)}
    if "decode_offset_ms" in t and t["decode_offset_ms"].notna().any():
        out["decode_offset_ms"] = round(float(t["decode_offset_ms"].dropna().iloc[-1]), 4)
    phases = host_phases(t)
    if phases:
        out["host_phases_ms"] = phases
    g = guard_growth(t)
    if g:
        out["guard_in_use_over_table"] = g
    return out


def _median(r: pd.Series) -> float | None:
    return round(float(r.median()), 4) if len(r) else None


def guard_growth(t: pd.DataFrame) -> dict | None:
    """The contention guard the co-run decode iterations were planned with over the table's
    value for the same query: what online refinement has made of it by then (None: no such rows)."""
    if "guard" not in t:
        return None
    g = t["guard"][t["guard"].map(lambda x: isinstance(x, dict))]
    if g.empty:
        return None
    r = pd.Series([x["in_use"] / x["table"] for x in g], index=g.index)
    half = len(r) // 2
    return {"iterations": int(len(r)), "p50": round(float(r.median()), 4), "p90": round(float(r.quantile(0.9)), 4),
            "max": round(float(r.max()), 4), "p50_first_half": round(float(r.iloc[:max(half, 1)].median()), 4),
            "p50_second_half": round(float(r.iloc[half:].median()), 4)}


INPUTS = ("decode_sum_reused", "decode_max_reused", "prefill_new", "prefill_reused")


def rescore(t: pd.DataFrame, estimator) -> dict:
    """Measured / worst-case decode of the point's iterations with ``estimator``'s table (see the
    module docstring), beside the served ratio of the same iterations."""
    if not set(INPUTS) <= set(t.columns):
        raise UsageError("this timeline does not record the decode estimate's inputs "
                         f"({', '.join(INPUTS)}): --table needs a point served since they were added")
    m = t[t["measured_decode_ms"].notna() & (t["decode_bs"] > 0) & t["decode_sum_reused"].notna()]
    if m.empty:
        raise UsageError("no decode iteration with the estimate's inputs in this point")
    ratio, served = [], []
    # the estimator per iteration: some seconds for a long point (progress shown on a terminal)
    for r in tqdm(m.itertuples(index=False), total=len(m), desc="rescore", unit="iter", disable=None,
                  file=sys.stderr):
        mx = None if pd.isna(r.decode_max_reused) else int(r.decode_max_reused)
        worst = estimator.decode_worst_ms(int(r.decode_sms), int(r.decode_bs), int(r.decode_sum_reused),
                                          int(r.prefill_new), int(r.prefill_reused), max_reused=mx)
        g = getattr(r, "guard", None)
        if isinstance(g, dict):
            worst *= g["in_use"] / g["table"]
        off = getattr(r, "decode_offset_ms", None)
        if off is not None and not pd.isna(off):
            worst += off  # the fixed cost the server had learned: not the table's
        ratio.append(r.measured_decode_ms / worst)
        served.append(r.measured_decode_ms / r.t_decode_worst_ms if r.t_decode_worst_ms > 0 else float("nan"))
    q, sv = pd.Series(ratio), pd.Series(served).dropna()
    return {"table": estimator.source, "iterations": int(len(q)), **ratio_summary(q),
            "served_p50": round(float(sv.median()), 4) if len(sv) else None}


def host_phases(t: pd.DataFrame, tail: float = 0.05) -> dict | None:
    """Per loop phase (the server's ``host_ms`` laps between two decode results): P50, P99 and
    the mean over the `tail` share of iterations with the most host time (laps less the GPU
    time), which says which phase makes the TBT tail. None without laps (an older server)."""
    if "host_ms" not in t:
        return None
    rows = t[t["host_ms"].map(lambda x: isinstance(x, dict) and bool(x)) & t["measured_decode_ms"].notna()]
    if rows.empty:
        return None
    laps = pd.DataFrame(list(rows["host_ms"]), index=rows.index).fillna(0.0)
    host = host_ms_per_decode(t)
    in_tail = host >= host.quantile(1 - tail)
    worst = laps[in_tail]
    out = {"iterations": int(len(laps)), "tail_iterations": int(len(worst)),
           "host_p50": round(float(host.median()), 3), "host_p99": round(float(host.quantile(0.99)), 3),
           "phases": {c: {"p50": round(float(laps[c].median()), 3), "p99": round(float(laps[c].quantile(0.99)), 3),
                          "tail_mean": round(float(worst[c].mean()), 3)}
                      for c in laps.columns}}
    os_ms = rows["os_ms"] if "os_ms" in rows else None
    if os_ms is not None and os_ms.map(lambda x: isinstance(x, dict)).all():
        o = pd.DataFrame(list(os_ms), index=rows.index)

        def side(sel):
            steal = o.loc[sel, "steal"].dropna()
            return {"off_cpu_mean_ms": round(float(o.loc[sel, "off_cpu"].mean()), 3),
                    "steal_share": round(float((steal > 0).mean()), 4) if len(steal) else None,
                    "steal_mean_ms": round(float(steal.mean()), 3) if len(steal) else None}
        out["os"] = {"all": side(o.index), "tail": side(in_tail[in_tail].index)}
    return out


PREFILL_KEYS = ("sglang_mux:prefill_busy_seconds_total", "sglang_mux:prefill_idle_seconds_total",
                "sglang_mux:prefill_latency_ratio_sum", "sglang_mux:prefill_latency_ratio_count")


def _counters(path: Path) -> dict[str, float] | None:
    samples = record.metrics_samples(path)
    return None if samples is None else {k: v for k, v in samples.items() if k in PREFILL_KEYS}


RATIO_HIST = "sglang_mux:prefill_latency_ratio"


def _ratio_buckets(path: Path) -> dict[float, float]:
    """{upper bound: cumulative count} of the prefill measured/estimated histogram of a scrape."""
    from prometheus_client.parser import text_string_to_metric_families

    if not path.exists():
        return {}
    for fam in text_string_to_metric_families(path.read_text()):
        if fam.name == RATIO_HIST:
            return {float(s.labels["le"]): s.value for s in fam.samples if s.name.endswith("_bucket")}
    return {}


def histogram_quantile(q: float, buckets: dict[float, float]) -> float | None:
    """Prometheus's histogram_quantile: linear inside the bucket holding the q-th observation
    (the lowest bucket starts at 0; one past the last finite bound answers that bound)."""
    bounds = sorted(buckets)
    if not bounds or buckets[bounds[-1]] <= 0:
        return None
    rank, lo, below = q * buckets[bounds[-1]], 0.0, 0.0
    for b in bounds:
        c = buckets[b]
        if c >= rank:
            if b == float("inf"):
                return lo
            return lo + (b - lo) * (rank - below) / (c - below) if c > below else b
        lo, below = b, c
    return None


def _tl_range(run_dir: Path, system: str, rate: float):
    try:
        tb = (runmod.read_json(runmod.point_file(run_dir, system, rate, ".meta.json")) or {}).get("timeline_bytes")
    except (OSError, ValueError, lzma.LZMAError):
        return None
    return tuple(tb) if tb else None


def _previous_in_server_run(run_dir: Path, system: str, rate: float) -> float | None:
    """The point that ran just before this one on the same server: its timeline byte range
    ends where this one's begins (a new server start first appends its warm-up decisions, so
    a point after a restart has no such predecessor). Without timeline ranges: the next lower
    rate (the order bench.run runs a system's rates in)."""
    rates = sorted(float(p.name.split("__")[1][: -len(".metrics.prom")])
                   for p in run_dir.glob(f"{system}__*.metrics.prom"))
    mine = _tl_range(run_dir, system, rate)
    others = {r: _tl_range(run_dir, system, r) for r in rates if r != rate}
    if mine is None or not any(others.values()):
        lower = [r for r in rates if r < rate]
        return lower[-1] if lower else None
    return next((r for r, tb in others.items() if tb is not None and tb[1] == mine[0]), None)


def prefill_stream(run_dir: Path, system: str, rate: float) -> dict | None:
    """The point's prefill-stream counters (this point's scrape minus the previous point's of
    the same server run); None without scraped metrics."""
    now = _counters(runmod.point_file(run_dir, system, rate, ".metrics.prom"))
    if not now or PREFILL_KEYS[0] not in now:
        return None
    prev = _previous_in_server_run(run_dir, system, rate)
    base = _counters(runmod.point_file(run_dir, system, prev, ".metrics.prom")) if prev is not None else {}
    d = {k: now.get(k, 0.0) - (base or {}).get(k, 0.0) for k in PREFILL_KEYS}
    if any(v < 0 for v in d.values()):  # the server restarted between the points
        d = {k: now.get(k, 0.0) for k in PREFILL_KEYS}
    busy, idle, rs, rn = (d[k] for k in PREFILL_KEYS)
    hist = _ratio_buckets(runmod.point_file(run_dir, system, rate, ".metrics.prom"))
    if hist and prev is not None and base:
        before = _ratio_buckets(runmod.point_file(run_dir, system, prev, ".metrics.prom"))
        if all(hist[b] >= before.get(b, 0.0) for b in hist):  # same server: this point's share
            hist = {b: c - before.get(b, 0.0) for b, c in hist.items()}
    p50 = histogram_quantile(0.5, hist) if hist else None
    return {"busy_s": round(busy, 3), "idle_s": round(idle, 3),
            "idle_share": round(idle / (busy + idle), 4) if busy + idle > 0 else None,
            "measured_over_estimate_mean": round(rs / rn, 4) if rn > 0 else None,
            "measured_over_estimate_p50": None if p50 is None else round(p50, 4)}


def render(p: dict) -> str:
    lines = [f"{p['decisions']} decisions over {p.get('span_s', 0):.1f} s", "",
             "| config | time share | decisions | decode bs (median) | measured decode ms | worst-case ms |",
             "|---|---:|---:|---:|---:|---:|"]
    f = lambda x, d=1: "—" if x is None else f"{x:.{d}f}"  # noqa: E731
    for k, c in p.get("configs", {}).items():
        lines.append(f"| {k} | {f(100 * c['share'] if c['share'] is not None else None)} % | "
                     f"{int(c['decisions'])} | {f(c['decode_bs'], 0)} | {f(c['measured_decode_ms'])} | "
                     f"{f(c['worst_decode_ms'])} |")
    r = p.get("measured_over_worst")
    if r:
        lines += ["", f"measured / worst-case decode: P50 {r['p50']:.3f}, P90 {r['p90']:.3f}, "
                      f"P99 {r['p99']:.3f}, max {r['max']:.3f}; above 1 in {100 * r['share_above_1']:.1f} % "
                      f"of iterations ({', '.join(f'{k}: {v}' for k, v in r['above_1_by_config'].items())})"]
        if r.get("p50_alone") is not None or r.get("p50_corun") is not None:
            lines.append(f"P50 decode alone {f(r.get('p50_alone'), 3)}, beside a prefill {f(r.get('p50_corun'), 3)}"
                         + (f"; the serving fixed cost learned: {p['decode_offset_ms']:.3f} ms"
                            if p.get("decode_offset_ms") is not None else ""))
    rs = p.get("rescored")
    if rs:
        served = "—" if rs["served_p50"] is None else f"{rs['served_p50']:.3f}"
        lines.append(f"re-scored with {rs['table']}: measured / worst-case decode P50 {rs['p50']:.3f} "
                     f"(served: {served}), P90 {rs['p90']:.3f}, max {rs['max']:.3f}; above 1 in "
                     f"{100 * rs['share_above_1']:.1f} % of {rs['iterations']} iterations")
    gg = p.get("guard_in_use_over_table")
    if gg:
        lines.append(f"contention guard in use / the table's, co-run decode ({gg['iterations']} iterations): "
                     f"P50 {gg['p50']:.3f}, P90 {gg['p90']:.3f}, max {gg['max']:.3f}; P50 in the first half "
                     f"{gg['p50_first_half']:.3f}, in the second {gg['p50_second_half']:.3f}")
    g = p.get("host_gap_ms")
    if g:
        lines.append(f"host time between decode iterations: P50 {g['p50']:.2f} ms, P90 {g['p90']:.2f} ms")
    hp = p.get("host_phases_ms")
    if hp:
        lines += ["", f"host time per decode iteration (laps less GPU time): P50 {hp['host_p50']:.2f} ms, "
                      f"P99 {hp['host_p99']:.2f} ms; by phase (tail: the {hp['tail_iterations']} of "
                      f"{hp['iterations']} iterations with the most host time)", "",
                  "| phase | P50 ms | P99 ms | tail mean ms |", "|---|---:|---:|---:|"]
        lines += [f"| {k} | {v['p50']:.2f} | {v['p99']:.2f} | {v['tail_mean']:.2f} |" for k, v in hp["phases"].items()]
        lines.append("")
        if hp.get("os"):
            def fmt(d):
                st = "steal unknown" if d["steal_share"] is None else \
                    f"VM steal in {100 * d['steal_share']:.1f} % of them (mean {d['steal_mean_ms']:.2f} ms, all vCPUs)"
                return f"off its CPU {d['off_cpu_mean_ms']:.2f} ms on average, {st}"
            lines += [f"the loop's thread, all iterations: {fmt(hp['os']['all'])}; the tail: {fmt(hp['os']['tail'])}", ""]
    ps = p.get("prefill_stream")
    if ps:
        share = "—" if ps["idle_share"] is None else f"{100 * ps['idle_share']:.1f} %"
        est, med = ps["measured_over_estimate_mean"], ps.get("measured_over_estimate_p50")
        lines.append(f"prefill stream: {ps['busy_s']:.1f} s of chunks, {ps['idle_s']:.2f} s idle between "
                     f"chunks of a batch ({share}); measured / estimated prefill, mean "
                     f"{'—' if est is None else f'{est:.3f}'}, median {'—' if med is None else f'{med:.3f}'}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = cli.ArgumentParser(prog="python -m bench.timeline_profile", description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="a bench.run output directory")
    ap.add_argument("--system", default="mux", help="the mux system's label in that run")
    ap.add_argument("--rate", type=cli.positive(float), required=True, help="the point's rate")
    ap.add_argument("--json", type=Path, help="also write the profile here")
    ap.add_argument("--table", help="also score the decode iterations against this table (a directory "
                                    "or a shipped table's name)")
    a = ap.parse_args(argv)
    if not a.run.is_dir():
        raise UsageError(f"no directory {a.run}: {_cli_io.RUN_DIR_HINT}")
    table = _cli_io.table_dir(a.table) if a.table else None
    t = point_timeline(a.run, a.system, a.rate)
    p = profile(t)
    if table:
        from sglang_mux.estimator import Estimator
        from sglang_mux.tables import TableError
        try:
            p["rescored"] = rescore(t, Estimator.from_table(table))
        except TableError as e:
            raise UsageError(f"--table: {e}") from None
    ps = prefill_stream(a.run, a.system, a.rate)
    if ps is not None:
        p["prefill_stream"] = ps
    p.update({"run": str(a.run), "system": a.system, "rate": a.rate})
    if a.json:
        a.json.write_text(json.dumps(p, indent=1) + "\n")
    print(render(p))
    return 0


if __name__ == "__main__":
    cli.run(main)
