"""bench.soak: pieces against one live server (the stub), samples, nothing lost."""
import json
import os
import subprocess

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
    assert rep["arrival_minutes"] == round(3.0 / 60, 1)
    assert rep["timeline_bytes"] == {"min": 100, "max": 100, "slope_per_min": pytest.approx(0.0, abs=1e-6)}


def test_server_gauges_sum_labelled_series_and_skip_others():
    text = ('# HELP sglang:num_running_reqs The number of running requests.\n'
            '# TYPE sglang:num_running_reqs gauge\n'
            'sglang:num_running_reqs{engine_type="unified",model_name="m",tp_rank="0"} 3.0\n'
            'sglang:num_running_reqs{engine_type="unified",model_name="m",tp_rank="1"} 2.0\n'
            'sglang:num_running_reqs_offline_batch 7.0\n'
            'sglang:num_queue_reqs 4.0\n'
            'sglang_mux:cuda_allocated_bytes 6.5e+10\n'
            'sglang_mux:cuda_alloc_retries 1.0\n'
            'sglang_mux:preemptions_total{model_name="m"} 2.0\n'
            'sglang_mux:preemptions_created{model_name="m"} 1.7e+09\n')
    assert soak.parse_gauges(text) == {"num_running_reqs": 5.0, "num_queue_reqs": 4.0,
                                       "cuda_allocated_bytes": 6.5e10, "cuda_alloc_retries": 1.0,
                                       "preemptions": 2.0}


def test_report_spans_overlapping_pieces(tmp_path):
    """The next piece starts when the previous one's arrivals end, not its tail: the soak's
    minutes are first start to last end, not the sum of the pieces' walls."""
    out = tmp_path / "soak"
    out.mkdir()
    pieces = [{"piece": 0, "start": 1000.0, "wall_s": 540.0, "arrival_s": 480, "sent": 10, "completed": 9,
               "errored": 1, "lost": 0},
              {"piece": 1, "start": 1480.0, "wall_s": 520.0, "arrival_s": 480, "sent": 12, "completed": 12,
               "errored": 0, "lost": 0}]
    (out / "pieces.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pieces))
    (out / "samples.jsonl").write_text(json.dumps({"time": 1000.0, "rss_mib": 1.0}) + "\n")
    rep = soak.report(out)
    assert (rep["minutes"], rep["arrival_minutes"], rep["sent"], rep["errored"]) == (16.7, 16.0, 22, 1)


def test_a_piece_longer_than_the_shipped_trace_is_refused(tmp_path, monkeypatch):
    """At 3 conversation req/s a 480 s piece needs 1440 rows; the shipped slice (what the GPU
    machine has) has 1000, so its arrivals would stop after 333 s, below the piece's rate."""
    monkeypatch.setenv("SGLANG_MUX_TRACES", str(tmp_path / "none"))
    with pytest.raises(ValueError, match="pieces of at most 333 s"):
        soak.piece_workloads(6.0, 480, 0.5, 0, (300, 30000))
    assert len(soak.piece_workloads(6.0, 300, 0.5, 0, (300, 30000))) == 2
    with stub_server.in_thread() as url, pytest.raises(SystemExit):
        soak.main(["--out", str(tmp_path), "--rate", "6", "--piece-s", "480", "--server-url", url])
    assert not (tmp_path / "pieces.jsonl").exists()


def test_gpu_memory_is_read_on_the_visible_gpus_only(monkeypatch):
    calls = []

    def fake_run(cmd, **kw):
        calls.append(cmd)
        out = "1000\n" if "-i" in cmd else "1000\n2000\n3000\n4000\n"
        return subprocess.CompletedProcess(cmd, 0, stdout=out, stderr="")

    monkeypatch.setattr(soak.subprocess, "run", fake_run)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    assert soak.gpu_mem_mib() == 1000.0
    assert calls[-1][-2:] == ["-i", "2"]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert soak.gpu_mem_mib() == 10000.0  # a one-GPU machine: every GPU is the server's
    assert "-i" not in calls[-1]


def test_report_says_when_memory_settled(tmp_path):
    """An allocator's reserve that steps up and stays reads as growth on the whole run's slope; the
    report also says from which minute a memory series stayed within 0.5 % of its last value."""
    out = tmp_path / "soak"
    out.mkdir()
    (out / "pieces.jsonl").write_text(json.dumps({"piece": 0, "start": 0.0, "wall_s": 600.0, "arrival_s": 540,
                                                  "sent": 1, "completed": 1, "errored": 0, "lost": 0}) + "\n")
    mem = [1000, 1000, 1200, 1150, 1400, 1398, 1401, 1400, 1400, 1399]  # a sample a minute
    fds = [10, 30, 10, 30, 10, 30, 10, 30, 10, 30]
    (out / "samples.jsonl").write_text("".join(json.dumps({"time": 60.0 * i, "gpu_mem_mib": m, "fds": f}) + "\n"
                                               for i, (m, f) in enumerate(zip(mem, fds))))
    rep = soak.report(out, warmup_s=0)
    assert rep["gpu_mem_mib"]["last"] == 1399 and rep["gpu_mem_mib"]["settled_from_min"] == 4.0
    assert rep["gpu_mem_mib"]["slope_per_min"] > 40  # what the slope alone says
    assert "settled_from_min" not in rep["fds"]  # not memory: it follows the requests in flight
    (out / "samples.jsonl").write_text("".join(json.dumps({"time": 60.0 * i, "gpu_mem_mib": 1000 + 10 * i}) + "\n"
                                               for i in range(10)))
    assert soak.report(out, warmup_s=0)["gpu_mem_mib"]["settled_from_min"] == 9.0  # still growing: only the last sample


def test_a_mixed_soak_piece_is_the_mixed_workload_with_its_own_salt():
    """Issue 71's 20-minute run at the mixed workload's goodput: each piece is MuxWise's mixed
    traffic (half sharegpt, half loogle) at the rate, salted by its piece, with no trace to run out."""
    (wl,) = soak.piece_workloads(0.6, 480, 0.0, 2, (300, 30000), workload="mixed")
    assert wl.options["workload"] == "mixed" and wl.options["salt"] == "soak-piece=2"
    assert len(wl.requests) == round(0.6 * 480) and max(r.prompt_len for r in wl.requests) > 8000
    other = soak.piece_workloads(0.6, 480, 0.0, 3, (300, 30000), workload="mixed")[0]
    assert [r.prompt_len for r in other.requests] != [r.prompt_len for r in wl.requests]
    both = soak.piece_workloads(0.6, 480, 0.5, 2, (300, 30000), workload="mixed")
    assert [w.options["workload"] for w in both] == ["mixed", "chat"]
