"""bench.report's goodput claims: intervals from a sweep and the holds/fails/open verdicts."""
import json
import math
from pathlib import Path

import pytest

from bench import report


def sysd(*rates):
    """rates: (rate, passed) pairs."""
    return {"points": [{"rate": r, "pass": ok, "summary": {}} for r, ok in rates]}


@pytest.mark.parametrize("pts, iv", [
    (((1, True), (2, True), (4, False)), (2, 4)),
    (((1, True), (2, True)), (2, math.inf)),            # nothing failed: open above
    (((1, False), (2, False)), (0, 1)),                 # nothing passed: below the lowest rate
    (((1, True), (2, False), (3, True), (4, False)), (3, 4)),   # non-monotone: the highest pass
])
def test_goodput_interval(pts, iv):
    assert report.goodput_interval(sysd(*pts)) == iv


def summary(**systems):
    return {"systems": systems}


def test_verdicts():
    holds = summary(mux=sysd((2, True), (4, True), (8, False)),
                    **{"sglang-chunked-512": sysd((1, True), (2, False)),
                       "sglang-chunked-2048": sysd((0.5, True), (1, False)),
                       "mux-fixed-64": sysd((2, True), (4, False))})
    rows = {r["claim"]: r for r in report.goodput_comparison(holds)}
    c = rows["mux ≥ 2x best chunked prefill"]
    assert c["baseline"] == "sglang-chunked-512" and c["verdict"] == "holds"   # 4 >= 2 x 2
    assert rows["mux ≥ 1x best fixed partition"]["verdict"] == "holds"          # 4 >= 4
    fails = summary(mux=sysd((2, True), (4, False)), **{"sglang-chunked-2048-nomix": sysd((2, True))})
    assert report.goodput_comparison(fails)[0]["verdict"] == "fails"           # mux < 4 <= 2 x 2
    open_ = summary(mux=sysd((2, True), (4, False)), **{"sglang-chunked-512": sysd((1, True), (4, False))})
    assert report.goodput_comparison(open_)[0]["verdict"] == "open"             # chunked in [1, 4)
    # the definition compares the highest passing tested rates: 2 >= 2 x 1
    assert report.goodput_comparison(open_)[0]["verdict_tested"] == "holds"
    assert rows["mux ≥ 2x best chunked prefill"]["tested"] == [4, 1]


def test_family_interval_takes_the_largest_upper_bound():
    """A budget that passed less may still be the best between the tested rates: 2048 passed
    1.5 and failed 1.75, 512 only failed 2, so the best chunked goodput lies in [1.5, 2) and a
    mux at 3.5 does not yet make 2x hold on the interval (it does at the tested rates)."""
    s = summary(mux=sysd((3.5, True), (4, False)),
                **{"sglang-chunked-2048-nomix": sysd((1.5, True), (1.75, False)),
                   "sglang-chunked-512-nomix": sysd((2, False))})
    r = report.goodput_comparison(s)[0]
    assert r["baseline"] == "sglang-chunked-2048-nomix" and r["baseline_interval"] == [1.5, 2]
    assert r["verdict"] == "open" and r["verdict_tested"] == "holds"
    s["systems"]["sglang-chunked-512-nomix"] = sysd((1.75, False), (2, False))
    assert report.goodput_comparison(s)[0]["verdict"] == "holds"               # 3.5 >= 2 x 1.75
    # a mux that passed nothing never "holds", even against a baseline that passed nothing
    s = summary(mux=sysd((1, False)), **{"mux-fixed-48": sysd((1, False))})
    assert report.goodput_comparison(s)[0]["verdict_tested"] == "fails"
    assert report.goodput_comparison(summary(sglang=sysd((1, True)))) == []


def test_render_lists_intervals():
    s = summary(mux=sysd((2, True), (4, False)), **{"sglang-chunked-512": sysd((1, False))})
    text = "\n".join(report.render_goodput(report.goodput_comparison(s)))
    assert "| mux ≥ 2x best chunked prefill | sglang-chunked-512 | 2 vs < 1 | holds | [2, 4) | < 1 | holds |" in text


def test_a_baseline_that_passed_nothing_has_no_tested_goodput():
    """Session 19's H100: the mux passed 4, chunked 512 failed its lowest rate, 3.5. Its goodput
    lies below 3.5, not at 0, so "mux >= 2x" is open, not held at the tested rates."""
    s = summary(mux=sysd((3.5, True), (4, True), (4.5, False)), **{"sglang-chunked-512": sysd((3.5, False))})
    r = report.goodput_comparison(s)[0]
    assert (r["verdict"], r["verdict_tested"], r["tested"]) == ("open", "open", [4, 0])
    assert "| 4 vs < 3.5 | open |" in "\n".join(report.render_goodput([r]))
    # mux >= 1x that same baseline holds on the interval, so at the tested rates too
    assert report.goodput_comparison(s, factor_chunked=1.0)[0]["verdict_tested"] == "holds"


def test_the_report_names_points_the_two_drift_tests_judge_differently():
    ok, drifting = {"ok": True}, {"ok": False}
    s = summary(mux={"points": [{"rate": 1, "pass": True, "summary": {"ttft_drift": ok, "ttft_queue_drift": ok}}]},
                **{"sglang-chunked-512": {"points": [
                    {"rate": 1, "pass": True, "summary": {"ttft_drift": ok, "ttft_queue_drift": drifting}},
                    {"rate": 2, "pass": False, "summary": {"ttft_drift": drifting}}]}})  # before queue_drift
    assert report.queue_drift_disagrees(s) == ["sglang-chunked-512 @ 1: ok / drift"]


