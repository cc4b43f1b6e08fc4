"""Replay one mux server's decode iterations through the estimator's online refinement.

    python -m bench.analysis.replay_estimator TABLE RUN_DIR RATES      (from the repository root)

Inputs: TABLE, a contention table directory (its ``contention.csv`` and fit); RUN_DIR, a
``bench.run`` output directory holding the mux's ``mux.timeline.jsonl[.xz]`` and its
``mux__<rate>.meta.json`` files (a server started with ``--mux-timeline``); RATES, the mux points
to replay, comma-separated req/s, in served order.

Output (stdout, text): for each rate, with the learned fixed decode cost on and then off
(``sglang_mux.estimator``'s decode offset), the medians of decode measured / worst case, split
into decode alone and beside a prefill; then, per decode partition, the co-run slowdown over the
solo fit as served, at the table's nearest profiled point, and as the guard gives it.

Each iteration's worst case is recomputed from the table and what the estimator had learned from
the iterations before it; the decisions stay the served ones. Bad arguments end with one
``error:`` line (exit 2); a point without a timeline, with bench.timeline_profile's message. CPU,
seconds per point.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

import sglang_mux.estimator as E
from bench.timeline_profile import point_timeline
from sglang_mux import cli, cli_io

AXES = ("prefill_new", "prefill_reused", "decode_bs", "decode_reused_per_req")


def replay(tab, run, rates, alpha):
    E.DECODE_OFFSET_ALPHA = alpha
    est = E.Estimator.from_table(tab)
    for rate in rates:
        t = point_timeline(run, "mux", rate)
        m = t[t.measured_decode_ms.notna() & (t.decode_bs > 0)]
        rs, alone, beside = [], [], []
        for r in m.itertuples():
            q = (int(r.decode_sms), int(r.decode_bs), int(r.decode_sum_reused), int(r.prefill_new), int(r.prefill_reused))
            x = r.measured_decode_ms / est.decode_worst_ms(*q, max_reused=int(r.decode_max_reused))
            rs.append(x)
            (alone if q[0] == est.total_sms or q[3] <= 0 else beside).append(x)
            est.observe_decode(*q, r.measured_decode_ms, max_reused=int(r.decode_max_reused))
        s = pd.Series(rs)
        print(f"fixed cost {'on ' if alpha else 'off'} {rate:g} req/s: measured / worst case P50 {s.median():.3f}, "
              f"P90 {s.quantile(0.9):.3f}, above 1 in {100 * (s > 1).mean():.1f} % | P50 decode alone "
              f"{np.median(alone):.3f}, beside a prefill {np.median(beside):.3f} | learned {est.decode_offset_ms:.3f} ms")


def corun_slowdowns(tab, run, rates):
    est = E.Estimator.from_table(tab)
    df = pd.read_csv(Path(tab) / "contention.csv")
    df["sd"] = df.decode_corun_ms / df.decode_solo_ms
    ax = {a: np.array(sorted(df[a].unique()), dtype=float) for a in AXES}
    measured = df.set_index(["decode_sms", *AXES])["sd"].to_dict()

    def near(a, v):  # nearest grid value (linear: 1K reused tokens are nearer 0 than 32K)
        return ax[a][np.argmin(np.abs(ax[a] - v))]

    for rate in rates:
        t = point_timeline(run, "mux", rate)
        m = t[t.measured_decode_ms.notna() & (t.decode_bs > 0) & (t.decode_sms < est.total_sms) & (t.prefill_new > 0)]
        rows = []
        for r in m.itertuples():
            off = getattr(r, "decode_offset_ms", 0.0)
            off = 0.0 if off is None or pd.isna(off) else off
            d, bs, sr, pn, pr = int(r.decode_sms), int(r.decode_bs), int(r.decode_sum_reused), int(r.prefill_new), int(r.prefill_reused)
            solo = est.decode_solo_ms(d, bs, sr, int(r.decode_max_reused))
            key = (d, near("prefill_new", pn), near("prefill_reused", pr), near("decode_bs", bs),
                   near("decode_reused_per_req", sr / bs))
            rows.append({"decode_sms": d, "served": (r.measured_decode_ms - off) / solo,
                         "nearest_profiled": measured.get(key, np.nan),
                         "guard": est.guard_slowdown(d, bs, sr, pn, pr, profiled=True)})
        x = pd.DataFrame(rows)
        print(f"\nco-run decode slowdown over the solo fit at {rate:g} req/s, medians ({len(x)} iterations; "
              f"served: measured less the fixed cost the server had learned, where its timeline records one):")
        print(x.groupby("decode_sms").median().round(3).to_string())


def main(argv=None) -> int:
    ap = cli.ArgumentParser(prog="python -m bench.analysis.replay_estimator",
                            description=__doc__.split("\n\n")[0])
    ap.add_argument("table", type=Path, help="contention table directory")
    ap.add_argument("run", type=Path, help="bench.run output directory with the mux's timeline")
    ap.add_argument("rates", type=cli_io.numbers(example="4.5,5"), help="mux points to replay, comma-separated req/s")
    a = ap.parse_args(argv)
    if not (a.table / "contention.csv").is_file():
        raise cli.UsageError(f"{a.table}: not a contention table directory (no contention.csv)")
    for alpha in (E.DECODE_OFFSET_ALPHA, 0.0):
        replay(a.table, a.run, a.rates, alpha)
    corun_slowdowns(a.table, a.run, a.rates)
    return 0


if __name__ == "__main__":
    cli.run(main)
