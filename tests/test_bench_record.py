"""bench.record: one point of a run directory into a figures file."""
import json

import pytest

from bench import record
from sglang_mux.cli import UsageError


def make_run(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    summary = {"device": "GPU X", "date": "d0", "command": "python -m bench.run LAST", "slo": {"tbt_ms": 50},
               "systems": {"mux": {"points": [{"rate": 2.0, "workload": {"workload": "conversation"},
                                               "summary": {"n": 3, "n_ok": 3, "n_failed": 0, "tbt_ms": {"p99": 42.0},
                                                           "ttft_ms": {"p99": 900.0}}}]}}}
    (run / "summary.json").write_text(json.dumps(summary))
    lines = [{"decode_sms": 132, "prefill_sms": 0}, {"decode_sms": 16, "prefill_sms": 116},
             {"decode_sms": 16, "prefill_sms": 116}, {"decode_sms": 0, "prefill_sms": 0},
             {"decode_sms": 48, "prefill_sms": 84}]
    text = "".join(json.dumps(x) + "\n" for x in lines)
    (run / "mux.timeline.jsonl").write_text("garbage-before\n" + text)
    start = len("garbage-before\n")
    (run / "mux__2.meta.json").write_text(json.dumps({
        "started": "t-point", "command": "python -m bench.run THIS", "server_command": ["srv"],
        "timeline_bytes": [start, start + len(text)]}))
    (run / "mux__2.metrics.prom").write_text(
        "# HELP sglang_mux:preemptions_total x\nsglang_mux:preemptions_total 7.0\n"
        'sglang_mux:decision_seconds_bucket{le="1e-05"} 3.0\n'
        'sglang_mux:decisions_total{reason="best-fit"} 4.0\n')
    return run


def test_point_entry_reads_timeline_range_and_metrics(tmp_path):
    e = record.point_entry(make_run(tmp_path), "mux", 2)
    assert e["command"] == "python -m bench.run THIS" and e["date"] == "t-point"
    # idle decisions (D0/P0) are not partitions; order by decode SMs
    assert list(e["decisions_by_partition"].items()) == [("D16/P116", 2), ("D48/P84", 1), ("D132/P0", 1)]
    assert e["n_multiplexed_configs_used"] == 2        # D16/P116 and D48/P84; full-GPU modes excluded
    assert e["metrics_after_point"] == {"sglang_mux:preemptions_total": 7.0,
                                        'sglang_mux:decisions_total{reason="best-fit"}': 4.0}
    assert e["summary"]["tbt_ms"] == {"p99": 42.0}


def test_main_merges_and_errors_name_what_exists(tmp_path):
    run = make_run(tmp_path)
    out = tmp_path / "fig.json"
    out.write_text(json.dumps({"keep": 1}))
    assert record.main(["--run", str(run), "--system", "mux", "--rate", "2", "--into", str(out),
                        "--key", "k", "--note", "n", "--command", "override"]) == 0
    doc = json.loads(out.read_text())
    assert doc["keep"] == 1 and doc["points"]["k"]["note"] == "n" and doc["points"]["k"]["command"] == "override"
    with pytest.raises(UsageError, match="rates"):
        record.main(["--run", str(run), "--system", "mux", "--rate", "3", "--into", str(out), "--key", "k"])
    with pytest.raises(UsageError, match="has no system 'sglang'"):
        record.main(["--run", str(run), "--system", "sglang", "--rate", "2", "--into", str(out), "--key", "k"])
