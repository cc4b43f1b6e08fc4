"""Fitting a contention table: fit.json and guard.json from its raw CSVs, and its fused rows.

``fit_table`` (re)writes both (and fit.json's fused model when the table has fused rows:
``latency_model.fused``); ``add_fused`` adds a ``bench.prefill_mixed --fused`` output's rows to a
table and refits it. The ``table_*`` helpers read what a table's GPU, model and backend imply for
the fit (`check_table` refits with the same).
"""

from __future__ import annotations

import logging
import re
from dataclasses import replace
from pathlib import Path
from typing import Mapping, Sequence

from sglang_mux import cli
from sglang_mux.contention_guard import OUTSIDE_MARGIN, ContentionGuard
from sglang_mux.latency_model import (DecodeHyper, Fa3Grid, GemmCurves, PrefillReq, decode_kernel,
                                      l2_knee_tokens)
from sglang_mux.latency_model import fused
from sglang_mux.latency_model.fa3_kernels import MAX_SPLITS
from sglang_mux.latency_model.fit import fit_solo
from sglang_mux.tables import (FIT, GEMM_CURVE, GUARD, append_fused_rows, fused_row, read_table, slug, write_json)

logger = logging.getLogger(__name__)


def table_l2_knee(t) -> int:
    """The prefill L2-spill knee r0 of a table (latency_model): from its GPU and model shape."""
    m = t.rank_shape
    return l2_knee_tokens(t.meta["gpu_name"], m.num_kv_heads, m.head_dim)


def table_decode_kernel(t):
    """The decode grid of a table's model on its GPU (latency_model.DecodeHyper): FA3's for an
    fa3 table (γ fitted), else SGLang's triton grid with k = the stage-1 kernel's measured
    occupancy (meta.json ``profiler.decode_blocks_per_sm``, ``profiling.decode_kernel``) where the
    table has it; without it the fit chooses k."""
    m = t.rank_shape
    if t.attention_backend == "fa3":
        return DecodeHyper(head_groups=m.num_kv_heads, max_kv_splits=MAX_SPLITS, device_sms=t.sm_count, fa3=1)
    k = (t.meta.get("profiler") or {}).get("decode_blocks_per_sm") or 0
    return replace(decode_kernel(m.num_heads, m.num_kv_heads, t.sm_count), blocks_per_sm=int(k))


def table_launch_floor(t) -> bool:
    """Whether the fit offers a host launch floor: only for tables whose prefill rows include
    the host's launches (made before the profiler held the host ahead: no ``prefill_timing``)."""
    return (t.meta.get("profiler") or {}).get("prefill_timing") != "gpu"


def table_triton_extend(t) -> bool:
    """Whether the table was profiled with SGLang's triton attention, whose extend kernel
    gives every request of a batch the longest request's query blocks."""
    return t.attention_backend == "triton"


def table_fa3(t) -> Fa3Grid | None:
    """FA3's prefill grid for a table profiled with SGLang's fa3 backend (fa3_kernels), else None."""
    if t.attention_backend != "fa3":
        return None
    m = t.rank_shape
    return Fa3Grid(m.num_heads, m.num_kv_heads, t.sm_count)


def table_gemm_curve(t) -> GemmCurves | None:
    """The table's measured projection times (gemm_curve.csv), None if it has none."""
    return GemmCurves.from_frame(t.gemm_curve) if t.gemm_curve is not None else None


