"""Served fused iterations by the prefill-graph size they ran at, beside the table's GEMM curve.

    python -m bench.analysis.fused_sizes RUN_DIR --system mux-hybrid --rates 3.45,3.67,3.9 \\
        [--table llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3] [--min-decode 10] [--over 29]

Per captured size (a fused row's ``extend_tokens`` padded as SGLang's prefill graph pads it):
iterations, their median measured GPU time, measured / base price (median and P10-P90), how many
ran over ``--over`` ms, and the table's GEMM curve there with its excess over the cheapest larger
captured size (``fused_price.graph_cliffs``). The base price is read back from the row: its planned
price (``t_decode_worst_ms``) through the inverse of the served mapping recorded with it
(``fused_price``, `FusedPrice.base_of`: updated every 32 iterations, so approximate across a refit). ``--min-decode``
leaves out iterations with fewer decode rows (the drain). CPU, seconds.
"""
from __future__ import annotations

from pathlib import Path

from sglang_mux import cli
from sglang_mux import cli_io as _cli_io
from sglang_mux.fused_price import (HYBRID_GRAPH_MAX_TOKENS, FusedPrice, captured_size, graph_cliffs,
                                     sglang_graph_tokens)

TABLE = "llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3"


def by_size(t, min_decode: int = 10, over_ms: float = 29.0, gemm=None):
    """A frame per captured size of timeline frame ``t``'s fused rows (module docstring);
    ``gemm``: a callable ms(tokens) on the whole GPU, or None (no curve columns)."""
    import pandas as pd

    graph = sglang_graph_tokens(HYBRID_GRAPH_MAX_TOKENS)
    f = t[(t.extend_tokens.fillna(0) > 0) & t.measured_decode_ms.notna() & (t.decode_bs >= min_decode)].copy()
    if f.empty:
        raise ValueError(f"no fused iteration with {min_decode}+ decode rows")
    f["size"] = [captured_size(int(n), graph) or int(n) for n in f.extend_tokens]  # eager: its own count
    f["base"] = [FusedPrice.base_of(p, m) for p, m in zip(f.t_decode_worst_ms, f.fused_price)]
    f["ratio"] = f.measured_decode_ms / f.base
    g = f.groupby("size")
    out = pd.DataFrame({
        "n": g.size(), "measured_ms": g.measured_decode_ms.median(), "measured_over_base": g.ratio.median(),
        "p10": g.ratio.quantile(0.1), "p90": g.ratio.quantile(0.9),
        f"over_{over_ms:g}ms": g.measured_decode_ms.apply(lambda x: int((x > over_ms).sum()))})
    if gemm is not None:
        cliffs = graph_cliffs(graph, gemm)
        out["gemm_ms"] = [gemm(s) for s in out.index]
        out["gemm_excess_ms"] = [cliffs.get(s, 0.0) for s in out.index]
    return out


def main(argv=None) -> int:
    ap = cli.ArgumentParser(prog="python -m bench.analysis.fused_sizes", description=__doc__.split("\n\n")[0])
    ap.add_argument("run", help="a bench.run output directory with a mux system's --mux-timeline")
    ap.add_argument("--system", default="mux-hybrid", help="the mux system's label (default mux-hybrid)")
    ap.add_argument("--rates", required=True, help="comma list of its points' rates")
    ap.add_argument("--table", default=TABLE, help=f"the latency table whose GEMM curve to show (default {TABLE})")
    ap.add_argument("--min-decode", type=cli.positive(int), default=10, help="fewest decode rows (default 10)")
    ap.add_argument("--over", type=cli.positive(float), default=29.0, help="count iterations over this (ms)")
    a = ap.parse_args(argv)
    import pandas as pd

    from bench.timeline_profile import point_timeline
    from sglang_mux.estimator.table_fit import table_gemm_curve
    from sglang_mux.tables import read_table

    rates = _cli_io.number_list(a.rates, "--rates", example="3.45,3.9")
    t = pd.concat([point_timeline(Path(a.run), a.system, r) for r in rates], ignore_index=True)
    curve = table_gemm_curve(read_table(_cli_io.table_dir(a.table)))
    sms = max(curve.sms) if curve is not None else None
    try:
        out = by_size(t, a.min_decode, a.over, (lambda m: curve.at(sms, m)) if curve is not None else None)
    except ValueError as e:
        ap.error(f"{a.run}: {e}")
    with pd.option_context("display.width", 200):
        print(out.round(3).to_string())
    return 0


if __name__ == "__main__":
    cli.run(main)
