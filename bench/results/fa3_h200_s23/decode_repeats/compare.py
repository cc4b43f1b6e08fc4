"""The H200 FA3 table's decode rows against two repeat grids of the same host, and the held-out
error of the 112-SM partition fitted pooled (as shipped) and alone. Run from the repo root:
    python bench/results/fa3_h200_s23/decode_repeats/compare.py
compare.txt is its output at commit 99f3c1f, when the table's γ was pooled; from 7cd23d5 on the
table is refitted with γ per partition (what the candidate below became), so a rerun differs."""
import numpy as np
import pandas as pd

import sglang_mux.estimator as E
import sglang_mux.latency_model as L
from sglang_mux.tables import read_table

T = "contention_tables/llama-3.1-8b__nvidia-h200__fa3"
HERE = "bench/results/fa3_h200_s23/decode_repeats"
key = ["decode_sms", "bs", "sum_reused"]
t = read_table(T)
m = t.solo_decode
for run in ("run2", "run3"):
    r = pd.read_csv(f"{HERE}/solo_decode_{run}.csv")
    j = m.merge(r, on=key, suffixes=("", "_r"))
    q = j.latency_ms_r / j.latency_ms
    print(f"{run}: {len(j)} rows, repeat / table: min {q.min():.4f} median {q.median():.4f} max {q.max():.4f}")
kw = dict(folds=E.CV_FOLDS, l2_knee=E.table_l2_knee(t), decode_kernel=E.table_decode_kernel(t),
          device_sms=t.sm_count, launch_floor=E.table_launch_floor(t), gemm_curve=E.table_gemm_curve(t),
          heads=t.model_shape.num_heads, fa3=E.table_fa3(t))
pooled = E.heldout_errors("decode", m, **kw)
print("held-out rel err max/mean (%): pooled hyper-parameters (shipped) | fitted on the partition alone")
for s in sorted(pooled):
    a = E.heldout_errors("decode", m[m.decode_sms == s], **kw)[s]
    p = pooled[s]
    print(f"  {s:4d} SMs  {p.max():6.1%} / {p.mean():5.2%}  |  {a.max():6.1%} / {a.mean():5.2%}")
est = E.Estimator.from_table(T)
g = m[m.decode_sms == 112].copy()
g["held_out_err"] = pooled[112]
g["fit_over_measured"] = [est.decode_solo_ms(112, int(b), int(r)) / y for b, r, y in zip(g.bs, g.sum_reused, g.latency_ms)]
print("112 SMs, the rows with the largest held-out error:")
print(g.sort_values("held_out_err").tail(8).round(4).to_string(index=False))

# A candidate, not built: the pooled floor β kept, γ chosen per partition. Held-out on 96 and 112
# SMs for each γ of the grid, the same folds as `estimator check` (latency_model.heldout_errors'
# loop, which fits β on the rows and so cannot hold it fixed).
beta = est.solo._decode.profiled[112][3]
parts = L._decode_parts(m, E.table_decode_kernel(t))
print(f"pooled β = {beta:.3g} ms per key; held-out max/mean (%) per γ:")
for s in (96, 112):
    rows = parts[s]
    n = len(rows.y)
    k = min(E.CV_FOLDS, n)
    order = np.random.default_rng(0).permutation(n)
    out = []
    for g in L.FA3_GAMMA_PCT_GRID:
        err = np.empty(n)
        for f in range(k):
            test = order[f::k]
            (a, b, c, bb, _), _, _ = L._fit_decode_rows(rows.take(np.setdiff1d(order, test)), g, beta)
            te = rows.take(test)
            err[test] = np.abs((np.maximum(a * te.sr, bb * te.feat(g)) + b * te.bs + c) / te.y - 1)
        out.append(f"γ {g / 100:.2f}: {err.max():.1%}/{err.mean():.2%}")
    print(f"  {s:4d} SMs  " + ", ".join(out))
