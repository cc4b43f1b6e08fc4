"""bench.analysis.tbt_tail: which iterations' token gaps went over the TBT SLO, and why."""
import json

import pandas as pd
import pytest

from bench.analysis import tbt_tail as T


def timeline(*r):
    cols = ["time", "reason", "new_prefill", "decode_bs", "t_decode_worst_ms", "host_ms"]
    return pd.DataFrame(r, columns=cols)


ROWS = (
    (1.00, "fused", 0, 10, 25.0, {"fused_launch": 10.0, "result": 14.0}),        # 24 ms: under
    (1.03, "fused", 0, 10, 25.0, {"fused_launch": 27.0, "result": 5.0}),         # 32 ms: over, 7 past its price
    (1.06, "best-fit", 1, 20, 20.0, {"plan": 5.0, "prefill_launch": 26.0}),      # a batch starts: 31 ms
    (1.09, "best-fit", 0, 20, 20.0, {"sync": 20.0, "result": 2.0}),              # 22 ms
    (1.11, "prefill-only", 1, 0, 0.0, None),                                     # no token: left out
    (5.00, "decode-only", 0, 30, 10.0, {"sync": 9.0, "result": 1.0}),            # 10 ms
)


def test_each_decoding_iteration_is_one_gap_of_its_laps_and_a_started_batch_is_its_own_kind():
    g = T.gaps(timeline(*ROWS))
    assert list(g.kind) == ["fused", "fused", "best-fit+new", "best-fit", "decode-only"]
    assert list(g.gap_ms) == [24.0, 32.0, 31.0, 22.0, 10.0] and list(g.tokens) == [10, 10, 20, 20, 30]
    assert list(T.gaps(timeline(*ROWS), lo=1.05, hi=2.0).kind) == ["best-fit+new", "best-fit"]


def test_the_tail_is_counted_in_tokens_per_kind_with_the_laps_that_made_it():
    rows = {r["kind"]: r for r in T.tail_by_kind(T.gaps(timeline(*ROWS)), 30.0)}
    assert rows["best-fit+new"] == {"kind": "best-fit+new", "tokens": 20, "over": 20, "share": 1.0,
                                    "laps": {"prefill_launch": 26.0, "plan": 5.0}}
    assert rows["fused"]["over"] == 10 and rows["fused"]["share"] == 0.5
    assert rows["fused"]["laps"] == {"fused_launch": 27.0, "result": 5.0}
    assert rows["decode-only"]["over"] == 0 and rows["decode-only"]["laps"] == {}
    # token-weighted: 30 of 90 tokens at 10 ms, 20 at 22, 10 at 24, 20 at 31, 10 at 32
    assert T.weighted_quantiles([10, 22, 24, 31, 32], [30, 20, 10, 20, 10], (0.3, 0.5, 0.85, 0.9)) == [10, 22, 31, 32]


def test_the_command_prints_the_table_and_the_fused_overrun(tmp_path, capsys):
    p = tmp_path / "t.jsonl"
    p.write_text("".join(json.dumps(dict(zip(["time", "reason", "new_prefill", "decode_bs", "t_decode_worst_ms",
                                                "host_ms"], r))) + "\n" for r in ROWS))
    assert T.main([str(p), "--tbt", "30"]) == 0
    out = capsys.readouterr().out
    assert "over 30 ms: 30 of 90 tokens (33.33%)" in out
    assert "| best-fit+new | 20 | 20 | 100.0% | prefill_launch 26.0, plan 5.0 |" in out
    assert "fused gap less its price (ms): P50 3.0, P90 6.2, P99 6.9 (2 iterations)" in out
    assert "within a streak (ms): P50 7.0, P90 7.0, P99 7.0 (1 iterations)" in out
    assert "a streak's first (ms): P50 -1.0, P90 -1.0, P99 -1.0 (1 iterations)" in out


def test_a_streaks_first_fused_iteration_is_told_apart():
    """From the row before it, or the server's own ``fused_streak`` flag where recorded."""
    g = T.gaps(timeline(*ROWS))
    assert list(g.starts_streak) == [True, False, False, False, False]
    assert list(T.fused_overruns(g, starts=True)) == [-1.0] and list(T.fused_overruns(g, starts=False)) == [7.0]
    t = timeline(*ROWS).assign(fused_streak=[True, False, None, None, None, None])  # the server's view wins
    assert list(T.gaps(t).starts_streak) == [False, True, False, False, False]


def test_a_timeline_without_laps_is_refused_with_what_to_do(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps({"time": 1.0, "reason": "decode-only", "decode_bs": 3}) + "\n")
    with pytest.raises(SystemExit):
        T.main([str(p), "--tbt", "30"])
