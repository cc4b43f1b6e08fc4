"""Goodput over a grid of SLO pairs from one benchmark run: ``python -m bench.slo_map RUN``; or a map over runs.

    python -m bench.slo_map bench/results/conv8k_fa3_h100 [--tbt 30,50,100] [--ttft 2000,5000]
        [--ttft-per-token K] [--json OUT.json] [--plot OUT.png]

A point's P99 TBT, P99 TTFT, failures and TTFT drift do not depend on the SLO it is judged by,
so every system's goodput at each (TBT, TTFT) pair follows from the points already measured
(``metrics.check_point``). A multiplexed server plans for its own ``--mux-tbt-slo-ms``: its
cells are valid only where that is the TBT it is judged by; the others are marked (served for
another target) and left out of the ratios. Per pair: each system's goodput (highest passing
rate tested), the best chunked-prefill system and mux / best chunked.

The TTFT SLOs are length-aware when the run's was (``summary.json`` -> ``slo.ttft_ms_per_token``
K > 0: each TTFT is then the intercept S of ``P99 of TTFT - K x prompt tokens <= S``).
``--ttft-per-token K`` judges by another K; that needs the points' request records in the run
directory (``<system>__<rate>.jsonl`` or ``.jsonl.xz``), since a summary keeps only its own K.

    python -m bench.slo_map --cells RUN [RUN ...] [--predicted MAP.json] [--plot OUT.png] [--json OUT.json]

A map over runs: each run is one cell, its workload judged by the run's own SLOs (``A+B``: the
rounds A then B of one cell on one host, merged by `merged_runs`); mux / best chunked prefill per
cell (a bound where one side passed none of its rates), beside the simulator's prediction
(``bench.analysis.sim_hybrid_map``'s JSON), whose other cells the plot shows grey.
"""
from __future__ import annotations

import json
from pathlib import Path

from sglang_mux import cli

from . import metrics, systems
from sglang_mux import cli_io as _cli_io

CHUNKED = "sglang-chunked-"


def _served_tbt(sysd: dict) -> float | None:
    cmd = (sysd.get("start") or {}).get("command")
    if not cmd or systems.mux_settings(cmd) is None:
        return None  # not multiplexed: no TBT target of its own
    v = systems.flag_value(cmd, "--mux-tbt-slo-ms")
    return float(v) if v else 50.0  # the server's default


def run_per_token(summary: dict) -> float:
    """The K of a run's goodput check (0: flat, and runs older than K)."""
    return float((summary.get("slo") or {}).get("ttft_ms_per_token") or 0.0)


def _records(path: Path) -> list[dict]:
    try:
        return metrics.load_jsonl(path)
    except FileNotFoundError:
        raise cli.UsageError(f"no request records {path} (nor .xz): judging by another --ttft-per-token needs "
                             "them; pruned results are in git history (bench/results/README.md, 'Pruned raw files')"
                             ) from None


def rejudged(summary: dict, run_dir: Path, k: float) -> dict:
    """``summary`` with every point's summary made again from its records at K ms per prompt token."""
    slo = summary.get("slo") or {}
    tbt, ttft = slo.get("tbt_ms", metrics.DEFAULT_TBT_SLO_MS), slo.get("ttft_ms", metrics.DEFAULT_TTFT_SLO_MS)
    out = {**summary, "slo": {**slo, "ttft_ms_per_token": k}, "systems": {}}
    for name, sysd in summary["systems"].items():
        pts = [{**p, "summary": metrics.summarize(_records(run_dir / p["file"]), tbt, ttft, k)}
               for p in sysd.get("points") or []]
        out["systems"][name] = {**sysd, "points": pts}
    return out


def slo_map(summary: dict, tbts, ttfts) -> dict:
    """{"ttft_ms_per_token": K, "cells": [{"tbt_ms", "ttft_ms", "goodput": {system: rate | None},
    "invalid": [system], "best_chunked", "mux_over_best_chunked"}]} from a run's summary.json;
    the TTFT SLOs are length-aware with the run's K (``run_per_token``; ``rejudged`` for another)."""
    cells = []
    for tbt in tbts:
        for ttft in ttfts:
            good, invalid = {}, []
            for name, sysd in summary["systems"].items():
                served = _served_tbt(sysd)
                if served is not None and served != tbt:
                    invalid.append(name)
                    continue
                passing = [p["rate"] for p in sysd["points"] if metrics.check_point(p["summary"], tbt, ttft)[0]]
                good[name] = max(passing) if passing else None
            chunked = {n: g for n, g in good.items() if n.startswith(CHUNKED)}
            best = max(chunked, key=lambda n: chunked[n] or 0.0) if chunked else None
            mux, base = good.get("mux"), chunked.get(best) if best else None
            cells.append({"tbt_ms": tbt, "ttft_ms": ttft, "goodput": good, "invalid": invalid,
                          "best_chunked": best,
                          "mux_over_best_chunked": round(mux / base, 3) if mux and base else None})
    k = run_per_token(summary)
    return {"device": summary.get("device"), "attention_backend": summary.get("attention_backend"),
            "rule": "goodput = highest passing tested rate (< lowest tested where none passes)"
                    + (f"; TTFT SLO S judges P99 of (TTFT − {k:g} ms × prompt tokens)" if k else ""),
            "ttft_ms_per_token": k, "cells": cells}


