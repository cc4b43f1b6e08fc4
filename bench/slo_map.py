"""Goodput over a grid of SLO pairs from one benchmark run: ``python -m bench.slo_map RUN``.

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
"""
from __future__ import annotations

import json
import lzma
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
    xz = path.with_name(path.name + ".xz")
    if path.exists():
        return metrics.load_jsonl(path)
    if xz.exists():
        with lzma.open(xz, "rt") as f:
            return [json.loads(line) for line in f if line.strip()]
    raise cli.UsageError(f"no request records {path} (nor .xz): judging by another --ttft-per-token needs them; "
                         "pruned results are in git history (bench/results/README.md, 'Pruned raw files')")


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


def main(argv: list[str] | None = None) -> int:
    ap = cli.ArgumentParser(prog="python -m bench.slo_map", description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="a bench.run output dir (its summary.json)")
    ap.add_argument("--tbt", default="30,50,100", type=_cli_io.numbers(example="30,50,100"), help="P99 TBT SLOs (ms), comma list")
    ap.add_argument("--ttft", default="2000,5000", type=_cli_io.numbers(example="2000,5000"),
                    help="P99 TTFT SLOs (ms), comma list (the intercepts S of a length-aware SLO)")
    ap.add_argument("--ttft-per-token", type=cli.positive(float, allow_zero=True), default=None, metavar="K",
                    help="judge by P99 of TTFT - K x prompt tokens <= S (default: the run's K, 0 for a flat SLO); "
                         "another K than the run's needs the points' records")
    ap.add_argument("--json", type=Path, default=None, help="also write the map here as JSON")
    ap.add_argument("--plot", type=Path, default=None, help="also draw the map into this PNG")
    a = ap.parse_args(argv)
    run_dir, summ = _cli_io.run_summary(a.run)
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