def test_main_names_what_it_needs_for_a_missing_summary(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        report.main([str(tmp_path)])
    assert e.value.code == 2
    assert "summary.json" in capsys.readouterr().err


def test_main_renders_a_run_directory(tmp_path, capsys):
    src = Path(__file__).resolve().parents[1] / "bench/results/synthetic_h200_s23/summary.json"
    (tmp_path / "summary.json").write_text(src.read_text())
    report.main([str(tmp_path)])
    out = capsys.readouterr().out
    assert "| mux | 1.25 |" in out and "Attention backend: fa3" in out


def test_the_report_shows_a_length_aware_ttft_slo_and_old_summaries_stay_flat(tmp_path):
    src = json.loads((Path(__file__).resolve().parents[1] / "bench/results/synthetic_h200_s23/summary.json").read_text())
    assert "ttft_ms_per_token" not in src["slo"]            # written before K: renders flat
    flat = report.render(src)
    assert "P99 TTFT ≤ 10000 ms, no failed" in flat and "×prompt" not in flat
    assert report.ttft_slo_text({"ttft_ms": 2000, "ttft_ms_per_token": 0}) == "P99 TTFT ≤ 2000 ms"
    aware = {**src, "slo": {**src["slo"], "ttft_ms": 2000, "ttft_ms_per_token": 0.2}}
    mux = aware["systems"]["mux"]
    at = next(p for p in mux["points"] if p["rate"] == mux["goodput_rps"])
    at["summary"] = {**at["summary"], "ttft_length_adjusted_ms": {"p99": 1234.0}}
    text = report.render(aware)
    assert "P99 of (TTFT − 0.2 ms × prompt tokens) ≤ 2000 ms (length-aware)" in text
    header = next(line for line in text.splitlines() if line.startswith("| system |"))
    row = next(line for line in text.splitlines() if line.startswith("| mux |"))
    cols = [c.strip() for c in header.split("|")]
    assert cols[3:5] == ["P99 TTFT (ms)", "P99 TTFT − 0.2×prompt (ms)"] and row.split("|")[4].strip() == "1234"
    assert len(row.split("|")) == len(header.split("|"))


def test_the_report_shows_the_front_process_load_where_points_recorded_it():
    src = json.loads((Path(__file__).resolve().parents[1] / "bench/results/synthetic_h200_s23/summary.json").read_text())
    assert "busy cores" not in report.render(src)  # points from before proc_cpu: no section
    mux = src["systems"]["mux"]
    for p, cores in zip(mux["points"], (0.41, 0.97)):
        p["proc_cpu"] = {"http+tokenizer": cores, "sglang::scheduler_TP0": 1.0, "client": 2.5}
    rates = [p["rate"] for p in mux["points"][:2]]
    assert f"| mux | {rates[0]:g}: 0.41, {rates[1]:g}: 0.97 |" in report.render(src)


def test_the_report_says_why_each_systems_first_failing_rate_failed_and_where_its_ttft_went():
    src = json.loads((Path(__file__).resolve().parents[1] / "bench/results/synthetic_h200_s23/summary.json").read_text())
    sysd = src["systems"]["mux"]
    fail = min((p for p in sysd["points"] if not p["pass"]), key=lambda p: p["rate"])
    text = report.render(src)  # points from before the stamps: the reasons, no split
    row = next(line for line in text.splitlines() if line.startswith(f"| mux | {fail['rate']:g} |"))
    assert "; ".join(fail["reasons"]) in row and row.endswith("| — | — | — |")
    fail["summary"]["ttft_split"] = {"p50": {"server_ms": 41.0, "queue_ms": 0.6, "rest_ms": 176.2},
                                     "p99": {"server_ms": 249.0, "queue_ms": 171.0, "rest_ms": 1653.0}}
    row = next(line for line in report.render(src).splitlines() if line.startswith(f"| mux | {fail['rate']:g} |"))
    assert row.endswith("| 41 / 249 | 1 / 171 | 176 / 1653 |")
    for p in sysd["points"]:
        p["pass"] = True
    assert "| mux | " not in report.render(src).split("first failing rate")[-1]



def test_the_report_says_when_systems_climbed_from_different_rates():
    """Session 52's 70B cell: the hybrid climbed from 0.5, chunked 512 from 0.7, and the ratio of
    their goodputs was the trace's, not theirs."""
    root = Path(__file__).resolve().parents[1] / "bench/results"
    s = json.loads((root / "h200x4_s52_2026-11-28/cap70/summary.json").read_text())
    assert report.different_first_rates(s) == ["mux-hybrid from 0.5", "sglang-chunked-512 from 0.7"]
    assert "climbed from different rates (mux-hybrid from 0.5, sglang-chunked-512 from 0.7)" in report.render(s)
    same = summary(mux=sysd((1, True), (2, False)), **{"sglang-chunked-512": sysd((1, True), (2, True), (3, False))})
    assert report.different_first_rates(same) == []


def test_a_goodput_no_failing_rate_bounds_is_shown_as_a_lower_bound():
    """A system that passed every rate it ran has a goodput of at least its last one ("≥"); one
    that failed a rate above it, that rate's bracket (no sign). Session 53's 70B run: the hybrid
    climbed 0.65 ✓ 0.7 ✓ 0.75 ✗, chunked 512 served one point, 0.7 ✓."""
    src = Path(__file__).resolve().parents[1] / "bench/results/h200x4_s53_2026-11-28/cap70/summary.json"
    lines = report.render(json.loads(src.read_text())).splitlines()
    assert any(line.startswith("| sglang-chunked-512 | ≥ 0.7 |") for line in lines)
    assert any(line.startswith("| mux-hybrid | 0.7 |") for line in lines)
