"""How long the host took to launch each fused batch, and whether that made its token gap.

    python -m bench.analysis.launch_laps TIMELINE [--span S] [--tbt 30]      (repository root)

The loop launches fused batch i+1 before it processes batch i's result, so the ``fused_launch``
lap of row i is batch i+1's launch (SGLang's ``run_batch``: its prefill CUDA graph, each layer's
attention run eagerly between segments). A fused iteration's launch is therefore read from the
row before it, beside its own measured gap (``measured_decode_ms``: from the last batch's end to
its own, idle GPU included). ``--span``: only the first S seconds of the timeline (e.g. before a
profiler started). Output: the launch's P50/P90/P99/max, the gaps' P50/P99, how many gaps exceeded
``--tbt``, and how many launch laps the VM reported steal in (``os_ms.steal``). CPU, seconds.
"""
from __future__ import annotations

import numpy as np

from sglang_mux import cli
from sglang_mux.mux_metrics import load_timeline


def fused_launches(t, span_s: float | None = None):
    """One row per fused iteration of timeline ``t`` whose row before it has laps: ``launch_ms``
    (that row's ``fused_launch`` lap), ``gap_ms`` (its measured gap), ``tokens`` (its prompt
    tokens) and ``steal`` (the VM reported steal during the launch). ``span_s``: rows within
    that many seconds of the first only."""
    import pandas as pd

    need = {"host_ms", "measured_decode_ms", "extend_tokens", "time"}
    if not need <= set(t.columns):
        raise ValueError(f"the timeline lacks {sorted(need - set(t.columns))} (a hybrid server's --mux-timeline has them)")
    prev = t.shift(1)
    keep = (t.extend_tokens.fillna(0) > 0) & t.measured_decode_ms.notna() & prev.host_ms.notna()
    if span_s is not None:
        keep &= t.time - t.time.iloc[0] < span_s
    rows, before = t[keep], prev[keep]
    steal = [bool((o or {}).get("steal")) if isinstance(o, dict) else False
             for o in before.get("os_ms", pd.Series([None] * len(before), index=before.index))]
    return pd.DataFrame({"launch_ms": [float(h.get("fused_launch", 0.0)) for h in before.host_ms],
                         "gap_ms": rows.measured_decode_ms.astype(float).values,
                         "tokens": rows.extend_tokens.astype(int).values, "steal": steal})


def summary(f, tbt_ms: float) -> dict:
    """The launches' P50/P90/P99/max, the gaps' P50/P99 (ms), gaps over ``tbt_ms``, launches
    with steal; ``f`` as `fused_launches` gives it, not empty."""
    lq = np.percentile(f.launch_ms, [50, 90, 99, 100])
    gq = np.percentile(f.gap_ms, [50, 99])
    return {"fused": len(f), "launch_ms": [round(float(x), 1) for x in lq],
            "gap_ms": [round(float(x), 1) for x in gq], "over": int((f.gap_ms > tbt_ms).sum()),
            "steal": int(f.steal.sum())}


def main(argv=None) -> int:
    ap = cli.ArgumentParser(prog="python -m bench.analysis.launch_laps", description=__doc__.split("\n\n")[0])
    ap.add_argument("timeline", help="a served --mux-timeline (.jsonl or .xz)")
    ap.add_argument("--span", type=cli.positive(float), default=None, help="only the first S seconds")
    ap.add_argument("--tbt", type=cli.positive(float), default=30.0, help="the TBT SLO (ms, default 30)")
    a = ap.parse_args(argv)
    try:
        f = fused_launches(load_timeline(a.timeline), a.span)
    except (OSError, ValueError, AttributeError) as e:
        ap.error(f"{a.timeline}: not a mux timeline with fused iterations ({e})")
    if f.empty:
        ap.error(f"{a.timeline}: no fused iteration with a launch lap before it")
    s = summary(f, a.tbt)
    print(f"{s['fused']} fused iterations; launch P50/P90/P99/max {'/'.join(map(str, s['launch_ms']))} ms; "
          f"gap P50/P99 {'/'.join(map(str, s['gap_ms']))} ms; gaps over {a.tbt:g} ms: {s['over']}; "
          f"launch laps with VM steal: {s['steal']} ({s['steal'] / s['fused']:.1%})")
    return 0


if __name__ == "__main__":
    cli.run(main)
