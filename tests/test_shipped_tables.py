"""Every shipped table, quickly: its shipped fit describes its own rows within the estimator's
bounds, and solo x guard bounds every co-run row. The held-out check of the FA3 tables (a refit
per fold, ~2 minutes) is tests/test_fa3_kernels.py's slow test: `python3 -m pytest -m slow`."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sglang_mux.estimator import MAX_REL_ERR, MEAN_REL_ERR, Estimator
from sglang_mux.latency_model import prefill_domain

ROOT = Path(__file__).resolve().parents[1]
TABLES = sorted(p for p in (ROOT / "contention_tables").iterdir() if (p / "meta.json").is_file())


def test_every_backend_and_gpu_is_shipped():
    assert {p.name for p in TABLES} >= {"llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3", "llama-3.1-8b__nvidia-h200__fa3",
                                         "llama-3.1-8b__nvidia-h100-80gb-hbm3__triton",
                                         "llama-3.1-8b__nvidia-h200__triton", "qwen3-8b__nvidia-h100-80gb-hbm3__fa3",
                                         "llama-3.1-70b__nvidia-h100-80gb-hbm3__fa3__tp4",
                                         "llama-3.1-70b__nvidia-h200__fa3__tp2"}


@pytest.mark.parametrize("table", TABLES, ids=lambda p: p.name)
def test_shipped_fit_describes_its_rows(table):
    """Per partition, the shipped fit's error on the rows it was fitted to is within the held-out
    bounds (in-sample is the weaker claim; the held-out one is the slow check)."""
    est = Estimator.from_table(table)
    pre = pd.read_csv(table / "solo_prefill.csv")
    curve_min = est.solo.prefill_hyper.min_batch_tokens
    fitted, _ = prefill_domain(pre, curve_min) if curve_min else (pre, None)
    dec = pd.read_csv(table / "solo_decode.csv")
    for kind, df, col, predict in (("prefill", fitted, "prefill_sms", est.solo.predict_prefill_frame),
                                   ("decode", dec, "decode_sms", est.solo.predict_decode_frame)):
        for sms, g in df.groupby(col):
            err = np.abs(np.asarray(predict(g)) / g["latency_ms"].to_numpy() - 1)
            assert err.max() <= MAX_REL_ERR and err.mean() <= MEAN_REL_ERR, (kind, int(sms), err.max(), err.mean())


@pytest.mark.parametrize("table", TABLES, ids=lambda p: p.name)
def test_shipped_guard_bounds_every_corun_row(table):
    est = Estimator.from_table(table)
    ct = pd.read_csv(table / "contention.csv")
    for row in ct.itertuples():
        b, r = int(row.decode_bs), row.decode_reused_per_req
        worst = est.decode_worst_ms(int(row.decode_sms), b, int(round(b * r)), int(row.prefill_new),
                                    int(row.prefill_reused), max_reused=r)
        assert worst >= row.decode_corun_ms * (1 - 1e-9), row
