"""Replay one mux server's decode iterations (its --mux-timeline, points in served order)
through the estimator's online refinement, with and without the learned fixed decode cost
(sglang_mux.estimator: decode_offset_ms), and compare the co-run slowdowns served with the
table's nearest profiled point and its guard (a cell's max).

    python bench/results/h200_close16_s26/replay.py TABLE RUN_DIR RATES   (from the repo root)

The replay recomputes each iteration's worst case from the table and what the estimator had
learned from the iterations before it; the decisions stay the served ones. On the H100 run
served with the fixed cost (h100_offset_s26) it reproduces the served medians to 0.001.
"""
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, ".")
import sglang_mux.estimator as E  # noqa: E402
from bench.timeline_profile import point_timeline  # noqa: E402

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


if __name__ == "__main__":
    tab, run, rates = Path(sys.argv[1]), Path(sys.argv[2]), [float(v) for v in sys.argv[3].split(",")]
    for alpha in (E.DECODE_OFFSET_ALPHA, 0.0):
        replay(tab, run, rates, alpha)
    corun_slowdowns(tab, run, rates)
