import numpy as np
import pandas as pd
import pytest

from bench.analysis import fused_price_replay as R
from sglang_mux.fused_price import FusedPrice


def timeline(rows):
    return pd.DataFrame([{"reason": r, "t_decode_worst_ms": p, "measured_decode_ms": m, "fused_price": s}
                         for r, p, m, s in rows])


def test_the_replay_prices_each_served_row_before_observing_it_and_bins_both_errors():
    """Rows priced at base + 0 (the prior): the replay starts from the same prior, so until its
    first refit its error is the served one; decode-only rows and rows without a state are left
    out."""
    prior = FusedPrice(prior_holds=True).to_dict()
    rows = [("fused", b, 1.1 * b, prior) for b in [25.0, 26.0, 27.0, 28.0] * 4] + \
           [("decode-only", 10.0, 10.0, None), ("fused", 47.0, 52.0, None)]
    got = R.served(timeline(rows))
    assert list(got.base_ms) == [25.0, 26.0, 27.0, 28.0] * 4 and list(got.measured_ms[:2]) == pytest.approx([27.5, 28.6])
    replayed = R.replay(got)
    assert np.allclose(replayed, got.planned_ms)  # 16 rows: no refit before the 32nd
    t = R.table(got)
    assert list(t.n) == [16] and t["served P50"].iloc[0] == pytest.approx(2.65)
    assert t["replayed P50"].iloc[0] == t["served P50"].iloc[0]
    with pytest.raises(ValueError, match="no fused_price column"):
        R.served(timeline(rows).drop(columns="fused_price"))
    old_state = {k: v for k, v in prior.items() if k != "ratio"}  # a timeline from before the ratio form
    with pytest.raises(ValueError, match="lack 'ratio'"):
        R.served(timeline([("fused", 25.0, 27.5, old_state)]))


def test_the_command_prints_a_table_per_timeline(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    prior = FusedPrice(prior_holds=True).to_dict()
    timeline([("fused", 25.0, 26.0, prior), ("fused", 46.0, 49.0, prior)]).to_json(path, orient="records", lines=True)
    assert R.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "| (20.0, 30.0] | 1 | 1 | 1 | 1 | 1 | 1 | 1 |" in out and "| (45.0, 50.0] | 1 | 3 | 3 | 3 | 3 | 3 | 3 |" in out


def test_the_per_size_replay_prices_up_the_size_that_runs_over_the_line():
    """Batches of 500 tokens (padded to 512) served 1 ms under their base price, of 600 (to 640)
    3 ms over: the line (1 ms + base, residuals -2 and +2, P90 margin 2) prices the 640s at what
    they served and the 512s 4 ms high; learning each size's excess, the replay prices the 640s
    2 ms higher and leaves the 512s."""
    prior = FusedPrice(prior_holds=True).to_dict()
    rows = []
    for _ in range(48):
        rows += [("fused", 24.0, 23.0, prior, 500), ("fused", 27.0, 30.0, prior, 600)]
    t = pd.DataFrame([{"reason": r, "t_decode_worst_ms": p, "measured_decode_ms": m, "fused_price": s,
                       "extend_tokens": n} for r, p, m, s, n in rows])
    got = R.served(t)
    assert list(got["size"][:2]) == [512, 640]
    line, sized = got.measured_ms - R.replay(got), got.measured_ms - R.replay(got, per_size=True)
    assert list(line[64:66]) == pytest.approx([-4.0, 0.0]) and list(sized[64:66]) == pytest.approx([-4.0, -2.0])
    assert R.padded(5000) is None and R.padded(float("nan")) is None and R.padded(512) == 512
