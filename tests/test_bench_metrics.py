"""bench.metrics: exact values on hand-made records, failures counted, goodput selection."""
import math

import pytest

from bench import metrics as M


def rec(rid, send, tok_ms, ok=True, error=None, prompt=100, scheduled=None, cached=0):
    end = None if not tok_ms else send + tok_ms[-1] / 1e3
    return dict(rid=rid, scheduled=send if scheduled is None else scheduled, send=send,
                first_token=None if not tok_ms else send + tok_ms[0] / 1e3, end=end,
                tok_ms=list(tok_ms), output_tokens=len(tok_ms), prompt_tokens=prompt,
                cached_tokens=cached, ok=ok, error=error)


RECORDS = [
    rec("a", 0.0, [100, 120, 140, 200], prompt=100, cached=50),   # gaps 20, 20, 60
    rec("b", 1.0, [300, 310, 310], prompt=50),                    # gaps 10, 0 (one 2-token chunk)
    rec("c", 2.0, [50], ok=False, error="timeout"),               # failed: counted, not dropped
]


def test_per_request_exact():
    df = M.per_request(RECORDS).set_index("rid")
    assert df.loc["a", "ttft_ms"] == 100 and df.loc["b", "ttft_ms"] == 300
    assert df.loc["a", "tpot_ms"] == pytest.approx(100 / 3) and df.loc["b", "tpot_ms"] == 5
    assert df.loc["a", "e2e_ms"] == pytest.approx(200) and df.loc["b", "e2e_ms"] == pytest.approx(310)
    assert df.loc["a", "tbt_p99_ms"] == pytest.approx(20 + 0.98 * 40)   # 59.2 > 50
    assert df.loc["a", "tbt_max_ms"] == 60
    assert list(df.attains) == [False, True, False]
    assert math.isnan(df.loc["c", "e2e_ms"])


def test_summary_exact():
    s = M.summarize(RECORDS)
    assert (s["n"], s["n_ok"], s["n_failed"], s["failures"]) == (3, 2, 1, {"timeout": 1})
    assert s["ttft_ms"]["p50"] == 200 and s["ttft_ms"]["p99"] == pytest.approx(298)
    assert s["ttft_ms"]["mean"] == 200
    # pooled gaps [20, 20, 60, 10, 0]
    assert s["tbt_ms"]["p50"] == 20 and s["tbt_ms"]["p99"] == pytest.approx(58.4)
    assert s["tbt_ms"]["max"] == 60 and s["tbt_ms"]["mean"] == 22
    assert s["tpot_ms"]["p50"] == pytest.approx((100 / 3 + 5) / 2, abs=1e-3)
    assert s["e2e_ms"]["p50"] == pytest.approx(255)
    assert s["slo_attainment"] == pytest.approx(1 / 3, abs=1e-5)
    assert s["ttft_attainment"] == pytest.approx(2 / 3, abs=1e-5) and s["tbt_attainment"] == pytest.approx(1 / 3, abs=1e-5)
    assert s["output_tokens"] == 7 and s["prompt_tokens"] == 150
    assert s["makespan_s"] == pytest.approx(1.31)
    assert s["output_tok_s"] == pytest.approx(7 / 1.31, abs=1e-3)
    assert s["total_tok_s"] == pytest.approx(157 / 1.31, abs=1e-3)
    assert s["cache_hit_rate"] == pytest.approx(50 / 150, abs=1e-4)
    assert s["offered_rate"] == pytest.approx(1.0)
    ok, why = M.check_point(s)
    assert not ok and any("1 failed" in w for w in why) and any("P99 TBT" in w for w in why)


def test_slo_thresholds_are_parameters():
    s = M.summarize(RECORDS[:2], tbt_slo_ms=70, ttft_slo_ms=250)
    assert s["slo_attainment"] == 0.5                               # b's TTFT 300 > 250
    ok, why = M.check_point(s, tbt_slo_ms=70, ttft_slo_ms=250)
    assert not ok and why == ["P99 TTFT 298 ms > 250"]
    assert M.check_point(M.summarize(RECORDS[:2]), tbt_slo_ms=70, ttft_slo_ms=5000) == (True, [])


def steady(n, ttft=100.0, gap=20.0, rate=1.0, drift=0.0):
    return [rec(f"r{i}", i / rate, [ttft + drift * i + k * gap for k in range(5)]) for i in range(n)]


