"""Which of a mux server's iterations made its token gaps over the TBT SLO, and where their time went.

    python -m bench.analysis.tbt_tail TIMELINE --tbt 30 [--from S] [--to S]   (repository root)

Input: a served ``--mux-timeline`` (``.jsonl`` or ``.xz``), optionally only rows whose ``time``
(the server's monotonic clock) is in [--from, --to]: one server's timeline can hold several
rates. A row's laps (``host_ms``) run from the last decode or fused result to its own, so their
sum is the gap its decoding requests saw (a fused row's laps include the next iteration's launch:
its result is processed after that). Rows after an iteration without a decode are left out (the
loop resets its clock there: no token gap).

Output (stdout): per iteration kind (``fused``, ``best-fit``, ``best-fit+new`` when it started a
layer-wise batch, ``decode-only``, ...) the tokens (decode rows), the share of them whose gap
exceeded the SLO and the mean laps of those; the token-weighted P50/P90/P99 gap; and for fused
rows the gap less the planned price (``t_decode_worst_ms``) at P50/P90/P99: what the hybrid's
fused TBT budget (mux_args.FUSED_HOST_QUANTILE) takes off the SLO. On an H100 at TBT 30 these
tiled gaps read P99 30.8 ms where the client saw 34.0 (capped conversation, 3.7 req/s) and 30.3
against 31.0 (code, 17 req/s). CPU, seconds.
"""
from __future__ import annotations

import numpy as np

from sglang_mux import cli
from sglang_mux.mux_metrics import load_timeline
from sglang_mux.policy.plan import FUSED_REASONS


def gaps(t, lo: float | None = None, hi: float | None = None):
    """One row per decoding iteration of timeline ``t``: ``kind``, ``tokens`` (decode rows),
    ``gap_ms`` (the sum of its laps), ``planned_ms``, its ``host_ms`` laps, ``started`` (its plan
    formed a layer-wise batch), ``gpu_ms`` (its measured GPU time; NaN where not recorded) and
    ``starts_streak`` (a fused iteration after any other kind: the timeline's ``fused_streak``
    where recorded, else the row before it)."""
    import pandas as pd

    fused = t.reason.isin(FUSED_REASONS)  # a yield's and a park's iterations are fused ones too
    after_other = ~fused.shift(1, fill_value=False)
    if "fused_streak" in t:  # as the server saw it: no fused batch in flight
        after_other = after_other.where(t.fused_streak.isna(), t.fused_streak.eq(False))
    t = t.assign(starts_streak=fused & after_other)

    if lo is not None:
        t = t[t.time >= lo]
    if hi is not None:
        t = t[t.time <= hi]
    if "host_ms" not in t or "decode_bs" not in t:
        raise ValueError("the timeline has no host_ms laps (a server started with --mux-timeline records them)")
    t = t[t.host_ms.notna() & (t.decode_bs > 0)]
    kind = t.reason.astype(str).where(~((t.reason == "best-fit") & (t.new_prefill > 0)), "best-fit+new")
    kind = kind.where(~t.reason.isin(FUSED_REASONS), "fused")
    gpu = t.measured_decode_ms if "measured_decode_ms" in t else pd.Series(np.nan, index=t.index)
    return pd.DataFrame({"kind": kind.values, "tokens": t.decode_bs.values.astype(int),
                         "gap_ms": [float(sum(h.values())) for h in t.host_ms],
                         "planned_ms": t.t_decode_worst_ms.values.astype(float), "host_ms": list(t.host_ms),
                         "started": (t.new_prefill > 0).values, "gpu_ms": gpu.values.astype(float),
                         "starts_streak": t.starts_streak.values.astype(bool)})


def fused_overruns(g, starts: bool | None = None) -> np.ndarray:
    """What each fused iteration's gap exceeded its planned price by (ms), of ``gaps``' rows:
    what the hybrid's fused TBT budgets book. ``starts``: True, a streak's first iterations only;
    False, the others; None, all."""
    f = g[(g.kind == "fused") & (g.planned_ms > 0)]
    if starts is not None:
        f = f[f.starts_streak == starts]
    return (f.gap_ms - f.planned_ms).to_numpy()


