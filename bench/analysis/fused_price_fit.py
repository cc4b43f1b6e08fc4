"""How closely can a fused iteration's GPU time be fitted from profiled fused rows? (issue 43 item 2)

    python -m bench.analysis.fused_price_fit [FILE ...]      (from the repository root)

Reads ``bench.prefill_mixed --fused`` outputs (default: the three of
bench/results/fused_price_h100_2026-11-27/: the grid and two random sets, 165 rows from H100s) and
prints, for each candidate model, the held-out relative error (5-fold, 5 shuffles: max and mean of
|estimate / measured - 1|) of a non-negative least-squares fit on relative error. The candidates:
the shipped solo prefill fit over the chunk and one-token decode rows (``solo``, what
``Estimator.fused_ms`` prices before serving teaches it), that plus per-row and per-context terms,
and a model of the fused rows alone: a constant, the batch's tokens, the chunk's attention (Σ n·r
and Σ n² over its pieces, per million), its pieces, and the decode rows' count and KV context (per
thousand tokens). The issue's bounds: max <= 10 %, mean <= 3 %. CPU, a few seconds.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from scipy.optimize import nnls

from sglang_mux import cli
from sglang_mux.estimator import Estimator, PrefillReq
from sglang_mux.tables import resolve_table

RESULTS = Path("bench/results/fused_price_h100_2026-11-27")
FILES = (RESULTS / "grid_host/grid.json", RESULTS / "grid_host/random_seed1.json", RESULTS / "fused.json")
TABLE = "llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3"
MODELS = {
    "solo": ("solo",),
    "solo + rows": ("solo", "rows"),
    "solo + rows + context": ("solo", "rows", "ctx"),
    "fused rows alone": ("1", "tokens", "nr", "nn", "pieces", "rows", "ctx"),
}


def features(solo, reqs: list[PrefillReq]) -> dict[str, float]:
    pieces = [q for q in reqs if q.n > 1]
    rows = [q for q in reqs if q.n == 1]
    return {"solo": solo.prefill_ms(max(solo.prefill_sms), reqs), "1": 1.0, "tokens": float(sum(q.n for q in reqs)),
            "nr": sum(q.n * q.r for q in pieces) / 1e6, "nn": sum(q.n * q.n for q in pieces) / 1e6,
            "pieces": float(len(pieces)), "rows": float(len(rows)), "ctx": sum(q.r for q in rows) / 1e3}


def heldout(X: np.ndarray, y: np.ndarray, seed: int, k: int = 5) -> np.ndarray:
    idx = np.random.default_rng(seed).permutation(len(y))
    err = np.zeros(len(y))
    for f in range(k):
        te = idx[f::k]
        tr = np.setdiff1d(idx, te)
        w, _ = nnls(X[tr] / y[tr, None], np.ones(len(tr)))
        err[te] = X[te] @ w / y[te] - 1
    return err


def main(argv=None) -> int:
    ap = cli.ArgumentParser(prog="python -m bench.analysis.fused_price_fit", description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", type=Path, default=list(FILES), help="bench.prefill_mixed --fused outputs")
    ap.add_argument("--table", default=TABLE, help="the table whose solo prefill fit is the baseline")
    a = ap.parse_args(argv)
    solo = Estimator.from_table(resolve_table(a.table)).solo
    rows, y = [], []
    for f in a.files:
        try:
            data = json.loads(f.read_text())["rows"]
        except (OSError, ValueError, KeyError) as e:
            ap.error(f"{f}: not a bench.prefill_mixed --fused output ({e})")
        for r in data:
            rows.append(features(solo, [PrefillReq(int(n), int(c)) for n, c in r["reqs"]]))
            y.append(float(r["measured_ms"]))
    y = np.array(y)
    print(f"{len(y)} fused iterations from {len(a.files)} files; held out, 5-fold x 5 shuffles\n")
    print("| model | held-out max error | held-out mean error |")
    print("|---|---:|---:|")
    for name, cols in MODELS.items():
        X = np.array([[r[c] for c in cols] for r in rows])
        errs = [np.abs(heldout(X, y, seed)) for seed in range(5)]
        print(f"| {name} | {min(e.max() for e in errs):.1%}-{max(e.max() for e in errs):.1%} "
              f"| {min(e.mean() for e in errs):.1%}-{max(e.mean() for e in errs):.1%} |")
    return 0


if __name__ == "__main__":
    cli.run(main)
