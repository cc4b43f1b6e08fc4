"""Eq. 1 / Eq. 2 regressors: recovery of known θs, non-negativity, partition policy."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sglang_mux.latency_model import (PrefillReq, SoloLatencyModel, UnprofiledPartition,
                                      fit_decode_frame, fit_nonneg, fit_prefill_frame,
                                      prefill_features)

ROOT = Path(__file__).resolve().parents[1]
TH_P = {20: (2.0e-7, 4.0e-7, 4.0e-3, 20.0), 116: (4.0e-8, 8.0e-8, 8.0e-4, 5.0)}
TH_D = {16: (4.0e-4, 0.12, 14.0), 112: (1.5e-4, 0.02, 5.0)}


def _prefill_frame(thetas, rows=40, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for s, th in thetas.items():
        for _ in range(rows):
            bs = int(rng.integers(1, 6))
            reqs = [PrefillReq(int(rng.integers(16, 20000)), int(rng.integers(0, 30000)) * int(rng.random() < 0.5))
                    for _ in range(bs)]
            sq, nr, n = prefill_features(reqs)
            out.append((s, bs, sq, nr, n, th[0] * sq + th[1] * nr + th[2] * n + th[3]))
    return pd.DataFrame(out, columns=["prefill_sms", "bs", "sum_new_sq", "sum_new_reused", "sum_new", "latency_ms"])


def _decode_frame(thetas, rows=40, seed=1):
    rng = np.random.default_rng(seed)
    out = []
    for s, th in thetas.items():
        for _ in range(rows):
            bs = int(rng.integers(1, 257))
            sr = int(bs * rng.integers(100, 4000))
            out.append((s, bs, sr, th[0] * sr + th[1] * bs + th[2]))
    return pd.DataFrame(out, columns=["decode_sms", "bs", "sum_reused", "latency_ms"])


def test_recovers_known_thetas_on_noiseless_data():
    m = SoloLatencyModel.fit(_prefill_frame(TH_P), _decode_frame(TH_D))
    for s, th in TH_P.items():
        np.testing.assert_allclose(m.prefill_theta(s), th, rtol=1e-6)
    for s, th in TH_D.items():
        np.testing.assert_allclose(m.decode_theta(s), th, rtol=1e-6)


def test_coefficients_are_non_negative_and_plain_floats():
    # y falls with bs: an unconstrained fit would give θ2 < 0.
    df = pd.DataFrame({"decode_sms": 16, "bs": [1, 2, 4, 8, 16], "sum_reused": [100, 90, 400, 900, 1600],
                       "latency_ms": [10.0, 9.0, 8.5, 8.0, 7.9]})
    th = fit_decode_frame(df)
    assert all(type(t) is float and t >= 0 for t in th)
    th = fit_nonneg(np.array([[1.0, 1.0], [2.0, 1.0], [3.0, 1.0]]), np.array([3.0, 2.0, 1.0]))
    assert all(t >= 0 for t in th)


def test_prediction_matches_equations():
    m = SoloLatencyModel(TH_P, TH_D)
    reqs = [PrefillReq(1000, 500), PrefillReq(300, 0)]
    t = TH_P[20]
    want = t[0] * (1000**2 + 300**2) + t[1] * 1000 * 500 + t[2] * 1300 + t[3]
    assert m.prefill_ms(20, reqs) == pytest.approx(want)
    assert m.prefill_ms_sums(20, 1000**2 + 300**2, 500000, 1300) == pytest.approx(want)
    t = TH_D[16]
    assert m.decode_ms(16, 8, 8000) == pytest.approx(t[0] * 8000 + t[1] * 8 + t[2])
    assert m.prefill_ms(20, []) == 0.0 and m.decode_ms(16, 0, 0) == 0.0


def test_unprofiled_partition_policy():
    m = SoloLatencyModel(TH_P, TH_D)
    # Between: linear in 1/SMs, so between the neighbours and exact at the ends.
    mid = m.decode_ms(64, 32, 32000)
    lo, hi = m.decode_ms(16, 32, 32000), m.decode_ms(112, 32, 32000)
    assert hi < mid < lo
    w = (1 / 64 - 1 / 112) / (1 / 16 - 1 / 112)
    assert mid == pytest.approx(w * lo + (1 - w) * hi)
    # Above the largest: the largest's coefficients (conservative).
    assert m.decode_ms(132, 32, 32000) == hi
    assert m.prefill_theta(132) == m.prefill_theta(116)
    # Below the smallest: a clear error.
    with pytest.raises(UnprofiledPartition, match="below every profiled"):
        m.decode_ms(8, 1, 100)
    with pytest.raises(UnprofiledPartition):
        m.prefill_ms(4, [PrefillReq(10)])


def test_serialization_roundtrip_and_rejects_bad_theta():
    m = SoloLatencyModel.fit(_prefill_frame(TH_P, rows=12), _decode_frame(TH_D, rows=12))
    m2 = SoloLatencyModel.from_dict(json.loads(json.dumps(m.to_dict())))
    assert m2.prefill_theta(20) == m.prefill_theta(20) and m2.decode_theta(112) == m.decode_theta(112)
    with pytest.raises(ValueError, match="non-negative"):
        SoloLatencyModel({20: (1.0, -1.0, 0.0, 0.0)}, TH_D)
    with pytest.raises(ValueError):
        SoloLatencyModel({20: (1.0, 0.0, 0.0)}, TH_D)  # wrong width
    with pytest.raises(ValueError):
        SoloLatencyModel({20: (float("nan"), 0.0, 0.0, 0.0)}, TH_D)


def test_prefill_fit_frame_matches_fit():
    df = _prefill_frame({20: TH_P[20]})
    np.testing.assert_allclose(fit_prefill_frame(df), TH_P[20], rtol=1e-6)


def test_prediction_does_not_import_sklearn():
    code = ("import sys; from sglang_mux.latency_model import SoloLatencyModel, PrefillReq;"
            f"m = SoloLatencyModel({TH_P!r}, {TH_D!r}); m.prefill_ms(20, [PrefillReq(5, 1)]); m.decode_ms(16, 2, 9);"
            "assert 'sklearn' not in sys.modules and 'numpy' not in sys.modules, sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
