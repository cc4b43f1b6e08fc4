"""The measured GEMM curve (sglang_mux.latency_model.gemm_curve) and its profiler (profiling.gemm_curve)."""

import csv

import pandas as pd
import pytest

from profiling import gemm_curve as pgc
from sglang_mux.latency_model.gemm_curve import GemmCurves, UnprofiledCurve

CURVES = GemmCurves({20: ([64, 128, 448, 512], [4.0, 6.0, 30.0, 20.0]),
                     132: ([64, 128, 448, 512], [1.0, 2.0, 6.0, 5.0])})


def test_points_between_and_beyond():
    assert CURVES.at(20, 448) == 30.0  # a measured point: exactly
    assert CURVES.at(20, 480) == pytest.approx(25.0)  # linear between its neighbours
    assert CURVES.at(20, 576) == pytest.approx(10.0)  # past the last: along the last two
    assert CURVES.at(20, 32) == 4.0  # below the first: the first
    # between partitions: linear in 1/SMs (the θs' rule); above the largest: the largest's
    w = (1 / 52 - 1 / 132) / (1 / 20 - 1 / 132)
    assert CURVES.at(52, 448) == pytest.approx(w * 30.0 + (1 - w) * 6.0)
    assert CURVES.at(140, 448) == 6.0
    with pytest.raises(UnprofiledCurve, match="below every profiled partition"):
        CURVES.at(16, 448)
    assert CURVES.column(20, [128, 448]) == [6.0, 30.0]


def test_leave_one_out_reports_what_interpolation_would_miss():
    loo = dict(CURVES.leave_one_out(20))
    assert sorted(loo) == [128, 448]
    assert loo[448] == pytest.approx((6.0 + (20.0 - 6.0) * 320 / 384) / 30.0 - 1)  # the slow point: far under


def test_frames_dicts_and_bad_curves():
    df = pd.DataFrame({"prefill_sms": [20, 20, 20, 20], "tokens": [64, 128, 128, 128],
                       "gemm_ms": [1.0, 2.0, 3.0, 10.0]})
    c = GemmCurves.from_frame(df)  # a point measured several times: their median
    assert c.points(20) == ([64.0, 128.0], [1.0, 3.0])
    assert GemmCurves.from_dict(CURVES.to_dict()).at(52, 300) == CURVES.at(52, 300)
    with pytest.raises(ValueError, match="at least 2 distinct token counts"):
        GemmCurves({20: ([64], [1.0])})
    with pytest.raises(ValueError, match="non-positive or non-finite"):
        GemmCurves({20: ([64, 128], [1.0, 0.0])})
    with pytest.raises(ValueError, match="at least one partition"):
        GemmCurves({})


def test_profiler_appends_resumes_and_stops_at_its_deadline(tmp_path):
    f = tmp_path / pgc.FILE
    calls = []

    def fake(sms, m):
        calls.append((sms, m))
        return [m / sms, 1.1 * m / sms, 0.9 * m / sms]

    assert pgc.measure(fake, [20, 36], [64, 128], 32, f, progress=False) == 4
    rows = list(csv.DictReader(f.open()))
    assert [tuple(r[k] for k in pgc.COLUMNS[:2]) for r in rows] == [("20", "64"), ("36", "64"), ("20", "128"),
                                                                       ("36", "128")]
    assert float(rows[0]["gemm_ms"]) == pytest.approx(64 / 20 * 32)  # the layer's median x layers
    assert float(rows[0]["spread_pct"]) == pytest.approx(20.0)
    calls.clear()
    assert pgc.measure(fake, [20, 36, 52], [64, 128], 32, f, progress=False) == 2  # only the new partition
    assert calls == [(52, 64), (52, 128)]
    clock = iter([0.0, 5.0, 20.0, 30.0])
    n = pgc.measure(fake, [20], [256, 512, 1024], 32, f, progress=False, deadline=10.0, clock=lambda: next(clock))
    assert n == 2 and pgc.todo(f, [20], [256, 512, 1024]) == [(20, 1024)]
    assert len(f.read_text().splitlines()) == 1 + 8  # one header


def test_default_tokens_are_dense_where_cublas_jumps():
    t = pgc.TOKENS
    assert all(m in t for m in range(32, 1025, 32)) and 448 in t and max(t) == 32768
    assert pgc.layer_shapes({"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
                             "intermediate_size": 14336}) == {"qkv": (4096, 6144), "o": (4096, 4096),
                                                              "gate_up": (4096, 28672), "down": (14336, 4096)}


def test_table_gemm_curve_is_validated(tmp_path):
    import sys
    from pathlib import Path

    from sglang_mux.tables import TableError, read_table

    sys.path.insert(0, str(Path(__file__).parent))
    import synth_tables as st

    p = st.write_synthetic_table(tmp_path / "t", solo_model="mux-curve", fitted=False)
    t = read_table(p, require_fit=False)
    assert t.gemm_curve is not None and sorted(t.gemm_curve.prefill_sms.unique()) == st.PREFILL_SMS[::-1] + [132]
    good = (p / "gemm_curve.csv").read_text()
    df = pd.read_csv(p / "gemm_curve.csv")
    for bad, msg in ((df.drop(columns="gemm_ms"), r"missing column\(s\) \['gemm_ms'\]"),
                     (df.assign(gemm_ms=df.gemm_ms.where(df.index != 3, -1.0)), "negative value in column gemm_ms"),
                     (df[df.prefill_sms != 52], r"no points for prefill_sms \[52\].*profiling.gemm_curve"),
                     (df[(df.prefill_sms != 84) | (df.tokens == 64)],
                      r"prefill_sms \[84\] have fewer than 2 token counts")):
        bad.to_csv(p / "gemm_curve.csv", index=False)
        with pytest.raises(TableError, match="gemm_curve.csv: " + msg):
            read_table(p, require_fit=False)
    (p / "gemm_curve.csv").write_text(good)
    (p / "gemm_curve.csv").unlink()
    assert read_table(p, require_fit=False).gemm_curve is None  # optional: older tables have none
