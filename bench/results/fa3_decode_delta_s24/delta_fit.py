"""An alternative to the shipped FA3 decode fit, not shipped: the floor as β·K0 + δ_s·(K1 − K0),
K0 and K1 the busiest SM's keys at γ = 0 and 1 (fa3_kernels.decode_keys), β pooled over a grid
as the shipped fit does, δ_s per partition by NNLS (γ_s = δ_s / β, continuous: no γ grid). The
same 5 folds as `estimator check`, β re-chosen on each fold's training rows; no joint polish.
With GAMMA_MAX (a second argument) δ_s is bounded by GAMMA_MAX·β (scipy's lsq_linear instead of
NNLS). CPU, about a minute a table:
    python bench/results/fa3_decode_delta_s24/delta_fit.py contention_tables/<table> [GAMMA_MAX]
"""
import sys, numpy as np
from scipy.optimize import lsq_linear

GAMMA_MAX = float(sys.argv[2]) if len(sys.argv) > 2 else None
import sglang_mux.estimator as E
import sglang_mux.latency_model as L
from sglang_mux.tables import read_table

def feats(rows):
    return rows.feat(0), rows.feat(100) - rows.feat(0)

def fit_part(rows, beta):
    y, sr, bs = rows.y, rows.sr, rows.bs
    K0, X = feats(rows)
    w = 1.0 / y
    one = np.ones(len(y))
    base = L._nnls(np.column_stack([sr, bs, one]), y, w)
    best = (L._criterion(base[0] * sr + base[1] * bs + base[2], y), (base[0], base[1], base[2], 0.0))
    rho = sr / K0
    for t in sorted(set(rho.tolist())):
        fl = rho <= t
        A, b = np.column_stack([sr * (~fl), bs, one, X * fl]), y - beta * K0 * fl
        if GAMMA_MAX is None:
            th = L._nnls(A, b, w)
        else:  # 0 <= δ <= GAMMA_MAX·β, the other θs >= 0 (the same 1/y row weights)
            th = lsq_linear(A * w[:, None], b * w, bounds=([0, 0, 0, 0], [np.inf] * 3 + [GAMMA_MAX * beta + 1e-15])).x
        pred = np.maximum(th[0] * sr, beta * K0 + th[3] * X) + th[1] * bs + th[2]
        j = L._criterion(pred, y)
        if j < best[0] - 1e-12:
            best = (j, tuple(th))
    return best

def select(parts):
    bmax = max(float((p.y / p.feat(0)).max()) for p in parts.values())
    grid = list(np.geomspace(bmax * 1e-3, bmax, 22))
    def J(beta):
        errs = []
        ths = {}
        for s, p in parts.items():
            j, th = fit_part(p, beta)
            ths[s] = th
            K0, X = feats(p)
            pred = np.maximum(th[0] * p.sr, beta * K0 + th[3] * X) + th[1] * p.bs + th[2]
            errs.append(np.abs(pred / p.y - 1))
        e = np.concatenate(errs)
        return e.max() / 0.1 + e.mean() / 0.03, ths
    best = min(((J(b)[0], b) for b in grid))
    step = 1e3 ** (1 / 21)
    fine = list(np.geomspace(best[1] / step, best[1] * step, 15))
    best = min([best] + [(J(b)[0], b) for b in fine])
    return best[1], J(best[1])[1]

def heldout(parts):
    out = {}
    for s, rows in parts.items():
        n = len(rows.y); k = min(5, n)
        order = np.random.default_rng(0).permutation(n)
        err = np.empty(n)
        for f in range(k):
            test = order[f::k]; train = np.setdiff1d(order, test)
            view = dict(parts); view[s] = rows.take(train)
            beta, ths = select(view)
            th = ths[s]; te = rows.take(test); K0, X = feats(te)
            pred = np.maximum(th[0] * te.sr, beta * K0 + th[3] * X) + th[1] * te.bs + th[2]
            err[test] = np.abs(pred / te.y - 1)
        out[s] = err
    return out

if __name__ == "__main__":
    t = read_table(sys.argv[1])
    parts = L._decode_parts(t.solo_decode, E.table_decode_kernel(t))
    beta, ths = select(parts)
    print(f"β {beta:.4g}; γ = δ/β per partition: " + ", ".join(f"{s}: {th[3] / beta:.2f}" for s, th in ths.items()))
    for s, e in heldout(parts).items():
        print(f"  {s:4d} SMs held out max {e.max():6.2%} mean {e.mean():5.2%}" + ("  FAIL" if e.max() > 0.1 or e.mean() > 0.03 else ""))
