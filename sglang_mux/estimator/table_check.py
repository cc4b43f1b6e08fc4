"""Checking a contention table (``estimator check``): each partition's fit predicting rows it was
not fitted on, the fused model likewise, and the guard against every co-run row; and
``predict``, the estimates for one described state.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

import numpy as np

from sglang_mux.estimator.core import Estimator
from sglang_mux.estimator.table_fit import (fused_batches, table_decode_kernel, table_fa3, table_gemm_curve,
                                                table_l2_knee, table_launch_floor)
from sglang_mux.fused_price import DECODE_ROW_MS
from sglang_mux.latency_model import GemmCurves, PrefillReq, SoloLatencyModel, min_batch_tokens
from sglang_mux.latency_model import fused
from sglang_mux.latency_model.design import prefill_domain
from sglang_mux.latency_model.fit import heldout_errors
from sglang_mux.tables import FUSED_ROWS, read_table, resolve_table

MAX_REL_ERR = 0.10
MEAN_REL_ERR = 0.03
CV_FOLDS = 5
# Fewest rows per partition for a held-out check: twice its own θs (4 prefill, 3 decode; the
# extensions add pooled hyper-parameters and θ5 = κ·θ2, no free per-partition coefficient).
MIN_ROWS = {"prefill": 8, "decode": 6, "fused": 2 * len(fused.FUSED_FEATURES)}


def check_table(path: str | Path, out=sys.stdout, progress: Callable[[str], None] | None = None) -> bool:
    """Print the held-out fit accuracy and guard range per partition; True if all bounds hold.

    ``progress``: called with a line before each slow step (the CLI writes them to stderr).
    Raises TableError on a malformed table.
    """
    est = Estimator.from_table(path)
    t = read_table(path)
    ok = True
    print(f"table {t.path}: {t.meta['gpu_name']} ({t.sm_count} SMs), {t.model_shape.architecture} "
          f"{t.model_shape.num_layers} layers; bounds: held-out max <= {MAX_REL_ERR:.0%}, mean <= {MEAN_REL_ERR:.0%}",
          file=out)
    knee, kernel, curve = table_l2_knee(t), table_decode_kernel(t), table_gemm_curve(t)
    if isinstance(est.solo, SoloLatencyModel):
        pt = est.solo.pooled_terms()
        fa3 = est.solo.prefill_hyper.fa3
        print("fit.json: " + (f"FA3 grid (packed GQA, split-KV for {fa3.device_sms} SMs), " if fa3 else "")
              + f"waves {pt['wave_tokens_per_sm'] or 'off'} tok/SM, L2 knee {pt['l2_knee_tokens'] or 'off'} "
              f"(spill x{1 + pt['l2_spill_ratio']:.3g}), "
              + (f"launch floor {pt['launch_floor_ms']:.2f} ms, " if pt['launch_floor_ms'] else
                 "no launch floor (" + ("rows time the GPU alone), " if not table_launch_floor(t) else "none fits), "))
              + "GEMM waves "
              + (f"to {pt['gemm_waves_tokens'][0]}..{pt['gemm_waves_tokens'][1]} tokens, " if pt['gemm_waves_tokens'][0]
                 else "off, ")
              + "token knees " + ("/".join(str(k) for k in pt["gemm_knee_tokens"] if k) or "off")
              + f", cold prefix reads {pt['cold_prefix_ms_per_token'] * 1e3:.3g} µs/token, "
              + ("GEMM curve x{0:.3g}..{1:.3g}, ".format(*pt["gemm_curve_scale"]) if est.solo.gemm_curve is not None
                 else "no GEMM curve, ")
              + "decode "
              + (f"FA3 grid, floor {pt['decode_floor_ms_per_token'] * 1e3:.3g} µs per key of the busiest SM, "
                 "a second block on an SM costs γ of one (fitted per partition: "
                 + ", ".join(f"{g:.2f} on {k}" for k, g in pt["decode_fa3_gamma"].items()) + ") "
                 if kernel.fa3 else
                 f"floor {pt['decode_floor_ms_per_token'] * 1e3:.3g} µs per key-wave token "
                 f"({pt['decode_blocks_per_sm']} blocks/SM per wave, "
                 f"{'measured' if kernel.blocks_per_sm else 'fitted'}"
                 f"{', split tails' if est.solo.decode_hyper.min_block_kv else ''}) "
                 if pt['decode_blocks_per_sm'] else
                 f"floor {pt['decode_floor_ms_per_token'] * 1e3:.3g} µs/token of r_max ")
              + ("and compute-bound projections past b_c requests (fitted per partition: "
                 + ", ".join(f"{b:.0f} on {k}" for k, b in pt["decode_compute_knee_bs"].items()) + ") "
                 if pt["decode_compute_knee_bs"] else "")
              + "(held-out below: refitted without the rows it predicts)", file=out)
    for kind, df, col in (("prefill", t.solo_prefill, "prefill_sms"), ("decode", t.solo_decode, "decode_sms")):
        if progress is not None:
            progress(f"{kind}: refitting {df[col].nunique()} partitions {CV_FOLDS} times, each without the rows "
                     "it then predicts")
        errs = heldout_errors(kind, df, folds=CV_FOLDS, l2_knee=knee, decode_kernel=kernel, device_sms=t.sm_count,
                              launch_floor=table_launch_floor(t), gemm_curve=curve, heads=t.rank_shape.num_heads,
                              fa3=table_fa3(t))
        for s, err in errs.items():
            if len(err) < MIN_ROWS[kind]:
                ok = False
                print(f"{kind:8s} sms={int(s):4d} rows={len(err):5d}  too few rows for a held-out check  FAIL", file=out)
                continue
            good = err.max() <= MAX_REL_ERR and err.mean() <= MEAN_REL_ERR
            ok &= bool(good)
            print(f"{kind:8s} sms={int(s):4d} rows={len(err):5d}  held-out rel err max {err.max():6.2%} "
                  f"mean {err.mean():6.2%}  {'OK' if good else 'FAIL'}", file=out)
        if kind == "prefill":
            ok &= _check_small_batches(est, df, out, min_batch_tokens(curve))
            _report_curve(curve, out)
    if progress is not None and t.fused_rows:
        progress(f"fused: refitting the fused model {CV_FOLDS} times, each without the rows it then predicts")
    ok &= _check_fused(est, t, out)
    ct = t.contention
    if progress is not None:
        progress(f"guard: worst case against {len(ct)} co-run rows")
    for d, g in ct.groupby("decode_sms"):
        d = int(d)
        raw = (g["decode_corun_ms"] / g["decode_solo_ms"]).to_numpy()
        # Contention rows are uniform batches: r_max = the per-request context.
        worst = np.array([est.decode_worst_ms(d, int(b), int(round(b * r)), int(pn), int(pr), max_reused=r)
                          for b, r, pn, pr in zip(g["decode_bs"], g["decode_reused_per_req"],
                                                  g["prefill_new"], g["prefill_reused"])])
        miss = int((worst < g["decode_corun_ms"].to_numpy() * (1 - 1e-9)).sum())
        ok &= miss == 0
        cells = est.guard.cell_values(d) if d in est.guard.partitions else []
        cell_rng = f"cells {min(cells):.3f}..{max(cells):.3f}" if cells else "cells: not in guard.json"
        print(f"guard    sms={d:4d} rows={len(g):5d}  measured slowdown min {raw.min():.3f} max {raw.max():.3f}  "
              f"{cell_rng}  worst<corun rows {miss}  {'OK' if miss == 0 else 'FAIL'}", file=out)
    print("check: " + ("OK" if ok else "FAILED"), file=out)
    return ok


def _check_fused(est: "Estimator", t, out) -> bool:
    """The fused model's held-out errors on the table's fused rows, against the same bounds; a
    table without fused rows passes (its fused price is the solo fit's, said)."""
    if not t.fused_rows:
        print(f"fused    no {FUSED_ROWS}: a fused iteration is priced by the solo prefill fit + {DECODE_ROW_MS} ms "
              "per decode row (add measured ones: python -m sglang_mux.estimator add-fused DIR FILE)", file=out)
        return True
    n = len(t.fused_rows)
    if n < MIN_ROWS["fused"]:
        print(f"fused    sms={t.sm_count:4d} rows={n:5d}  too few rows for a held-out check  FAIL", file=out)
        return False
    err = fused.heldout_errors(*fused_batches(t.fused_rows), folds=CV_FOLDS, knots=est.fused_model.knots)
    good = bool(err.max() <= MAX_REL_ERR and err.mean() <= MEAN_REL_ERR)
    print(f"fused    sms={t.sm_count:4d} rows={n:5d}  held-out rel err max {err.max():6.2%} mean {err.mean():6.2%}  "
          f"{'OK' if good else 'FAIL'} (token bands, knots {'/'.join(map(str, est.fused_model.knots))})", file=out)
    return good


def _check_small_batches(est: "Estimator", df, out, min_tokens: int) -> bool:
    """Without a GEMM curve, rows of batches below MIN_BATCH_TOKENS are predicted as an upper
    bound (the 128-token batch's token-linear work): report predicted/measured; fail if any
    is more than the error bound under."""
    small = prefill_domain(df, min_tokens)[1]
    if not len(small) or not isinstance(est.solo, SoloLatencyModel):
        return True
    ratio = est.solo.predict_prefill_frame(small) / small["latency_ms"].to_numpy()
    good = bool(ratio.min() >= 1.0 - MAX_REL_ERR)
    print(f"prefill  below {min_tokens} batch tokens: {len(small)} rows on {small['prefill_sms'].nunique()} "
          f"partitions, predicted/measured {ratio.min():.2f}..{ratio.max():.2f} (a bound, not fitted; "
          f"must stay >= {1 - MAX_REL_ERR:.2f})  {'OK' if good else 'FAIL'}", file=out)
    return good


def _report_curve(curve: GemmCurves | None, out) -> None:
    """How far a token count between the curve's points may be off: each inner point
    predicted from its two neighbours (information, no bound: cuBLAS's choices jump)."""
    if curve is None:
        print("gemm     no gemm_curve.csv: prefill projections modelled as a bent line (profile one: "
              "python -m profiling.gemm_curve)", file=out)
        return
    errs = [(abs(e), t, s) for s in curve.sms for t, e in curve.leave_one_out(s)]
    if not errs:
        return
    med = sorted(e for e, _, _ in errs)[len(errs) // 2]
    worst = max(errs)
    points = sum(len(curve.points(s)[0]) for s in curve.sms)
    print(f"gemm     curve: {points} points on {len(curve.sms)} partitions; a point "
          f"interpolated from its neighbours is off by median {med:.1%}, max {worst[0]:.0%} ({int(worst[1])} tokens "
          f"on {worst[2]} SMs): the risk between measured token counts", file=out)


def predict(path: str | Path, prefill_new: int, prefill_reused: int, decode_bs: int,
            decode_reused: int, decode_sms: int, decode_max_reused: int | None = None) -> dict:
    """The ``predict`` subcommand's JSON object (ms). ``path``: a table's name or directory;
    ``decode_reused`` is Σ reused of the batch, ``decode_max_reused`` its longest context (None:
    Σ/bs, a uniform batch). A bad table: TableError; an unprofiled partition: UnprofiledPartition."""
    est = Estimator.from_table(resolve_table(path))
    prefill_sms = est.total_sms - decode_sms
    g = est.guard_slowdown(decode_sms, decode_bs, decode_reused, prefill_new, prefill_reused)
    return {
        "decode_sms": decode_sms,
        "prefill_sms": prefill_sms,
        "decode_solo_ms": est.decode_solo_ms(decode_sms, decode_bs, decode_reused, decode_max_reused),
        "decode_worst_ms": est.decode_worst_ms(decode_sms, decode_bs, decode_reused, prefill_new, prefill_reused,
                                               decode_max_reused),
        "guard_slowdown": g,
        "prefill_solo_ms": (est.prefill_ms(prefill_sms, [PrefillReq(prefill_new, prefill_reused)])
                            if prefill_sms > 0 and prefill_new > 0 else None),
    }
