"""Goodput over a grid of SLO pairs from one benchmark run: ``python -m bench.slo_map RUN``.

    python -m bench.slo_map bench/results/conv8k_fa3_h100 [--tbt 30,50,100] [--ttft 2000,5000]
        [--json OUT.json] [--plot OUT.png]

A point's P99 TBT, P99 TTFT, failures and TTFT drift do not depend on the SLO it is judged by,
so every system's goodput at each (TBT, TTFT) pair follows from the points already measured
(``metrics.check_point``). A multiplexed server plans for its own ``--mux-tbt-slo-ms``: its
cells are valid only where that is the TBT it is judged by; the others are marked (served for
another target) and left out of the ratios. Per pair: each system's goodput (highest passing
rate tested), the best chunked-prefill system and mux / best chunked.
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


def slo_map(summary: dict, tbts, ttfts) -> dict:
    """{"cells": [{"tbt_ms", "ttft_ms", "goodput": {system: rate | None}, "invalid": [system],
    "best_chunked", "mux_over_best_chunked"}]} from a run's summary.json."""
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
    return {"device": summary.get("device"), "attention_backend": summary.get("attention_backend"),
            "rule": "goodput = highest passing tested rate (< lowest tested where none passes)", "cells": cells}


def render(m: dict) -> str:
    names = sorted({n for c in m["cells"] for n in (*c["goodput"], *c["invalid"])})
    head = [f"TBT {c['tbt_ms']:g} / TTFT {c['ttft_ms'] / 1000:g} s" for c in m["cells"]]
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
    ax.set_xticklabels([f"{c['tbt_ms']:g} ms\n{c['ttft_ms'] / 1000:g} s" for c in m["cells"]])
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
    ap.add_argument("--ttft", default="2000,5000", type=_cli_io.numbers(example="2000,5000"), help="P99 TTFT SLOs (ms), comma list")
    ap.add_argument("--json", type=Path, default=None, help="also write the map here as JSON")
    ap.add_argument("--plot", type=Path, default=None, help="also draw the map into this PNG")
    a = ap.parse_args(argv)
    _, summ = _cli_io.run_summary(a.run)
    m = slo_map(summ, a.tbt, a.ttft)
    print(render(m))
    if a.json:
        a.json.write_text(json.dumps(m, indent=1) + "\n")
    if a.plot:
        plot(m, a.plot)
    return 0


if __name__ == "__main__":
    cli.run(main)
