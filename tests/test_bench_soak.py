"""bench.soak: pieces against one live server (the stub), samples, nothing lost."""
import json
import os

import pytest

from bench import soak, stub_server


def test_outcome_counts_every_request():
    recs = [{"ok": True}, {"ok": False, "error": "http_400: bad"}, {"ok": False, "error": None}]
    assert soak.outcome(recs) == {"sent": 3, "completed": 1, "errored": 1, "lost": 1}


def test_slope_per_minute():
    assert soak._slope_per_min([0, 60, 120, 180], [10, 12, 14, 16]) == pytest.approx(2.0)
    assert soak._slope_per_min([0, 60], [1, 2]) is None  # too few samples


def test_two_pieces_against_one_server(tmp_path):
    tl = tmp_path / "timeline.jsonl"
    tl.write_text("x" * 100)
    out = tmp_path / "soak"
    with stub_server.in_thread(stub_server.StubConfig(ttft_s=0.005, tbt_s=0.001)) as url:
        for _ in range(2):
            rec = soak.run_piece(url, out, rate=4, seconds=1.5, pid=os.getpid(), timeline=tl, chat_share=0.5,
                                 sample_s=0.3, drain_s=20, think_s=0.05)
            assert rec["lost"] == 0 and rec["errored"] == 0 and rec["sent"] == rec["completed"] > 0
    assert [json.loads(x)["piece"] for x in (out / "pieces.jsonl").read_text().splitlines()] == [0, 1]
    rows = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    assert {r["piece"] for r in rows} == {0, 1}
    assert all(r["rss_mib"] > 0 and r["fds"] > 0 and r["timeline_bytes"] == 100 for r in rows)
    rep = soak.report(out, warmup_s=0)
    assert rep["pieces"] == 2 and rep["lost"] == 0 and rep["sent"] == rep["completed"]
    assert rep["timeline_bytes"] == {"min": 100, "max": 100, "slope_per_min": pytest.approx(0.0, abs=1e-6)}


def test_server_gauges_sum_labelled_series_and_skip_others():
    text = ('# HELP sglang:num_running_reqs The number of running requests.\n'
            '# TYPE sglang:num_running_reqs gauge\n'
            'sglang:num_running_reqs{engine_type="unified",model_name="m",tp_rank="0"} 3.0\n'
            'sglang:num_running_reqs{engine_type="unified",model_name="m",tp_rank="1"} 2.0\n'
            'sglang:num_running_reqs_offline_batch 7.0\n'
            'sglang:num_queue_reqs 4.0\n'
            'sglang_mux:cuda_allocated_bytes 6.5e+10\n'
            'sglang_mux:cuda_alloc_retries 1.0\n')
    assert soak.parse_gauges(text) == {"num_running_reqs": 5.0, "num_queue_reqs": 4.0,
                                       "cuda_allocated_bytes": 6.5e10, "cuda_alloc_retries": 1.0}