def fused_hosts(timeline) -> np.ndarray:
    """Each fused iteration's gap less its measured GPU time (ms), of a served timeline (a path):
    its host share alone. The draws to play fused iterations with beside ``sim.fused_jitter``, which
    already carries the measured time's departure from the price: `fused_overruns` (gap less the
    planned price, its margin included) added to that counts the departure twice; on the 70B at TP 2
    it ran every fused iteration ~4 ms (the margin) short (bench/results/h200x4_s52_2026-11-28/)."""
    g = gaps(load_timeline(timeline))
    f = g[(g.kind == "fused") & g.gpu_ms.notna()]
    return (f.gap_ms - f.gpu_ms).to_numpy()


def weighted_quantiles(values, weights, qs) -> list[float]:
    """The ``qs`` quantiles of ``values`` with each counted ``weights`` times (a token each)."""
    v, w = np.asarray(values, float), np.asarray(weights, float)
    order = np.argsort(v)
    cum = np.cumsum(w[order]) / w.sum()
    return [float(v[order][min(np.searchsorted(cum, q), len(v) - 1)]) for q in qs]


def tail_by_kind(g, tbt_ms: float):
    """Per kind: tokens, tokens over ``tbt_ms``, their share, and the mean laps (ms) of the
    iterations over it (each weighted by its tokens), largest first."""
    out = []
    for kind, k in g.groupby("kind"):
        over = k[k.gap_ms > tbt_ms]
        laps: dict[str, float] = {}
        for h, n in zip(over.host_ms, over.tokens):
            for name, ms in h.items():
                laps[name] = laps.get(name, 0.0) + ms * n
        n_over = int(over.tokens.sum())
        top = sorted(laps.items(), key=lambda kv: -kv[1])[:5]
        out.append({"kind": kind, "tokens": int(k.tokens.sum()), "over": n_over,
                    "share": n_over / max(1, int(k.tokens.sum())),
                    "laps": {name: round(ms / max(1, n_over), 1) for name, ms in top}})
    return sorted(out, key=lambda r: -r["over"])


def main(argv=None) -> int:
    ap = cli.ArgumentParser(prog="python -m bench.analysis.tbt_tail", description=__doc__.split("\n\n")[0])
    ap.add_argument("timeline", help="a served --mux-timeline (.jsonl or .xz)")
    ap.add_argument("--tbt", type=cli.positive(float), required=True, help="the TBT SLO (ms)")
    ap.add_argument("--from", dest="lo", type=cli.positive(float, allow_zero=True), default=None,
                    help="only rows from this server time (s)")
    ap.add_argument("--to", dest="hi", type=cli.positive(float, allow_zero=True), default=None,
                    help="only rows up to this server time (s)")
    a = ap.parse_args(argv)
    try:
        g = gaps(load_timeline(a.timeline), a.lo, a.hi)
    except (OSError, ValueError, KeyError, AttributeError) as e:
        ap.error(f"{a.timeline}: not a mux timeline with decode iterations ({e})")
    if g.empty:
        ap.error(f"{a.timeline}: no decoding iteration in that span")
    p50, p90, p99 = weighted_quantiles(g.gap_ms, g.tokens, (0.5, 0.9, 0.99))
    over = int(g.tokens[g.gap_ms > a.tbt].sum())
    print(f"token gaps P50/P90/P99 {p50:.1f}/{p90:.1f}/{p99:.1f} ms; over {a.tbt:g} ms: {over} of "
          f"{int(g.tokens.sum())} tokens ({over / g.tokens.sum():.2%})")
    print("| iteration | tokens | over the SLO | share | mean laps of those (ms) |\n|---|---:|---:|---:|---|")
    for r in tail_by_kind(g, a.tbt):
        laps = ", ".join(f"{k} {v}" for k, v in r["laps"].items()) or "–"
        print(f"| {r['kind']} | {r['tokens']} | {r['over']} | {r['share']:.1%} | {laps} |")
    for what, starts in (("", None), (" within a streak", False), (", a streak's first", True)):
        o = fused_overruns(g, starts)
        if len(o):
            q = np.percentile(o, [50, 90, 99])
            print(f"fused gap less its price{what} (ms): P50 {q[0]:.1f}, P90 {q[1]:.1f}, P99 {q[2]:.1f} "
                  f"({len(o)} iterations)")
    return 0


if __name__ == "__main__":
    cli.run(main)
