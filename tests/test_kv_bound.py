"""bench.analysis.kv_bound: Little's law over a workload's prompt and output lengths."""
import numpy as np
import pytest

from bench.analysis import kv_bound


def test_the_bound_is_the_pool_over_the_token_seconds_a_request_holds():
    # 1,000 prompt tokens held for 1,000 gaps, plus 1,000 decoded tokens held half as long on
    # average: 1.5 M token-gaps; at 20 ms a gap, 30,000 token-seconds a request
    prompt, output = np.array([1000.0]), np.array([1000.0])
    assert kv_bound.rate_bound(prompt, output, 300_000, 20) == pytest.approx(10.0)
    assert kv_bound.rate_bound(prompt, output, 300_000, 40) == pytest.approx(5.0)
    # long answers dominate: the same pool holds far fewer 32K-token answers
    assert kv_bound.rate_bound(np.array([700.0]), np.array([32000.0]), 300_000, 20) < 0.03


def test_the_table_has_a_row_per_gap_and_pool_and_the_drain_of_the_longest_output():
    text = kv_bound.render(np.array([100.0, 300.0]), np.array([1000.0, 4000.0]), [10, 20], [100_000, 200_000])
    lines = text.splitlines()
    assert lines[0].startswith("2 requests: prompt mean 200, output mean 2500, P99 3970, max 4000, at the max: 50.0%")
    assert lines[2] == "| token gap (ms) | KV pool (tokens) | rate bound (req/s) | drain of a 4K-token output (s) |"
    rows = lines[4:]
    assert len(rows) == 4 and rows[0].startswith("| 10 | 100,000 |") and rows[0].endswith("| 40 |")
    assert rows[3].startswith("| 20 | 200,000 |") and rows[3].endswith("| 80 |")


def test_openthoughts_answers_bound_it_below_half_a_request_a_second(capsys):
    assert kv_bound.main(["--n", "300", "--gaps", "20", "--pools", "423494"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| 20 |"))
    assert 0.1 < float(row.split("|")[3]) < 0.5
    with pytest.raises(SystemExit):
        kv_bound.main(["--workload", "nonesuch"])
