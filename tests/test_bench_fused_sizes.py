"""bench.analysis.fused_sizes: served fused iterations grouped by the prefill-graph size they ran at."""
import pandas as pd
import pytest

from bench.analysis import fused_sizes as F

RATIO = {"fixed_ms": 0.0, "slope": 1.0, "ratio": 1.1, "margin_ms": 2.0}  # price = 1.1 x base + 2


def test_rows_group_by_the_padded_size_with_their_ratio_and_the_curve():
    rows = [  # (extend tokens, decode rows, measured, planned price)
        (448, 30, 28.8, 24.0), (440, 30, 28.6, 24.0),  # both padded to 448: 1.44 and 1.43 x base
        (512, 30, 20.0, 24.0), (512, 30, 22.0, 24.0),
        (512, 3, 99.0, 24.0),                            # the drain: too few decode rows, left out
        (0, 30, 9.0, 10.0),                              # a decode alone, left out
    ]
    t = pd.DataFrame([{"extend_tokens": n, "decode_bs": b, "measured_decode_ms": m, "t_decode_worst_ms": p,
                       "fused_price": RATIO} for n, b, m, p in rows])
    gemm = {448: 13.9, 480: 9.8, 512: 9.7}.get
    out = F.by_size(t, min_decode=10, over_ms=28.7, gemm=lambda m: gemm(m, 10.0 + m / 1000))
    assert list(out.index) == [448, 512] and list(out.n) == [2, 2]
    assert out.loc[448, "measured_over_base"] == pytest.approx((28.8 + 28.6) / 2 / 20.0)
    assert out.loc[512, "measured_over_base"] == pytest.approx(1.05) and out.loc[448, "over_28.7ms"] == 1
    assert out.loc[448, "gemm_excess_ms"] == pytest.approx(13.9 - 9.7) and out.loc[512, "gemm_excess_ms"] == 0.0
    with pytest.raises(ValueError, match="no fused iteration with 40"):
        F.by_size(t, min_decode=40)
