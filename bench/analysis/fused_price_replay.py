"""The fused price a server would plan with, replayed over a served hybrid timeline (CPU).

    python -m bench.analysis.fused_price_replay TIMELINE [TIMELINE ...]      (repository root)

Input: served ``--mux-timeline`` files (``.jsonl`` or ``.xz``) of the hybrid policy. Each fused
row holds the price it was planned at (``t_decode_worst_ms``), the FusedPrice state that set it
(``fused_price``) and its measured GPU time (``measured_decode_ms``); the base price (the solo
fit and the row term) is recovered from the two. A fresh ``sglang_mux.fused_price.FusedPrice``
(``prior_holds``, as a server with SGLang's prefill graph starts) then prices each row before
observing it, as the server's does.

Output (stdout): per timeline and base-price bin, the fused iterations and the median and P99 of
measured less the price: the replayed line (no sizes), the replayed price with its per-size term
(``FusedPrice.bias``; the size is the row's ``extend_tokens`` padded as the hybrid's prefill graph
pads it) and the one served. On an H200 serving code at 20 req/s, TBT 50, the served 2,048-token
chunks (base 45-50 ms) ran 3.4 ms over their price at the median and 5.5 ms at P99; the line now in
the code gives -1.0 and 0.8 there, the other bins as they were (bench/results/h200x2_s39_2026-11-27/).
Over eight served timelines the per-size term lowers that P99 or leaves it in every bin
(bench/results/sim_hybrid_s48_2026-11-28/served_replay.md). The chunks a replayed price would choose differ from those
served; this tells how well each price tracks the chunks that were served. CPU, seconds.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from sglang_mux import cli
from sglang_mux.fused_price import FusedPrice, hybrid_batch_size as padded
from sglang_mux.mux_metrics import fused_rows, load_timeline

BINS = (0, 20, 30, 40, 45, 50, 70, 1e9)  # base price (ms)


def served(timeline) -> pd.DataFrame:
    """The fused rows of a loaded timeline: ``base_ms``, ``planned_ms``, ``measured_ms``."""
    f = fused_rows(timeline)
    return pd.DataFrame({"base_ms": f.base_ms.to_numpy(float), "planned_ms": f.t_decode_worst_ms.to_numpy(float),
                         "measured_ms": f.measured_decode_ms.to_numpy(float),
                         "size": [padded(t) for t in f.get("extend_tokens", pd.Series([None] * len(f)))]})


def replay(rows: pd.DataFrame, price: FusedPrice | None = None, per_size: bool = False) -> np.ndarray:
    """Each row's price from ``price`` (default: a fresh one whose prior holds) before it observes
    the row (``per_size``: at the row's ``size``); rows with no base price are priced NaN and not
    observed."""
    price = price if price is not None else FusedPrice(prior_holds=True)
    sizes = rows["size"] if per_size and "size" in rows else [None] * len(rows)
    out = np.full(len(rows), np.nan)
    for i, (b, m, z) in enumerate(zip(rows.base_ms, rows.measured_ms, sizes)):
        if b > 0:
            z = None if z is None or z != z else int(z)
            out[i] = price.price(b, z)
            price.observe(b, m, z)
    return out


def table(rows: pd.DataFrame) -> pd.DataFrame:
    rows = rows.assign(replayed=rows.measured_ms - replay(rows),
                       per_size=rows.measured_ms - replay(rows, per_size=True),
                       served=rows.measured_ms - rows.planned_ms)
    rows = rows.dropna(subset=["replayed", "per_size", "served"])
    g = rows.groupby(pd.cut(rows.base_ms, BINS), observed=True)
    return pd.DataFrame({"n": g.size(),
                         "replayed P50": g.replayed.median(), "replayed P99": g.replayed.quantile(0.99),
                         "per size P50": g.per_size.median(), "per size P99": g.per_size.quantile(0.99),
                         "served P50": g.served.median(), "served P99": g.served.quantile(0.99)}).round(2)


def main(argv=None) -> int:
    ap = cli.ArgumentParser(prog="python -m bench.analysis.fused_price_replay", description=__doc__.split("\n\n")[0])
    ap.add_argument("timelines", nargs="+", help="served hybrid --mux-timeline files (.jsonl or .xz)")
    a = ap.parse_args(argv)
    for path in a.timelines:
        try:
            rows = served(load_timeline(path))
        except (OSError, ValueError, KeyError, AttributeError) as e:
            ap.error(f"{path}: {e}")
        t = table(rows)
        print(f"## {path}\n\nmeasured less the price (ms), by base price (ms)\n")
        print("| base price | " + " | ".join(t.columns) + " |\n|---|" + "---:|" * len(t.columns))
        for interval, r in t.iterrows():
            print(f"| {interval} | " + " | ".join(f"{v:g}" for v in r) + " |")
        print()
    return 0


if __name__ == "__main__":
    cli.run(main)