def test_ttft_drift_detects_growing_queue():
    assert M.summarize(steady(50))["ttft_drift"]["ok"]
    grow = M.summarize(steady(50, drift=60.0))           # TTFT 100 -> 3040 ms, all < 5 s SLO
    assert grow["ttft_ms"]["p99"] < 5000 and not grow["ttft_drift"]["ok"]
    # first half median 100 + 60*12 = 820 -> limit 1890; last 5 median 100 + 60*47 = 2920
    assert grow["ttft_drift"]["limit_ms"] == pytest.approx(2 * (100 + 60 * 12) + 250)
    assert M.summarize(steady(50, drift=5.0))["ttft_drift"]["ok"]         # mild: 100 -> 345 ms
    ok, why = M.check_point(grow)
    assert not ok and why == ["TTFT drifting up (the last 5 requests' median 2920 ms > 1890)"]


def test_goodput_selection():
    pts = [{"rate": 1.0, "summary": M.summarize(steady(20))},
           {"rate": 2.0, "summary": M.summarize(steady(20, gap=40.0))},
           {"rate": 4.0, "summary": M.summarize(steady(20, gap=80.0))}]          # TBT 80 > 50
    g = M.goodput(pts)
    assert g["goodput_rps"] == 2.0 and g["monotone"]
    assert (g["tbt_slo_ms"], g["ttft_slo_ms"]) == (50.0, 5000.0)
    assert [p["pass"] for p in g["points"]] == [True, True, False]
    assert M.goodput(pts, tbt_slo_ms=30.0)["goodput_rps"] == 1.0
    assert M.goodput(pts, tbt_slo_ms=10.0)["goodput_rps"] is None
    # a failed request fails its rate; a higher passing rate still counts, flagged non-monotone
    bad = steady(20) + [rec("x", 3.0, [], ok=False, error="http_500: boom")]
    g2 = M.goodput([pts[0], {"rate": 2.0, "summary": M.summarize(bad)},
                    {"rate": 3.0, "summary": M.summarize(steady(20))}])
    assert g2["goodput_rps"] == 3.0 and not g2["monotone"]
    assert g2["points"][1]["reasons"][0].startswith("1 failed {'http_500': 1}")


def test_queue_drift_judges_the_wait_not_which_prompts_fell_in_the_tail():
    c = 0.03  # ms of TTFT per new token, every request served alone
    # No queue at all, but the last two requests are long turns: drift() calls it drifting.
    new = [4000, 4000] + [500] * 16 + [40000, 40000]
    ttft = [c * n for n in new]
    assert not M.drift(ttft)["ok"]
    q = M.queue_drift(ttft, new)
    assert q["ok"] and q["tail_median_ms"] == 0.0 and q["service_ms_per_token"] == c
    # A queue growing at the end, behind a head of long turns that lifts drift()'s limit.
    new = [40000] * 5 + [500] * 15
    ttft = [c * n for n in new[:18]] + [600.0, 600.0]
    d = M.drift(ttft)
    assert d["ok"] and d["limit_ms"] == 2 * (15 + 1200) / 2 + 250
    q = M.queue_drift(ttft, new)
    assert not q["ok"] and q["tail_median_ms"] == 585.0 and q["limit_ms"] == 250.0


def test_summary_reports_queue_drift_beside_the_rule():
    recs = [rec(str(i), float(i), [100.0, 120.0], prompt=5000, cached=1000) for i in range(10)]
    s = M.summarize(recs)
    assert s["ttft_queue_drift"]["ok"] and s["ttft_queue_drift"]["service_ms_per_token"] == 0.025
    for r in recs:
        del r["prompt_tokens"]
    assert M.summarize(recs)["ttft_queue_drift"] is None


# The length-aware TTFT SLO: P99 over requests of TTFT - K x prompt tokens <= S (K 0.2, S 2 s),
# against the flat 5 s one. Four requests each, one per second, all alike (no drift).
SHORT_SLOW = [rec(f"s{i}", float(i), [3000, 3020], prompt=1000) for i in range(4)]    # 3 s for 1K tokens
LONG_FAST = [rec(f"l{i}", float(i), [9000, 9020], prompt=40_000) for i in range(4)]   # 9 s for 40K tokens


def test_a_point_passes_the_flat_slo_and_fails_the_length_aware_one_and_the_reverse():
    flat = [M.summarize(r) for r in (SHORT_SLOW, LONG_FAST)]
    assert [M.check_point(s) for s in flat] == [(True, []), (False, ["P99 TTFT 9000 ms > 5000"])]
    aware = [M.summarize(r, ttft_slo_ms=2000, ttft_slo_ms_per_token=0.2) for r in (SHORT_SLOW, LONG_FAST)]
    assert [s["ttft_length_adjusted_ms"]["p99"] for s in aware] == [2800, 1000]   # 3000 - 200, 9000 - 8000
    assert [s["ttft_ms"]["p99"] for s in aware] == [3000, 9000]                   # TTFT itself unchanged
    assert aware[0]["slo"] == {"tbt_ms": 50.0, "ttft_ms": 2000, "ttft_ms_per_token": 0.2}
    assert [M.check_point(s, ttft_slo_ms=2000) for s in aware] == [
        (False, ["P99 TTFT - 0.2 ms/token x prompt 2800 ms > 2000"]), (True, [])]
    assert [(s["slo_attainment"], s["ttft_attainment"]) for s in aware] == [(0.0, 0.0), (1.0, 1.0)]
    g = M.goodput([{"rate": 1, "summary": aware[1]}, {"rate": 2, "summary": aware[0]}], ttft_slo_ms=2000)
    assert (g["goodput_rps"], g["ttft_slo_ms_per_token"], [p["pass"] for p in g["points"]]) == (1, 0.2, [True, False])


