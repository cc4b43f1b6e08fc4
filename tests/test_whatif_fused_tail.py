"""bench.analysis.whatif_fused_tail: the served draws it replays, read from the stored timelines."""
import numpy as np
import pytest

from bench.analysis import whatif_fused_tail as W


def test_the_served_draws_are_the_timelines_fused_overruns_and_batch_starts():
    timeline = W.CELLS["capped conversation (<= 8000)"][0]
    o, st = W.overruns(timeline), W.start_hosts(timeline)
    # as bench.analysis.tbt_tail reports them for this timeline: 1,688 fused, P50 -0.8, P99 5.2 ms
    assert len(o) == 1688 and np.median(o) == pytest.approx(-0.8, abs=0.05)
    assert np.percentile(o, 99) == pytest.approx(5.2, abs=0.05)
    assert len(st) == 92 and min(st) >= 0.0 and np.median(st) == pytest.approx(8.1, abs=0.05)


def test_the_fused_host_draws_for_the_jitter_are_gaps_less_the_measured_time():
    """Beside sim.fused_jitter a fused iteration's host draw is its gap less its measured GPU time,
    not less its planned price: on the 70B at TP 2 the planned price held a ~4 ms margin, and the
    overruns ran every simulated iteration that much short a second time."""
    timeline = "bench/results/h200x4_s52_2026-11-28/cap70/mux-hybrid.timeline.jsonl.xz"
    o, h = W.overruns(timeline), W.fused_hosts(timeline)
    assert len(h) == len(o) == 491
    assert np.median(o) == pytest.approx(-3.7, abs=0.05) and np.median(h) == pytest.approx(-0.05, abs=0.05)


def test_quantiles_replay_the_served_column_at_each_budget_quantile(monkeypatch, capsys):
    """--quantiles plays the hybrid with the served overruns and batch starts once per quantile and
    rate, telling the simulator each quantile; a quantile outside (0, 1) is refused."""
    calls = []
    monkeypatch.setattr(W.M, "simulator_inputs", lambda: ("est", "jit", "host", "corun"))
    monkeypatch.setattr(W, "CELLS", {"code": (W.CELLS["code"][0], (17, 20))})

    def point(est, jit, host, corun, w, tbt, name, rate, tmp, fused_host=None, start_host=None, **kw):
        calls.append((name, rate, kw["fused_host_quantile"], len(fused_host), len(start_host)))
        return {"ok": rate < 20, "ttft_p99_s": 1.0, "tbt_p99_ms": 29.0 + kw["fused_host_quantile"]}

    monkeypatch.setattr(W.M, "run_point", point)
    assert W.main(["--quantiles", "0.9,0.99"]) == 0
    o = len(W.overruns(W.CELLS["code"][0]))
    assert calls == [("hybrid", r, q, o, 4) for q in (0.9, 0.99) for r in (17, 20)]
    out = capsys.readouterr().out
    assert "| 0.9 | ✓ 1.00 s, 29.9 ms | ✗ 1.00 s, 29.9 ms |" in out
    with pytest.raises(SystemExit) as e:
        W.main(["--quantiles", "0.5,1.5"])
    assert e.value.code == 2


def test_stalls_replay_each_cell_with_stalls_booked_and_left_out(monkeypatch, capsys):
    """--stalls plays the hybrid twice a rate (the server's budget before and now) beside chunked
    512, on session 43's host's overruns too, whose stall cluster it reports."""
    calls = []
    monkeypatch.setattr(W.M, "simulator_inputs", lambda: ("est", "jit", "host", "corun"))
    s43 = "capped conversation (<= 8000), session 43's host"
    monkeypatch.setattr(W, "STALL_CELLS", {s43: (W.STALL_CELLS[s43][0], (2.9,))})

    def point(est, jit, host, corun, w, tbt, name, rate, tmp, fused_host=None, start_host=None, **kw):
        calls.append((name, rate, kw.get("fused_stalls_apart"), w is W.M.WORKLOADS["capped conversation (<= 8000)"]))
        return {"ok": True, "ttft_p99_s": 1.0, "tbt_p99_ms": 29.0}

    monkeypatch.setattr(W.M, "run_point", point)
    assert W.main(["--stalls"]) == 0
    assert calls == [("hybrid", 2.9, False, True), ("hybrid", 2.9, True, True), ("chunked 512 + mixed", 2.9, None, True)]
    out = capsys.readouterr().out
    # as bench.analysis.tbt_tail reports that timeline: 2,900 fused, 1.34 % over 15 ms, P99 19.6 / 8.2 ms
    assert "2900 fused overruns, 1.34% over 15 ms; P99 19.6 ms, 8.2 ms without those" in out


def test_borrowed_overruns_are_another_runs_measured_gaps_less_their_price(monkeypatch, capsys):
    """--overruns-from plays every cell with one served run's fused overruns (the GPU-measured gap
    less the planned price, within --span seconds), beside chunked 512; a run without fused rows
    there is refused."""
    s45 = "bench/results/profile_s45_2026-11-27/mux-hybrid.timeline.jsonl.xz"
    o = W.measured_overruns(s45, 36.5)
    assert len(o) == 676 and np.median(o) == pytest.approx(-2.0, abs=0.05)  # before its profiler started
    assert len(W.measured_overruns(s45)) > len(o)
    with pytest.raises(W.cli.UsageError, match="no fused iteration"):
        W.measured_overruns(s45, 1.0)
    monkeypatch.setattr(W.M, "simulator_inputs", lambda: ("est", "jit", "host", "corun"))
    monkeypatch.setattr(W, "CELLS", {"code": (W.CELLS["code"][0], (17, 20))})
    calls = []

    def point(est, jit, host, corun, w, tbt, name, rate, tmp, fused_host=None, start_host=None, **kw):
        calls.append((name, rate, None if fused_host is None else len(fused_host)))
        return {"ok": True, "ttft_p99_s": 1.0, "tbt_p99_ms": 29.0}

    monkeypatch.setattr(W.M, "run_point", point)
    assert W.main(["--overruns-from", s45, "--span", "36.5"]) == 0
    assert calls == [("hybrid", 17, 676), ("chunked 512 + mixed", 17, None), ("hybrid", 20, 676),
                     ("chunked 512 + mixed", 20, None), ("hybrid", 22.0, 676), ("chunked 512 + mixed", 22.0, None)]
    assert "| 22 | ✓ 1.00 s, 29.0 ms | ✓ 1.00 s, 29.0 ms |" in capsys.readouterr().out
