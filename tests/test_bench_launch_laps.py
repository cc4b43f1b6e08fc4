"""bench.analysis.launch_laps: a fused batch's launch is read from the row before it."""
import json

import pandas as pd
import pytest

from bench.analysis import launch_laps as L

COLS = ["time", "reason", "extend_tokens", "measured_decode_ms", "host_ms", "os_ms"]
ROWS = (
    (10.00, "decode-only", 0, 8.0, {"fused_launch": 7.0, "result": 3.0}, {"steal": 0.0}),  # launches the next
    (10.02, "fused", 200, 11.0, {"fused_launch": 40.0, "result": 4.0}, {"steal": 10.0}),   # its launch: 7
    (10.06, "fused", 300, 41.0, {"fused_launch": 2.0, "result": 4.0}, {"steal": 0.0}),     # its launch: 40
    (10.08, "decode-only", 0, 8.5, None, None),
    (10.09, "fused", 100, 12.0, {"fused_launch": 8.0}, None),                              # row before: no laps
    (50.00, "fused", 400, 14.0, {"fused_launch": 9.0}, {"steal": 0.0}),                    # launch 8, past 30 s
)


def test_each_fused_gap_gets_the_launch_lap_of_the_row_before_it():
    f = L.fused_launches(pd.DataFrame(ROWS, columns=COLS))
    assert list(f.launch_ms) == [7.0, 40.0, 8.0] and list(f.gap_ms) == [11.0, 41.0, 14.0]
    assert list(f.tokens) == [200, 300, 400] and list(f.steal) == [False, True, False]
    s = L.summary(f, tbt_ms=30.0)
    assert s["fused"] == 3 and s["over"] == 1 and s["steal"] == 1
    assert s["launch_ms"][0] == 8.0 and s["launch_ms"][3] == 40.0 and s["gap_ms"][0] == 14.0


def test_span_keeps_the_first_seconds_only():
    f = L.fused_launches(pd.DataFrame(ROWS, columns=COLS), span_s=30.0)
    assert list(f.gap_ms) == [11.0, 41.0]


def test_cli_reads_a_timeline_and_refuses_one_without_fused_rows(tmp_path, capsys):
    p = tmp_path / "t.jsonl"
    p.write_text("\n".join(json.dumps(dict(zip(COLS, r))) for r in ROWS) + "\n")
    assert L.main([str(p), "--tbt", "30"]) == 0
    assert "3 fused iterations" in capsys.readouterr().out
    q = tmp_path / "d.jsonl"
    q.write_text(json.dumps({"time": 1.0, "reason": "decode-only", "decode_bs": 3}) + "\n")
    with pytest.raises(SystemExit):
        L.main([str(q)])
    assert "lacks" in capsys.readouterr().err