def test_a_flat_summary_has_no_adjusted_ttft_and_old_summaries_judge_flat():
    s = M.summarize(LONG_FAST)
    assert "ttft_length_adjusted_ms" not in s and s["slo"]["ttft_ms_per_token"] == 0
    del s["slo"]["ttft_ms_per_token"]                 # a summary.json from before K
    assert M.summary_per_token(s) == 0 and M.check_point(s, ttft_slo_ms=10_000) == (True, [])
    with pytest.raises(ValueError, match="summarize the point's records with that K"):
        M.check_point(s, ttft_slo_ms=2000, ttft_slo_ms_per_token=0.2)
    # a request without a prompt count gets no allowance
    df = M.per_request([rec("x", 0.0, [2500], prompt=None)], ttft_slo_ms=2000, ttft_slo_ms_per_token=0.2)
    assert df.ttft_adjusted_ms[0] == 2500 and not df.ttft_attains[0]
    with pytest.raises(ValueError, match=">= 0"):
        M.summarize(LONG_FAST, ttft_slo_ms_per_token=-1)


def test_ttft_split_needs_the_schedulers_stamps():
    recs = [{"ok": True, "send": 0.0, "tok_ms": [100.0 + i], "server": {
        "request_received_ts": 10.0, "prefill_finished_time": 10.04, "queue_time": 0.01,
        "response_sent_to_client_ts": 10.05}} for i in range(11)]
    sp = M.summarize(recs)["ttft_split"]
    assert sp["p50"] == {"server_ms": pytest.approx(40.0), "queue_ms": pytest.approx(10.0), "rest_ms": pytest.approx(65.0)}
    assert sp["p99"]["rest_ms"] == pytest.approx(69.9)
    for r in recs:  # --tokenizer-worker-num > 1: no scheduler stamps
        del r["server"]["prefill_finished_time"]
    assert M.summarize(recs)["ttft_split"] is None


def test_short_and_long_prompts_ttft_apart():
    """Whether short prompts wait behind long ones: their TTFT apart, split at 2,048 tokens."""
    recs = [rec("s1", 0.0, [100, 110], prompt=500), rec("s2", 0.1, [900, 910], prompt=2047),
            rec("l1", 0.2, [3000, 3010], prompt=2048), rec("x", 0.3, [50], ok=False, error="boom", prompt=10)]
    by = M.summarize(recs)["ttft_by_length"]
    assert by["split_tokens"] == 2048
    assert (by["short"]["n"], by["short"]["p50"]) == (2, 500)  # the failed request is in neither
    assert (by["long"]["n"], by["long"]["p99"]) == (1, 3000)


def test_a_length_aware_point_is_judged_on_the_wait_beyond_its_own_prefill():
    """Every other prompt 30,000 tokens, each TTFT its own prefill (0.1 ms a token) and no queue:
    the last tenth holds three long prompts, so TTFT 'drifts' (3,100 ms against a 650-ms limit)
    while the wait beyond each request's own prefill does not. The length-aware rule judges by
    the second; the flat one still by TTFT."""
    recs = []
    for i in range(50):
        n = 30_000 if i % 2 else 1000
        recs.append(rec(f"r{i}", float(i), [100 + 0.1 * n + 20 * k for k in range(3)], prompt=n))
    aware = M.summarize(recs, 50.0, 2000.0, 0.2)
    assert not aware["ttft_drift"]["ok"] and aware["ttft_drift"]["tail_median_ms"] == 3100
    assert aware["ttft_queue_drift"]["ok"]
    assert M.check_point(aware, ttft_slo_ms=2000) == (True, [])
    flat = M.summarize(recs, 50.0, 5000.0, 0.0)
    assert M.check_point(flat, ttft_slo_ms=5000) == \
        (False, ["TTFT drifting up (the last 5 requests' median 3100 ms > 650)"])
    queued = [dict(r, tok_ms=[t + 60.0 * i for t in r["tok_ms"]]) for i, r in enumerate(recs)]  # a queue: +60 ms each
    ok, why = M.check_point(M.summarize(queued, 50.0, 2000.0, 0.2), ttft_slo_ms=2000)
    assert not ok and why[-1].startswith("wait beyond its own prefill drifting up")
