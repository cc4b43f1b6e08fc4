"""bench.analysis.prefill_wall: layer-wise batches' wall time against their planned T_P."""
import pandas as pd
import pytest

from bench.analysis import prefill_wall as W


def rows(*r):
    return pd.DataFrame(r, columns=["time", "new_prefill", "prefill_sms", "reason", "t_prefill_ms", "preempt"])


def test_a_batch_runs_from_its_formation_to_the_first_row_without_prefill():
    t = rows((0.000, 1, 84, "best-fit", 40.0, False),   # a: formed, planned 40 ms
             (0.030, 0, 68, "best-fit", 0.0, False),    # its partition shrinks
             (0.090, 0, 0, "decode-only", 0.0, False),  # done: 90 ms
             (0.100, 1, 100, "best-fit", 20.0, False),  # b: formed
             (0.130, 1, 84, "best-fit", 10.0, False),   # c formed after it: b took 30 ms
             (0.140, 0, 0, "fused", 0.0, False),        # c took 10 ms
             (0.200, 1, 84, "best-fit", 30.0, False),   # d: still running at the end, left out
             (0.210, 0, 84, "best-fit", 0.0, False))
    assert W.batch_walls(t) == [pytest.approx(x) for x in [(40.0, 90.0), (20.0, 30.0), (10.0, 10.0)]]


def test_a_preempted_batch_and_a_stall_are_left_out():
    t = rows((0.0, 1, 84, "best-fit", 40.0, False),
             (0.05, 1, 84, "preempt+best-fit", 5.0, True),  # preempts the first: only it counts
             (0.06, 0, 0, "decode-only", 0.0, False),
             (1.0, 1, 84, "best-fit", 40.0, False),
             (7.0, 0, 0, "decode-only", 0.0, False))        # 6 s: a stall
    assert W.batch_walls(t) == [pytest.approx((5.0, 10.0))]


def test_cli_prints_the_sums_and_refuses_a_missing_file(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    rows((0.0, 1, 84, "best-fit", 40.0, False), (0.09, 0, 0, "decode-only", 0.0, False),
         (0.1, 1, 84, "best-fit", 20.0, False), (0.13, 0, 0, "decode-only", 0.0, False)
         ).to_json(path, orient="records", lines=True)
    W.main([str(path)])
    assert capsys.readouterr().out.strip() == f"{path}: 2 batches, sum wall / sum planned 2.000, median wall / planned 1.88"
    with pytest.raises(SystemExit) as e:
        W.main([str(tmp_path / "none.jsonl")])
    assert e.value.code == 2 and "not a mux timeline" in capsys.readouterr().err
