"""bench.timeline_profile: time shares, estimate vs measured, host gaps of one point."""
import json
from pathlib import Path

import pytest

from bench import timeline_profile as TP
from sglang_mux.cli import UsageError


def write_point(tmp_path, rows, before=()):
    run = tmp_path / "run"
    run.mkdir()
    head = "".join(json.dumps(r) + "\n" for r in before)
    body = "".join(json.dumps(r) + "\n" for r in rows)
    (run / "mux.timeline.jsonl").write_text(head + body)
    (run / "mux__4.meta.json").write_text(json.dumps({"timeline_bytes": [len(head), len(head) + len(body)]}))
    return run


def rec(t, d, p, bs, worst, meas):
    return {"time": t, "decode_sms": d, "prefill_sms": p, "decode_bs": bs, "t_decode_worst_ms": worst,
            "measured_decode_ms": meas}


def test_profile_of_one_point(tmp_path):
    rows = [rec(0.00, 48, 84, 40, 40.0, 36.0), rec(0.04, 48, 84, 40, 40.0, 38.0),
            rec(0.08, 132, 0, 10, 10.0, 12.0), rec(0.09, 132, 0, 10, 10.0, 9.0), rec(0.10, 48, 84, 40, 40.0, 39.0)]
    other = [rec(-5.0, 16, 116, 1, 5.0, 50.0)]          # another point's decision: not counted
    run = write_point(tmp_path, rows, before=other)
    p = TP.profile(TP.point_timeline(run, "mux", 4))
    assert p["decisions"] == 5 and p["span_s"] == pytest.approx(0.10)
    assert list(p["configs"]) == ["D48/P84", "D132/P0"]  # by time: 0.08 s vs 0.02 s
    assert p["configs"]["D48/P84"]["share"] == pytest.approx(0.8)
    assert p["configs"]["D132/P0"]["measured_decode_ms"] == pytest.approx(10.5)
    r = p["measured_over_worst"]
    assert r["max"] == pytest.approx(1.2) and r["share_above_1"] == pytest.approx(0.2)
    assert r["above_1_by_config"] == {"D132/P0": 1}
    assert (r["p50_alone"], r["p50_corun"]) == (pytest.approx(1.05), pytest.approx(0.95))  # the two the P50 mixes
    assert "P50 decode alone 1.050, beside a prefill 0.950" in TP.render(p)
    # host gaps: 40-36, 40-38, 10-12, 10-9 ms (the last decision has no successor)
    assert p["host_gap_ms"]["p50"] == pytest.approx(1.5)
    assert "D48/P84 | 80.0 %" in TP.render(p)


def test_host_phases_name_the_phase_of_the_tail(tmp_path):
    rows = []
    for i in range(40):
        r = rec(i * 0.04, 48, 84, 40, 40.0, 30.0)
        # 30 ms on the GPU, of which the loop waits 28 in sync; one iteration in 20 forms a
        # prefill batch for 15 ms before the decode launch
        r["host_ms"] = {"recv": 0.5, "plan": 15.0 if i % 20 == 0 else 0.5, "sync": 28.0, "result": 1.0}
        rows.append(r)
    rows.append(rec(1.6, 48, 84, 40, 40.0, 30.0))   # an older server's row: no laps, skipped
    p = TP.profile(TP.point_timeline(write_point(tmp_path, rows), "mux", 4))
    hp = p["host_phases_ms"]
    assert hp["iterations"] == 40 and hp["tail_iterations"] == 2
    assert hp["host_p50"] == pytest.approx(0.0) and hp["phases"]["plan"]["tail_mean"] == pytest.approx(15.0)
    assert hp["phases"]["recv"]["tail_mean"] == pytest.approx(0.5)
    assert "| plan | 0.50 | " in TP.render(p)