def _ttft_label(m: dict, ttft_ms: float, sep: str = " ") -> str:
    k = m.get("ttft_ms_per_token") or 0
    return f"{ttft_ms / 1000:g} s" + (f"{sep}+ {k:g} ms/token" if k else "")


def render(m: dict) -> str:
    names = sorted({n for c in m["cells"] for n in (*c["goodput"], *c["invalid"])})
    head = [f"TBT {c['tbt_ms']:g} / TTFT {_ttft_label(m, c['ttft_ms'])}" for c in m["cells"]]
    lines = [f"Goodput (req/s) by SLO pair. Device: {m.get('device')}; attention backend: "
             f"{m.get('attention_backend')}. {m['rule']}.", "",
             "| system | " + " | ".join(head) + " |", "|---|" + "---:|" * len(head)]
    for n in names:
        row = []
        for c in m["cells"]:
            if n in c["invalid"]:
                row.append("(served for another TBT)")
            else:
                g = c["goodput"].get(n)
                row.append("< lowest" if g is None else f"{g:g}")
        lines.append(f"| {n} | " + " | ".join(row) + " |")
    lines.append("| **mux / best chunked** | " + " | ".join(
        "—" if c["mux_over_best_chunked"] is None else f"{c['mux_over_best_chunked']:g} ({c['best_chunked']})"
        for c in m["cells"]) + " |")
    return "\n".join(lines)


def plot(m: dict, path: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({n for c in m["cells"] for n in c["goodput"]})
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(m["cells"])), 4))
    w = 0.8 / max(1, len(names))
    for i, n in enumerate(names):
        ys = [c["goodput"].get(n) or 0.0 for c in m["cells"]]
        ax.bar([k + i * w for k in range(len(ys))], ys, w, label=n)
    ax.set_xticks([k + 0.4 - w / 2 for k in range(len(m["cells"]))])
    ax.set_xticklabels([f"{c['tbt_ms']:g} ms\n{_ttft_label(m, c['ttft_ms'], chr(10))}" for c in m["cells"]])
    ax.set_ylabel("goodput (req/s)")
    ax.set_xlabel("P99 TBT / P99 TTFT SLO")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def workload_label(summary: dict) -> str:
    """A run's workload as the SLO map names it: the conversation capped at 8000 tokens is the
    "capped conversation"; another generator or trace by its name."""
    w = summary.get("workload") or {}
    name = str(w.get("workload") or "?")
    if name == "conversation" and w.get("input_cap") and int(w["input_cap"]) <= 8000:
        return "capped conversation"
    return name


def _bound(good: float | None, rates: list[float]) -> tuple[float | None, str]:
    """(value, "=" or "<") of a goodput: the highest rate passed, else below the lowest tested."""
    if good is not None:
        return good, "="
    return (min(rates), "<") if rates else (None, "?")


def map_cell(summary: dict, mux: str | None = None) -> dict:
    """One cell of a map over runs, each run judged by its own SLOs (``summary.slo``): the
    workload, TBT, the multiplexed system (``mux``, else the run's one system started through
    sglang_mux) and the best chunked configuration, each goodput as (value, "=" or "<"), and
    mux / best chunked as a value or a bound ("<" where the mux passed none of its rates, ">" where
    chunked prefill passed none). Raises UsageError when the run has no such pair."""
    slo = summary.get("slo") or {}
    tbt, ttft = float(slo.get("tbt_ms", metrics.DEFAULT_TBT_SLO_MS)), float(slo.get("ttft_ms", metrics.DEFAULT_TTFT_SLO_MS))
    good, rates = {}, {}
    for name, sysd in summary["systems"].items():
        pts = sysd.get("points") or []
        rates[name] = [p["rate"] for p in pts]
        passing = [p["rate"] for p in pts if metrics.check_point(p["summary"], tbt, ttft)[0]]
        good[name] = max(passing) if passing else None
    muxes = [n for n, d in summary["systems"].items()
             if systems.mux_settings((d.get("start") or {}).get("command")) is not None]
    m = mux if mux is not None else (muxes[0] if len(muxes) == 1 else None)
    chunked = [n for n in good if n.startswith(CHUNKED)]
    if m is None or m not in good or not chunked:
        raise cli.UsageError(f"a map cell needs one multiplexed system (found {muxes}; name one with --mux) and a "
                             f"chunked-prefill one (found {chunked})")
    best = max(chunked, key=lambda n: (good[n] or 0.0, -min(rates[n] or [0.0])))
    (mv, mo), (cv, co) = _bound(good[m], rates[m]), _bound(good[best], rates[best])
    ratio, rel = None, "?"
    if mv is not None and cv is not None and (mo, co) != ("<", "<"):
        ratio, rel = round(mv / cv, 3), {("=", "="): "=", ("<", "="): "<", ("=", "<"): ">"}[(mo, co)]
    return {"workload": workload_label(summary), "tbt_ms": tbt, "ttft_ms": ttft, "device": summary.get("device"),
            "mux": m, "mux_goodput": [mv, mo], "best_chunked": best, "chunked_goodput": [cv, co],
            "ratio": ratio, "ratio_rel": rel}