def fit_table(path: str | Path, outside_margin: float | None = None) -> tuple[dict, dict]:
    """(Re)write fit.json and guard.json from a table's raw CSVs; returns both dicts.

    The profiler calls this after writing meta.json and the three CSVs.
    """
    t = read_table(path, require_fit=False)
    kernel = table_decode_kernel(t)
    solo = fit_solo(t.solo_prefill, t.solo_decode, l2_knee=table_l2_knee(t),
                    decode_kernel=kernel, device_sms=t.sm_count, launch_floor=table_launch_floor(t),
                    gemm_curve=table_gemm_curve(t), heads=t.rank_shape.num_heads,
                    padded_query_blocks=table_triton_extend(t), fa3=table_fa3(t))
    if t.gemm_curve is None:
        logger.warning("%s has no %s: the prefill fit models the projections as a bent line, which misses "
                       "cuBLAS's slow token counts by up to ~40%%; measure it: python -m profiling.gemm_curve "
                       "--model-config CONFIG --out %s", t.path, GEMM_CURVE, t.path)
    if not kernel.blocks_per_sm and not kernel.fa3:
        logger.warning("%s/meta.json has no profiler.decode_blocks_per_sm: the decode fit chooses the blocks per SM "
                       "from the rows, which a held-out fold can get wrong; measure it: python -m "
                       "profiling.decode_kernel --model-config CONFIG --table %s", t.path, t.path)
    fit = solo.to_dict()
    if t.fused_rows:
        fit["fused"] = fit_fused(t.fused_rows)
    for kind, df, col, pred in (("prefill", t.solo_prefill, "prefill_sms", solo.predict_prefill_frame),
                                ("decode", t.solo_decode, "decode_sms", solo.predict_decode_frame)):
        for s, g in df.groupby(col):
            err = abs(pred(g) / g["latency_ms"].to_numpy() - 1.0)
            fit[kind][str(int(s))].update(rows=int(len(g)), train_max_rel_err=float(err.max()),
                                          train_mean_rel_err=float(err.mean()))
    # contention.csv rows are uniform batches: r_max = decode_reused_per_req (build passes it).
    guard = ContentionGuard.build(t.contention, solo.decode_ms,
                                  OUTSIDE_MARGIN if outside_margin is None else outside_margin).to_dict()
    write_json(t.path, FIT, fit)
    write_json(t.path, GUARD, guard)
    return fit, guard


def fit_fused(rows: Sequence[Mapping]) -> dict:
    """fit.json's ``fused``: the fused model fitted on a table's fused rows (`tables.read_fused_rows`),
    with the rows' count and its in-sample errors."""
    import numpy as np  # lazily: the server imports this module's package without fitting

    batches, ms = fused_batches(rows)
    m = fused.fit(batches, ms)
    err = np.abs(np.array([m.price(b) for b in batches]) / np.array(ms) - 1.0)
    return {**m.to_dict(), "rows": len(ms), "train_max_rel_err": float(err.max()),
            "train_mean_rel_err": float(err.mean())}


def add_fused(path: str | Path, results: Mapping[str, object]) -> list[str]:
    """Append the rows of ``bench.prefill_mixed --fused`` outputs (``results``: file name -> its
    parsed JSON) to a table's fused rows and refit it (`fit_table`); returns a line per file. An
    output of another GPU or attention backend, or of rows not on the whole GPU, is refused
    (UsageError) and nothing is written; a run already in the table is skipped."""
    t = read_table(path, require_fit=False)
    runs = {r["run"] for r in t.fused_rows or ()}
    new, said = [], []
    for f, res in results.items():
        if not isinstance(res, dict) or res.get("kind") != "fused" or not isinstance(res.get("rows"), list) \
                or not res["rows"]:
            raise cli.UsageError(f"{f}: not a bench.prefill_mixed --fused output (no \"kind\": \"fused\" and rows)")
        rows = res["rows"]
        backend = _result_backend(res)
        if slug(res.get("device") or "unknown") != slug(t.gpu_name) or backend != t.attention_backend:
            raise cli.UsageError(f"{f}: measured on {res.get('device')!r} with {backend!r}; the table is "
                                 f"{t.gpu_name!r} with {t.attention_backend!r}")
        off = [r.get("prefill_sms") if isinstance(r, dict) else None for r in rows
               if not isinstance(r, dict) or r.get("prefill_sms") != t.sm_count]
        if off:
            raise cli.UsageError(f"{f}: rows on {', '.join(sorted({str(x) for x in off}))} SMs; a fused iteration "
                                 f"runs on the whole GPU's {t.sm_count}")
        run = str(res.get("date", f))
        if run in runs:
            said.append(f"{f}: run {run} is in the table already, skipped")
            continue
        runs.add(run)
        try:
            new += [fused_row({**r, "run": run}) for r in rows]
        except (ValueError, TypeError, KeyError) as e:
            raise cli.UsageError(f"{f}: a row is not a fused iteration's ({e})") from None
        said.append(f"{f}: {len(rows)} rows")
    if new:
        append_fused_rows(t.path, new)
        fit_table(t.path)
    return said


def _result_backend(res: Mapping) -> str:
    """The attention backend a bench.prefill_mixed output was measured with: its field, else its
    command's ``--attention-backend`` (outputs before the field), else the tool's default."""
    m = re.search(r"--attention-backend[= ](\S+)", str(res.get("command", "")))
    return str(res.get("attention_backend") or (m.group(1) if m else "triton"))


def fused_batches(rows: Sequence[Mapping]) -> tuple[list[list[PrefillReq]], list[float]]:
    return [[PrefillReq(n, r) for n, r in x["reqs"]] for x in rows], [x["measured_ms"] for x in rows]