def test_point_without_timeline_says_so(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    (run / "mux__4.meta.json").write_text(json.dumps({"timeline_bytes": None}))
    with pytest.raises(UsageError, match="no dispatcher timeline"):
        TP.point_timeline(run, "mux", 4)
    with pytest.raises(UsageError, match="no point mux@2"):
        TP.point_timeline(run, "mux", 2)


def test_prefill_stream_counters_are_per_point(tmp_path):
    run = write_point(tmp_path, [rec(0.0, 48, 84, 4, 40.0, 36.0)])
    prom = ("sglang_mux:prefill_busy_seconds_total {b}\nsglang_mux:prefill_idle_seconds_total {i}\n"
            "sglang_mux:prefill_latency_ratio_sum {s}\nsglang_mux:prefill_latency_ratio_count {n}\n")
    (run / "mux__2.metrics.prom").write_text(prom.format(b=10.0, i=1.0, s=20.0, n=20))
    (run / "mux__4.metrics.prom").write_text(prom.format(b=40.0, i=1.5, s=53.0, n=50))
    ps = TP.prefill_stream(run, "mux", 4)           # minus the 2 req/s point's counters
    assert ps == {"busy_s": 30.0, "idle_s": 0.5, "idle_share": pytest.approx(0.5 / 30.5, abs=1e-4),
                  "measured_over_estimate_mean": 1.1, "measured_over_estimate_p50": None}
    assert TP.prefill_stream(run, "mux", 2)["busy_s"] == 10.0
    assert TP.prefill_stream(run, "mux", 8) is None  # no scrape for that point
    p = TP.profile(TP.point_timeline(run, "mux", 4))
    p["prefill_stream"] = ps
    assert "0.50 s idle between chunks of a batch (1.6 %)" in TP.render(p)


def test_prefill_stream_base_is_the_previous_point_of_the_same_server(tmp_path):
    """Rates are not run order: 3 and 4 ran on one server, then a restart ran 3.5 (its range
    begins after the new server's warm-up records) and 3.75 right after it. 3.5 must not
    subtract the 3 req/s point of the earlier server, and 3.75 subtracts 3.5."""
    run = tmp_path / "run"
    run.mkdir()
    prom = ("sglang_mux:prefill_busy_seconds_total {b}\nsglang_mux:prefill_idle_seconds_total 0\n"
            "sglang_mux:prefill_latency_ratio_sum 1\nsglang_mux:prefill_latency_ratio_count 1\n")
    for rate, tb, busy in ((3, [100, 200], 40.0), (4, [200, 300], 90.0),
                           (3.5, [350, 500], 45.0), (3.75, [500, 650], 95.0)):
        (run / f"mux__{rate:g}.meta.json").write_text(json.dumps({"timeline_bytes": tb}))
        (run / f"mux__{rate:g}.metrics.prom").write_text(prom.format(b=busy))
    assert TP.prefill_stream(run, "mux", 3.5)["busy_s"] == 45.0    # first point of its server
    assert TP.prefill_stream(run, "mux", 3.75)["busy_s"] == 50.0   # minus 3.5, not minus 4
    assert TP.prefill_stream(run, "mux", 4)["busy_s"] == 50.0      # minus 3


def test_prefill_ratio_median_from_the_histogram(tmp_path):
    run = write_point(tmp_path, [rec(0.0, 48, 84, 4, 40.0, 36.0)])
    prom = ("# TYPE sglang_mux:prefill_latency_ratio histogram\n"
            "sglang_mux:prefill_latency_ratio_bucket{{le=\"0.9\"}} {a}\n"
            "sglang_mux:prefill_latency_ratio_bucket{{le=\"1.0\"}} {b}\n"
            "sglang_mux:prefill_latency_ratio_bucket{{le=\"1.1\"}} {c}\n"
            "sglang_mux:prefill_latency_ratio_bucket{{le=\"+Inf\"}} {c}\n"
            "sglang_mux:prefill_latency_ratio_sum {s}\nsglang_mux:prefill_latency_ratio_count {c}\n"
            "sglang_mux:prefill_busy_seconds_total 1\nsglang_mux:prefill_idle_seconds_total 0\n")
    (run / "mux__2.metrics.prom").write_text(prom.format(a=10, b=10, c=10, s=8.0))
    (run / "mux__4.metrics.prom").write_text(prom.format(a=10, b=20, c=50, s=50.0))
    # this point's own 40 observations: 10 in (0.9, 1.0], 30 in (1.0, 1.1]; the 20th is 1/3 into the second
    assert TP.prefill_stream(run, "mux", 4)["measured_over_estimate_p50"] == pytest.approx(1.0 + 0.1 / 3, abs=1e-4)
    assert TP.histogram_quantile(0.5, {0.9: 0.0, 1.0: 4.0, float("inf"): 4.0}) == pytest.approx(0.95)
    assert TP.histogram_quantile(0.99, {1.0: 1.0, float("inf"): 10.0}) == 1.0  # past the last bound
    assert TP.histogram_quantile(0.5, {1.0: 0.0}) is None


def test_a_compressed_timeline_reads_as_the_plain_one(tmp_path):
    import lzma
    rows = [rec(0.00, 48, 84, 40, 40.0, 36.0), rec(0.04, 48, 84, 40, 40.0, 38.0)]
    run = write_point(tmp_path, rows, before=[rec(-5.0, 16, 116, 1, 5.0, 50.0)])
    plain = TP.point_timeline(run, "mux", 4)
    tl = run / "mux.timeline.jsonl"
    (run / "mux.timeline.jsonl.xz").write_bytes(lzma.compress(tl.read_bytes()))
    tl.unlink()
    assert TP.point_timeline(run, "mux", 4).equals(plain) and len(plain) == 2


def test_the_tail_says_whether_the_loop_ran_or_waited(tmp_path):
    """Session 19's stalls slow every phase at once: either the VM took the CPU (steal), the
    thread waited (off its CPU), or code ran long. The os_ms of each row tells which."""
    rows = []
    for i in range(40):
        r = rec(i * 0.04, 48, 84, 40, 40.0, 30.0)
        stalled = i % 20 == 0
        r["host_ms"] = {"decode_launch": 12.0 if stalled else 1.0, "sync": 28.0, "result": 1.0, "gc": 0.5}
        r["os_ms"] = {"off_cpu": 11.0 if stalled else 0.5, "steal": 10.0 if stalled else 0.0}
        rows.append(r)
    p = TP.profile(TP.point_timeline(write_point(tmp_path, rows), "mux", 4))
    hp = p["host_phases_ms"]
    assert hp["host_p50"] == pytest.approx(0.0)          # gc is inside the laps: not added again
    assert hp["os"]["tail"] == {"off_cpu_mean_ms": 11.0, "steal_share": 1.0, "steal_mean_ms": 10.0}
    assert hp["os"]["all"]["steal_share"] == pytest.approx(0.05)
    assert "the tail: off its CPU 11.00 ms on average, VM steal in 100.0 % of them" in TP.render(p)
    for r in rows:
        r["os_ms"]["steal"] = None                       # a host without /proc/stat
    (tmp_path / "b").mkdir()
    p = TP.profile(TP.point_timeline(write_point(tmp_path / "b", rows), "mux", 4))
    assert p["host_phases_ms"]["os"]["tail"]["steal_share"] is None
    assert "steal unknown" in TP.render(p)


def test_guard_growth_over_the_table(tmp_path):
    """Co-run rows carry the guard in use and the table's value: their ratio is what online
    refinement added, and its halves say whether it still climbs."""
    rows = []
    for i in range(40):
        r = rec(i * 0.04, 48, 84, 40, 40.0, 30.0)
        r["guard"] = {"in_use": 1.3 * (1.0 if i < 20 else 1.2), "table": 1.3}
        rows.append(r)
    rows.append(rec(1.6, 132, 0, 10, 10.0, 9.0))  # decode alone: no guard, not counted
    p = TP.profile(TP.point_timeline(write_point(tmp_path, rows), "mux", 4))
    g = p["guard_in_use_over_table"]
    assert g["iterations"] == 40 and g["max"] == pytest.approx(1.2)
    assert (g["p50_first_half"], g["p50_second_half"]) == (pytest.approx(1.0), pytest.approx(1.2))
    assert "P50 in the first half 1.000, in the second 1.200" in TP.render(p)
    (tmp_path / "b").mkdir()
    old = [rec(i * 0.04, 48, 84, 40, 40.0, 30.0) for i in range(4)]  # an older server: no guard field
    assert "guard_in_use_over_table" not in TP.profile(TP.point_timeline(write_point(tmp_path / "b", old), "mux", 4))


H100_FA3 = Path(__file__).resolve().parents[1] / "contention_tables/llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3"


def test_a_point_rescored_with_another_table(tmp_path):
    """Each iteration's worst case from the given table, times the guard growth the server had
    added, plus the fixed decode cost it had learned, over what was measured: rows made at 0.9
    of that come back at exactly 0.9."""
    from sglang_mux.estimator import Estimator
    est = Estimator.from_table(H100_FA3)
    rows = []
    for i, (d, bs, s, mx, pn, pr, growth, off) in enumerate([(48, 40, 40 * 3000, 6000, 4096, 0, 1.1, 0.5),
                                                             (32, 20, 20 * 1500, None, 8000, 2000, 1.0, 0.0),
                                                             (132, 8, 8 * 2000, 2500, 0, 0, None, 0.7)]):
        worst = est.decode_worst_ms(d, bs, s, pn, pr, max_reused=mx) * (growth or 1.0) + off
        r = rec(i * 0.04, d, 132 - d, bs, worst * 2, 0.9 * worst)  # served with a table twice as slow
        r.update(decode_sum_reused=s, decode_max_reused=mx, prefill_new=pn, prefill_reused=pr, decode_offset_ms=off)
        if growth:
            r["guard"] = {"in_use": 1.2 * growth, "table": 1.2}
        rows.append(r)
    t = TP.point_timeline(write_point(tmp_path, rows), "mux", 4)
    rs = TP.rescore(t, est)
    assert rs["iterations"] == 3 and rs["p50"] == pytest.approx(0.9) and rs["max"] == pytest.approx(0.9)
    assert rs["served_p50"] == pytest.approx(0.45) and rs["share_above_1"] == 0
    assert "re-scored with table:" in TP.render({**TP.profile(t), "rescored": rs})
    assert TP.profile(t)["decode_offset_ms"] == 0.7  # the last one learned


def test_rescoring_an_older_timeline_says_what_it_lacks(tmp_path):
    run = write_point(tmp_path, [rec(0.0, 48, 84, 40, 40.0, 36.0)])
    with pytest.raises(UsageError, match="decode_sum_reused"):
        TP.main([str(run), "--rate", "4", "--table", str(H100_FA3)])
    with pytest.raises(UsageError, match="--table: .*no_such_table"):
        TP.main([str(run), "--rate", "4", "--table", str(tmp_path / "no_such_table")])