def merged_runs(summaries: list[dict]) -> dict:
    """One cell from several runs of it on one host, in the order they ran (a second round that
    searched below the first's brackets): each system's points of every run, where two runs
    tested the same rate the later one's. Raises UsageError unless the runs share their workload,
    SLOs, device and CPU (that they shared a host is the caller's word: give runs of one lease)."""
    first = summaries[0]
    for s in summaries[1:]:
        for key in ("workload", "slo", "device"):
            if s.get(key) != first.get(key):
                raise cli.UsageError(f"runs joined into one cell differ in {key}: {first.get(key)} against "
                                     f"{s.get(key)}; join only rounds of one cell on one host")
        hw, hw0 = s.get("hardware") or {}, first.get("hardware") or {}
        if (hw.get("cpu_model"), hw.get("cpus")) != (hw0.get("cpu_model"), hw0.get("cpus")):
            raise cli.UsageError("runs joined into one cell ran on different hosts' CPUs; join only rounds of one lease")
    systems_: dict[str, dict] = {}
    for s in summaries:
        for name, sysd in s["systems"].items():
            cur = systems_.setdefault(name, {**sysd, "points": []})
            if cur.get("start") is None:
                cur["start"] = sysd.get("start")
            by_rate = {p["rate"]: p for p in cur["points"]}
            by_rate.update({p["rate"]: p for p in sysd.get("points") or []})
            cur["points"] = [by_rate[r] for r in sorted(by_rate)]
    return {**first, "systems": systems_}


def predicted_cell(sim_map: dict, workload: str, tbt: float) -> float | None:
    """The simulator's hybrid / best chunked for a cell (``bench.analysis.sim_hybrid_map``'s
    JSON), None where it has none."""
    for c in sim_map.get("cells", []):
        if c["workload"].split(" (")[0] == workload and float(c["tbt_slo_ms"]) == tbt:
            g = c["goodput"]
            ch = [g.get(k) for k in g if k.startswith("chunked")]
            best = max((x for x in ch if x), default=None)
            return round(g["hybrid"] / best, 3) if g.get("hybrid") and best else None
    return None


def render_cells(cells: list[dict], predicted: dict | None = None) -> str:
    def g(v):
        return "—" if v[0] is None else f"{'< ' if v[1] == '<' else ''}{v[0]:g}"

    lines = ["| TBT | workload | mux | best chunked | mux / best chunked | predicted |", "|---|---|---|---|---:|---:|"]
    for c in sorted(cells, key=lambda c: (-c["tbt_ms"], c["workload"])):
        r = "—" if c["ratio"] is None else f"{'' if c['ratio_rel'] == '=' else c['ratio_rel'] + ' '}{c['ratio']:.2f}"
        p = predicted_cell(predicted, c["workload"], c["tbt_ms"]) if predicted else None
        lines.append(f"| {c['tbt_ms']:g} | {c['workload']} | {c['mux']} {g(c['mux_goodput'])} | "
                     f"{c['best_chunked']} {g(c['chunked_goodput'])} | {r} | {'—' if p is None else f'{p:.2f}'} |")
    return "\n".join(lines)


def plot_cells(cells: list[dict], path: Path, predicted: dict | None = None, bound: float = 0.95) -> Path:
    """The map as a grid: a row per workload, a column per TBT; each measured cell green where
    mux / best chunked >= ``bound``, red where it is below (or only known to be below); the
    ``predicted`` map's cells that no run measured grey, with their prediction."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pred_cells = [(c["workload"].split(" (")[0], float(c["tbt_slo_ms"])) for c in (predicted or {}).get("cells", [])]
    loads = sorted({c["workload"] for c in cells} | {w for w, _ in pred_cells})
    tbts = sorted({c["tbt_ms"] for c in cells} | {t for _, t in pred_cells}, reverse=True)
    measured = {(c["workload"], c["tbt_ms"]) for c in cells}
    cells = cells + [{"workload": w, "tbt_ms": t, "ratio": None, "ratio_rel": "?", "unmeasured": True}
                     for w, t in pred_cells if (w, t) not in measured]
    fig, ax = plt.subplots(figsize=(2.6 * len(tbts) + 1.5, 0.9 * len(loads) + 1.0))
    for c in cells:
        x, y = tbts.index(c["tbt_ms"]), loads.index(c["workload"])
        r, rel = c["ratio"], c["ratio_rel"]
        ok = r is not None and (r >= bound if rel in ("=", ">") else False)
        colour = "#cfe8cf" if ok else "#f3c9c9" if r is not None and rel in ("=", "<") else "#e6e6e6"
        ax.add_patch(plt.Rectangle((x, y), 1, 1, color=colour, ec="white"))
        txt = "not measured" if c.get("unmeasured") else "?" if r is None else f"{'' if rel == '=' else rel + ' '}{r:.2f}"
        p = predicted_cell(predicted, c["workload"], c["tbt_ms"]) if predicted else None
        ax.text(x + 0.5, y + 0.5, txt + ("" if p is None else f"\n(predicted {p:.2f})"), ha="center", va="center", fontsize=9)
    ax.set_xlim(0, len(tbts))
    ax.set_ylim(0, len(loads))
    ax.set_xticks([i + 0.5 for i in range(len(tbts))])
    ax.set_xticklabels([f"P99 TBT {t:g} ms" for t in tbts])
    ax.set_yticks([i + 0.5 for i in range(len(loads))])
    ax.set_yticklabels(loads)
    ax.invert_yaxis()
    ax.set_title(f"mux / best chunked prefill (green: >= {bound:g})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = cli.ArgumentParser(prog="python -m bench.slo_map", description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, nargs="+", help="a bench.run output dir (its summary.json); with --cells, one "
                                                      "per cell, or a cell's rounds on one host joined by '+'")
    ap.add_argument("--tbt", default="30,50,100", type=_cli_io.numbers(example="30,50,100"), help="P99 TBT SLOs (ms), comma list")
    ap.add_argument("--ttft", default="2000,5000", type=_cli_io.numbers(example="2000,5000"),
                    help="P99 TTFT SLOs (ms), comma list (the intercepts S of a length-aware SLO)")
    ap.add_argument("--ttft-per-token", type=cli.positive(float, allow_zero=True), default=None, metavar="K",
                    help="judge by P99 of TTFT - K x prompt tokens <= S (default: the run's K, 0 for a flat SLO); "
                         "another K than the run's needs the points' records")
    ap.add_argument("--json", type=Path, default=None, help="also write the map here as JSON")
    ap.add_argument("--plot", type=Path, default=None, help="also draw the map into this PNG")
    ap.add_argument("--cells", action="store_true",
                    help="a map over runs instead: each run one cell (its workload at its own SLOs), mux / best "
                         "chunked prefill; --plot draws the grid, --json writes the cells")
    ap.add_argument("--mux", default=None, help="with --cells: the multiplexed system of each run (default: its only one)")
    ap.add_argument("--predicted", type=Path, default=None,
                    help="with --cells: a bench.analysis.sim_hybrid_map JSON whose hybrid / best chunked each cell shows")
    a = ap.parse_args(argv)
    if a.cells:
        cells = [map_cell(merged_runs([_cli_io.run_summary(p)[1] for p in str(r).split("+")]), a.mux)
                 for r in a.run]
        pred = _cli_io.read_json(a.predicted, "sim_hybrid_map JSON") if a.predicted else None
        print(render_cells(cells, pred))
        if a.json:
            a.json.write_text(json.dumps(cells, indent=1) + "\n")
        if a.plot:
            plot_cells(cells, a.plot, pred)
        return 0
    if len(a.run) != 1:
        ap.error("one run (several only with --cells)")
    run_dir, summ = _cli_io.run_summary(a.run[0])
    if a.ttft_per_token is not None and a.ttft_per_token != run_per_token(summ):
        summ = rejudged(summ, run_dir, a.ttft_per_token)
    m = slo_map(summ, a.tbt, a.ttft)
    print(render(m))
    if a.json:
        a.json.write_text(json.dumps(m, indent=1) + "\n")
    if a.plot:
        plot(m, a.plot)
    return 0


if __name__ == "__main__":
    cli.run(main)
