"""The discrete-event simulator: trace handling, exact timing on a tiny case, and a real
policy comparison on the bundled conversation slice with a synthetic contention table."""

import dataclasses
import io
import json
from contextlib import redirect_stdout

import numpy as np
import pytest

from sglang_mux import sim
from sglang_mux.estimator import Estimator, PrefillReq
from sglang_mux.partitions import PartitionConfig
from sglang_mux.policy import SLO, DecodePlan, FusedPlan, MuxDispatcher, SoloOnlyEstimator, decode_contexts, make_policy
from sglang_mux.sim.replay import _nearest
from sglang_mux.fused_price import DECODE_ROW_MS
from sglang_mux.mux_metrics import load_timeline

H100_FA3 = "llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3"


class FakeEstimator(SoloOnlyEstimator):
    num_layers = 32
    total_sms = 132
    decode_sms_options = [16, 32, 48, 64, 80, 96, 112]

    def decode_solo_ms(self, d, bs, sum_reused, max_reused=None):
        return (4.0 + 0.05 * bs + 3e-5 * sum_reused) * (132 / d) ** 0.6

    def decode_worst_ms(self, d, bs, sum_reused, prefill_new, prefill_reused, max_reused=None):
        t = self.decode_solo_ms(d, bs, sum_reused, max_reused)
        return t if d >= 132 or prefill_new <= 0 else t * 1.25

    def prefill_ms(self, p, reqs):
        return sum(0.1 * q.n for q in reqs) * 132 / p + 2.0


@pytest.fixture(scope="module")
def est(good):
    return Estimator.from_table(good)


@pytest.fixture(scope="module")
def table_dir(est):
    return est.source.split("table:", 1)[1].rsplit(" (", 1)[0]


def _write(tmp_path, rows):
    p = tmp_path / "t.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(p)


def test_a_slice_with_its_history_warm(tmp_path):
    """--offset and --warm-history as bench.run serves them: the cache starts with what the
    window reuses of the rows before it (bench.workloads.warm_prefixes)."""
    rows = [{"timestamp": 1000 * i, "input_length": n, "output_length": 4, "hash_ids": ids} for i, (ids, n) in
            enumerate([([1, 2, 3], 1536), ([4, 5], 1024), ([1, 2, 9], 1536), ([1, 2, 3, 7], 2048),
                       ([4, 8], 700), ([10], 512)])]
    f = _write(tmp_path, rows)
    cold = sim.load_trace(f, offset=2, limit=4)
    assert [q.n_input for q in cold] == [1536, 2048, 700, 512] and [q.reused for q in cold] == [0, 1024, 0, 0]
    warm = sim.load_trace(f, offset=2, limit=4, warm_history=True)
    assert [q.reused for q in warm] == [1024, 1536, 512, 0] and warm[0].arrival_s == 0.0


def test_trace_reuse_cap_and_scaling(tmp_path):
    rows = [
        {"timestamp": 1000, "input_length": 1500, "output_length": 5, "hash_ids": [1, 2, 3]},
        {"timestamp": 2000, "input_length": 1500, "output_length": 5, "hash_ids": [1, 2, 4]},
        {"timestamp": 3000, "input_length": 1024, "output_length": 5, "hash_ids": [1, 2]},
        {"timestamp": 5000, "input_length": 2000, "output_length": 5, "hash_ids": [9, 1, 2, 3]},
    ]
    f = _write(tmp_path, rows)
    t = sim.load_trace(f)
    assert [q.reused for q in t] == [0, 1024, 1023, 0]  # fully cached prompt keeps one token to compute
    assert [q.arrival_s for q in t] == [0.0, 1.0, 2.0, 4.0]
    assert [q.arrival_s for q in sim.load_trace(f, rate=0.375)] == pytest.approx([0, 2, 4, 8])  # 3 gaps in 8 s
    assert [q.arrival_s for q in sim.load_trace(f, time_scale=0.5)] == [0.0, 0.5, 1.0, 2.0]
    capped = sim.load_trace(f, input_cap=600)
    assert [q.n_input for q in capped] == [600, 600, 600, 600] and capped[1].reused == 599
    lru = sim.load_trace(f, cache_tokens=2 * 512)  # 2 blocks: block 1 is gone by request 2
    assert [q.reused for q in lru] == [0, 0, 0, 0]
    assert len(sim.load_trace("conversation", limit=7)) == 7
    assert len(sim.load_trace("synthetic")) == 300
    with pytest.raises(FileNotFoundError):
        sim.load_trace("no-such-trace")


def test_poisson_arrivals_match_the_benchmark_and_keep_reuse(tmp_path):
    from bench.workloads import poisson_arrivals

    rows = [{"timestamp": 0, "input_length": 1024, "output_length": 5, "hash_ids": [1, 2]}] * 3 + \
        [{"timestamp": 3000, "input_length": 1536, "output_length": 5, "hash_ids": [1, 2, 3]}]
    f = _write(tmp_path, rows)
    t = sim.load_trace(f, rate=2.0, arrival="poisson", seed=7)
    assert [q.arrival_s for q in t] == poisson_arrivals(4, 2.0, 7).tolist()   # bench.run's draws
    assert [q.reused for q in t] == [0, 1023, 1023, 1024]                    # order and reuse kept
    assert len({q.arrival_s for q in t}) == 4                                # the burst is spread
    with pytest.raises(ValueError, match="needs --rate"):
        sim.load_trace(f, arrival="poisson")
    with pytest.raises(ValueError, match="arrival must be"):
        sim.load_trace(f, rate=1.0, arrival="bursty")


def test_exact_timing_single_request():
    est = FakeEstimator()
    reqs = [sim.TraceReq("a", 0.0, 8000, 3, 0)]
    r = sim.simulate(reqs, est, MuxDispatcher(est, SLO(50, 5000)), name="d")
    t_p = est.prefill_ms(132, [PrefillReq(8000, 0)])  # prefill alone on the full GPU
    assert r.ttft_s[0] == pytest.approx(t_p / 1e3)
    fin = t_p + est.decode_solo_ms(132, 1, 8001) + est.decode_solo_ms(132, 1, 8002)
    assert r.finish_s[0] == pytest.approx(fin / 1e3)
    s = r.summary
    assert s["decode_iterations"] == 2 and s["tbt_p99_ms"] == pytest.approx(est.decode_solo_ms(132, 1, 8002))
    assert sum(s["partition_share"].values()) == pytest.approx(1.0)
    assert set(s["partition_share"]) == {"D0/P132", "D132/P0"}


def test_host_time_lengthens_every_decode_iteration():
    est = FakeEstimator()
    reqs = [sim.TraceReq("a", 0.0, 8000, 3, 0)]
    r = sim.simulate(reqs, est, MuxDispatcher(est, SLO(50, 5000)), sim.Calibration(host_ms=3.0), name="d")
    t_p = est.prefill_ms(132, [PrefillReq(8000, 0)])  # prefill alone: no host time charged
    assert r.ttft_s[0] == pytest.approx(t_p / 1e3)
    fin = t_p + est.decode_solo_ms(132, 1, 8001) + est.decode_solo_ms(132, 1, 8002) + 2 * 3.0
    assert r.finish_s[0] == pytest.approx(fin / 1e3)
    assert r.summary["tbt_p99_ms"] == pytest.approx(est.decode_solo_ms(132, 1, 8002) + 3.0)
    with pytest.raises(ValueError, match="host_ms"):
        sim.simulate(reqs, est, MuxDispatcher(est, SLO(50, 5000)), sim.Calibration(host_ms=-1.0))


def test_host_draws_are_charged_and_budgeted_as_served():
    est = FakeEstimator()
    reqs = [sim.TraceReq("a", 0.0, 8000, 4, 0)]
    fixed = sim.simulate(reqs, est, MuxDispatcher(est, SLO(50, 5000)), sim.Calibration(host_ms=3.0))
    budgets = []
    pol = MuxDispatcher(est, SLO(50, 5000))
    plan = pol.plan
    pol.plan = lambda snap: budgets.append(snap.decode_host_ms) or plan(snap)
    drawn = sim.simulate(reqs, est, pol, sim.Calibration(host_draws=([99.0], [3.0])))  # decode alone draws from the second
    assert list(drawn.finish_s) == pytest.approx(list(fixed.finish_s))  # one value: the fixed host time
    assert budgets[-3:] == [0.0, 3.0, 3.0] and not any(budgets[:-3])  # prefill quanta, then 3 decode iterations
    for bad in (([], [1.0]), ([1.0], [-1.0]), ([1.0],)):
        with pytest.raises(ValueError, match="host_draws"):
            sim.simulate(reqs, est, MuxDispatcher(est, SLO(50, 5000)), sim.Calibration(host_draws=bad))


def test_summary_has_the_benchmarks_drift_test():
    est = FakeEstimator()
    calm = [sim.TraceReq(str(i), 2.0 * i, 8000, 4, 0) for i in range(20)]
    flood = [sim.TraceReq(str(i), 0.05 * i, 8000, 4, 0) for i in range(20)]  # 0.8 s of prefill each
    assert sim.simulate(calm, est, MuxDispatcher(est, SLO(50, 5000))).summary["ttft_drift"]["ok"] is True
    d = sim.simulate(flood, est, MuxDispatcher(est, SLO(50, 5000))).summary["ttft_drift"]
    assert d["ok"] is False and d["tail_median_ms"] > d["limit_ms"]


def test_served_host_ms_is_laps_less_gpu_time(tmp_path):
    rows = [{"measured_decode_ms": 20.0, "prefill_sms": 84, "host_ms": {"book": 0.5, "sync": 21.0, "gc": 4.0,
                                                                         "result": 1.0}},
            {"measured_decode_ms": 10.0, "prefill_sms": 0, "host_ms": {"sync": 9.5}},  # GPU over the laps: 0
            {"measured_decode_ms": 9.0, "prefill_sms": 0, "host_ms": {"sync": 10.0}},
            {"measured_decode_ms": None, "prefill_sms": 132, "host_ms": {"sync": 5.0}},  # prefill only
            {"measured_decode_ms": 8.0, "prefill_sms": 84}]  # an older server: no laps
    co, alone = sim.served_host_ms(_write(tmp_path, rows))
    assert (list(co), list(alone)) == (pytest.approx([2.5]), pytest.approx([0.0, 1.0]))
    with pytest.raises(ValueError, match="host_ms laps"):
        sim.served_host_ms(_write(tmp_path, rows[1:]))  # none beside a prefill


def test_all_requests_finish_fast(est):
    reqs = sim.load_trace("synthetic", limit=60, rate=2.0, input_cap=16384)
    for r in sim.run_policies(reqs, est, "dispatcher,batch-size,fixed:48"):
        assert not np.isnan(r.finish_s).any() and not np.isnan(r.ttft_s).any()
        assert (r.ttft_s > 0).all() and r.summary["requests"] == 60
        assert sum(r.summary["partition_share"].values()) == pytest.approx(1.0)


def test_dispatcher_meets_tbt_where_small_fixed_partition_does_not(est):
    """Conversation slice, 200 requests at 2 req/s, prompts capped at 32K, TBT SLO 50 ms."""
    reqs = sim.load_trace("conversation", limit=200, rate=2.0, input_cap=32768)
    res = {r.policy: r.summary for r in sim.run_policies(reqs, est, "dispatcher,fixed:16,fixed:64")}
    d, f16, f64 = res["dispatcher"], res["fixed:16"], res["fixed:64"]
    assert d["tbt_p99_ms"] <= 50 < f16["tbt_p99_ms"]
    assert d["ttft_p50_s"] < f64["ttft_p50_s"]  # a big static decode share starves prefill
    assert d["slo_attainment"] > max(f16["slo_attainment"], f64["slo_attainment"])


def test_preemption_in_sim(est):
    reqs = sim.load_trace("conversation", limit=120, rate=1.5)
    slo = SLO(50, 1000, 0.2)
    on = sim.run_policies(reqs, est, "dispatcher", slo=slo)[0]
    off = sim.run_policies(reqs, est, "dispatcher", slo=slo, preemption=False)[0]
    assert on.summary["preemptions"] > 0 and off.summary["preemptions"] == 0
    assert not np.isnan(on.finish_s).any()
    assert on.summary["ttft_attainment"] >= off.summary["ttft_attainment"]


def test_cli_json_and_timeline(tmp_path):
    tl = tmp_path / "tl.jsonl"
    buf = io.StringIO()
    with redirect_stdout(buf):
        sim.main(["--trace", "conversation", "--limit", "12", "--rate", "1", "--policy", "all", "--json",
                  "--timeline", str(tl)], estimator=FakeEstimator())
    out = json.loads(buf.getvalue())
    names = [r["policy"] for r in out["results"]]
    assert names[:2] == ["dispatcher", "batch-size"] and "fixed:112" in names
    assert out["setup"]["requests"] == 12
    df = load_timeline(tl)
    assert set(df["policy"]) == set(names)
    assert {"time", "decode_sms", "prefill_sms", "prefill_layers", "reason", "decode_bs"} <= set(df.columns)
    assert len(df) == sum(r["decisions"] for r in out["results"])


def test_cli_text_with_table(table_dir):
    buf = io.StringIO()
    with redirect_stdout(buf):
        sim.main(["--table", table_dir, "--trace", "synthetic", "--limit", "20", "--rate", "1",
                  "--policy", "dispatcher,fixed:64"])
    text = buf.getvalue()
    assert "dispatcher" in text and "fixed:64" in text and "time by plan:" in text


def test_cli_bad_table_is_a_usage_error(tmp_path, capsys):
    # a missing directory, and one that is not a table: the TableError's message, no traceback
    for table, problem in ((tmp_path / "no_such_table", "no such table directory"),
                           (tmp_path, "meta.json: missing file")):
        with pytest.raises(SystemExit) as exc:
            sim.main(["--table", str(table), "--trace", "conversation", "--limit", "5", "--rate", "1"])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {table}") and problem in err and err.count("\n") == 1


class RecordingEstimator(FakeEstimator):
    """FakeEstimator that records each decode query's (bs, Σ context, longest context)."""

    def __init__(self):
        self.seen = []

    def decode_solo_ms(self, d, bs, sum_reused, max_reused=None):
        self.seen.append((bs, sum_reused, max_reused))
        return super().decode_solo_ms(d, bs, sum_reused)


def test_longest_decode_context_reaches_the_estimator():
    est = RecordingEstimator()
    reqs = [sim.TraceReq("a", 0.0, 8000, 200, 0), sim.TraceReq("b", 0.9, 2000, 10, 0)]
    r = sim.simulate(reqs, est, MuxDispatcher(est, SLO(50, 5000)), name="d")
    assert not np.isnan(r.finish_s).any()
    pairs = sorted({(s, m) for bs, s, m in est.seen if bs == 2})  # dispatcher and sim ask alike
    assert est.seen[0] == (1, 8001, 8001)  # a alone: prompt + its first token
    assert all(m == s for bs, s, m in est.seen if bs == 1)
    assert len(pairs) >= 9
    for s, m in pairs:  # a (the longer) is the longest; b's context is the rest
        assert m > s - m >= 2001
    # Both grow by one token per decode round.
    assert all(m2 - m1 == 1 and s2 - s1 == 2 for (s1, m1), (s2, m2) in zip(pairs, pairs[1:]))


def test_prefill_beside_decode_runs_slower():
    """b's prefill runs beside a's decode; a's ran alone on the full GPU."""
    est = FakeEstimator()
    reqs = [sim.TraceReq("a", 0.0, 8000, 200, 0), sim.TraceReq("b", 0.9, 2000, 10, 0)]
    base = sim.simulate(reqs, est, MuxDispatcher(est, SLO(50, 5000)), name="d")
    slow = sim.simulate(reqs, est, MuxDispatcher(est, SLO(50, 5000)), sim.Calibration(prefill_slowdown=2.0), name="d")
    assert slow.ttft_s[0] == base.ttft_s[0]
    assert slow.ttft_s[1] > base.ttft_s[1] * 1.5
    # a's prefill alone on the full GPU, then b's beside a's decode at twice its estimate
    alone, beside = est.prefill_ms(132, [PrefillReq(8000, 0)]), base.summary["prefill_busy_s"] * 1e3 - \
        est.prefill_ms(132, [PrefillReq(8000, 0)])
    assert slow.summary["prefill_busy_s"] * 1e3 == pytest.approx(alone + 2 * beside)
    per_partition = sim.simulate(reqs, est, MuxDispatcher(est, SLO(50, 5000)), sim.Calibration(prefill_slowdown={d: 2.0 for d in est.decode_sms_options}), name="d")
    assert list(per_partition.ttft_s) == list(slow.ttft_s)
    with pytest.raises(ValueError, match="prefill_slowdown"):
        sim.simulate(reqs, est, MuxDispatcher(est, SLO(50, 5000)), sim.Calibration(prefill_slowdown=0.9))


def test_online_guard_refines_the_planners_copy_and_ratchets_on_outliers(est):
    import copy

    reqs = sim.load_trace("conversation", limit=120, rate=2.0, input_cap=8000)
    jitter = [0.9] * 99 + [1.3]  # one co-run iteration in 100 runs 1.3x past the table's worst case
    planner = copy.deepcopy(est)
    seen, observe = [], planner.observe_decode

    def record(d, bs, sr, pn, pr, ms, max_reused=None):
        seen.append((d, bs, sr, pn, pr))
        return observe(d, bs, sr, pn, pr, ms, max_reused=max_reused)

    planner.observe_decode = record
    sim.simulate(reqs, est, MuxDispatcher(planner, SLO(50, 5000)), sim.Calibration(jitter=jitter), planner=planner)
    assert len(seen) > 500
    grown = max(planner.guard_slowdown(*x) / planner.guard_slowdown(*x, profiled=True) for x in seen)
    assert grown == pytest.approx(1.3, rel=0.01)  # one outlier in 100 sets its cell for good
    assert all(est.guard_slowdown(*x) == est.guard_slowdown(*x, profiled=True) for x in seen)  # truth as is
    with pytest.raises(ValueError, match="copy"):
        sim.simulate(reqs, est, MuxDispatcher(est, SLO(50, 5000)), planner=est)


def test_decode_jitter_reads_the_co_run_iterations(tmp_path):
    rows = [{"measured_decode_ms": 30.0, "t_decode_worst_ms": 40.0, "prefill_sms": 84, "decode_bs": 8},
            {"measured_decode_ms": 12.0, "t_decode_worst_ms": 10.0, "prefill_sms": 0, "decode_bs": 8},  # alone
            {"measured_decode_ms": 44.0, "t_decode_worst_ms": 40.0, "prefill_sms": 84, "decode_bs": 8},
            {"t_decode_worst_ms": 0.0, "prefill_sms": 132, "decode_bs": 0}]  # prefill only
    assert list(sim.decode_jitter(_write(tmp_path, rows))) == pytest.approx([0.75, 1.1])
    with pytest.raises(ValueError, match="co-run"):
        sim.decode_jitter(_write(tmp_path, rows[1:2]))


def test_cli_calibration_options(tmp_path, capsys):
    tl = _write(tmp_path, [{"measured_decode_ms": 30.0, "t_decode_worst_ms": 40.0, "prefill_sms": 84,
                            "decode_bs": 8}])
    sim.main(["--trace", "conversation", "--limit", "12", "--rate", "1", "--json", "--decode-jitter", tl,
              "--prefill-slowdown", "1.3"], estimator=FakeEstimator())
    setup = json.loads(capsys.readouterr().out)["setup"]
    assert (setup["decode_jitter"], setup["prefill_slowdown"], setup["online_guard"]) == (tl, 1.3, False)
    for bad, msg in ((["--prefill-slowdown", "0.5"], "X >= 1"), (["--host-ms", "2", "--host-from", tl], "not allowed"),
                     (["--host-from", str(tmp_path / "none.jsonl")], "--host-from"),
                     (["--decode-jitter", str(tmp_path / "none.jsonl")], "--decode-jitter"),
                     (["--fused-jitter", tl], "--fused-jitter: "),  # no fused rows in it
                     (["--prefill-slowdown", "table"], "needs --table"), (["--prefill-slowdown", "x"], "'table'")):
        with pytest.raises(SystemExit):
            sim.main(["--trace", "conversation", "--limit", "5", "--rate", "1", *bad], estimator=FakeEstimator())
        assert msg in capsys.readouterr().err


def test_table_prefill_slowdown_is_the_co_run_median_per_partition(tmp_path):
    est = FakeEstimator()

    def cell(d, n, r, lpl, ratio):  # a co-run cell whose prefill launches took ratio x the solo fit
        solo = est.prefill_ms(132 - d, [PrefillReq(n, r)]) * lpl / est.num_layers
        return {"kind": "contention", "key": [d, n, r, 32, 4096],
                "cell": {"decode_sms": d, "prefill_sms": 132 - d, "n": n, "r": r, "decode_bs": 32,
                         "decode_reused": 4096},
                "layers_per_launch": lpl, "prefill_launch_ms": solo * ratio, "corun_samples": [20.0, 21.0, 22.0]}

    rows = [cell(48, 2048, 0, 3, 1.1), cell(48, 8192, 4096, 4, 1.3), cell(48, 32768, 0, 1, 1.2),
            cell(64, 8192, 0, 2, 3.0), cell(64, 8192, 0, 2, 1.4),  # re-measured: the last line counts
            cell(16, 8192, 0, 2, 0.95),  # faster than solo: noise, floored at 1
            {"kind": "contention", "cell": {"decode_sms": 80}, "prefill_launch_ms": None},  # not timed
            {"kind": "solo_decode", "cell": {"decode_sms": 48}}]
    (tmp_path / "cells.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = sim.table_prefill_slowdown(tmp_path, est)
    assert got == {16: 1.0, 48: pytest.approx(1.2), 64: pytest.approx(1.4)}
    assert _nearest(got, 48) == pytest.approx(1.2) and _nearest(got, 56) == pytest.approx(1.2)
    with pytest.raises(ValueError, match="no such file"):
        sim.table_prefill_slowdown(tmp_path / "none", est)


# ---- the hybrid policy's fused iterations --------------------------------------------------

class FusedEvery512:
    """Every iteration fused: the queue head's prompt tokens first come, first served, up to 512
    with the decode rows (SGLang's chunked prefill 512 + mixed, as a Plan)."""

    wants_decode_contexts = False

    def queue_key(self, arrival_s, prompt_tokens):  # first come, first served
        return None

    def plan(self, snap):
        chunk, room = [], 512 - snap.decode_bs
        for w in ([snap.chunked] if snap.chunked else []) + list(snap.waiting):
            if room <= 0:
                break
            chunk.append((w.rid, min(room, w.n)))
            room -= min(room, w.n)
        if not chunk:
            return DecodePlan(partition=PartitionConfig(132, 0))
        return FusedPlan(chunk=tuple(chunk), t_ms=0.0, total_sms=132)


def test_fused_iterations_replay_chunked_prefill_exactly():
    """A policy that always fuses 512 tokens makes sim.simulate replay what sim_chunked does with
    budget 512 + mixed: the same first tokens, finishes and token gaps."""
    from sglang_mux.sim_chunked import simulate_chunked

    est = FakeEstimator()
    reqs = sim.load_trace("conversation", limit=40, rate=2, input_cap=3000)
    assert sum(q.reused for q in reqs) > 0 and max(q.n_input for q in reqs) > 512
    for host in (0.0, 2.0):
        a = sim.simulate(reqs, est, FusedEvery512(), sim.Calibration(host_ms=host), name="f")
        b = simulate_chunked(reqs, est, budget=512, mixed=True, host_ms=host)
        assert np.allclose(a.ttft_s, b.ttft_s, rtol=0, atol=1e-9)
        assert np.allclose(a.finish_s, b.finish_s, rtol=0, atol=1e-9)
        assert a.summary["tbt_p99_ms"] == pytest.approx(b.summary["tbt_p99_ms"])
        assert a.summary["partition_share"]["fused"] > 0.2 and a.summary["reasons"]["fused"] > 0


class PricedFused(FusedEvery512):
    """FusedEvery512 whose fused plans carry the hybrid's price (the budget is the gap less it);
    each Snapshot goes to ``seen`` first."""

    wants_decode_contexts = True

    def __init__(self, est, seen):
        self.est, self.seen = est, seen

    def plan(self, snap):
        self.seen.append(snap)
        p = super().plan(snap)
        if not p.chunk:
            return p
        heads = {w.rid: w for w in ([snap.chunked] if snap.chunked else []) + list(snap.waiting)}
        t = self.est.fused_ms([PrefillReq(n, heads[rid].r) for rid, n in p.chunk], decode_contexts(snap))
        return dataclasses.replace(p, t_ms=t)


def test_a_fused_iterations_host_time_is_budgeted_apart_from_a_decodes():
    """With host draws, the policy sees a fused iteration's host time (``fused_host_ms``, here
    2 ms a fused iteration) apart from a decode's (drawn 9 ms co-run, 1 ms alone); told a fixed
    host time instead, it is told ``fused_host_ms`` as given (None: the decode's)."""
    snaps = []
    est = FakeEstimator()
    reqs = sim.load_trace("conversation", limit=20, rate=2, input_cap=3000)
    sim.simulate(reqs, est, PricedFused(est, snaps), sim.Calibration(host_draws=([9.0], [1.0]), fused_host_ms=2.0, overlap_decode=False, fused_host_quantile=0.5))
    seen = [(s.decode_host_ms, s.fused_host_ms) for s in snaps]
    fused = [f for _, f in seen]
    k = next(i for i, f in enumerate(fused) if f is not None)
    # the decode's budget (None) until 3 fused iterations are seen, then the fused one's
    assert k > 0 and {round(f, 9) for f in fused[k:] if f is not None} == {2.0} and None not in fused[k:]
    assert {d for d, _ in seen} == {0.0, 1.0}  # the decode's budget saw decodes alone, no fused one
    snaps.clear()
    est = FakeEstimator()
    sim.simulate(reqs, est, PricedFused(est, snaps), sim.Calibration(host_ms=3.0))
    assert {(s.decode_host_ms, s.fused_host_ms) for s in snaps} == {(3.0, None)}


def test_a_decode_alone_overlapped_keeps_the_streak_and_books_no_host_time():
    """Under a fusing policy a decode alone with no prefill anywhere runs as SGLang's overlap loop
    runs it (the server's --mux-overlap-decode): its gap is its GPU time alone, the decode's host
    budget books nothing, and the next fused iteration continues the streak. Off, it is a
    synchronous decode: 1 ms of host time each, booked, and the streak ends."""
    reqs = sim.load_trace("conversation", limit=20, rate=2, input_cap=3000)
    runs = {}
    for overlap in (True, False):
        snaps, est = [], FakeEstimator()
        r = sim.simulate(reqs, est, PricedFused(est, snaps), sim.Calibration(host_draws=([9.0], [1.0]), fused_host_ms=2.0, overlap_decode=overlap))
        runs[overlap] = (snaps, r)
    def alone(snaps):  # decodes alone with nothing to prefill, and the snapshot after each
        return [(s, snaps[i + 1]) for i, s in enumerate(snaps[:-1])
                if not s.waiting and s.chunked is None and s.active_prefill is None and s.decode_bs > 0]

    on, off = alone(runs[True][0]), alone(runs[False][0])
    assert on and off
    assert {s.decode_host_ms for s in runs[True][0]} == {0.0}  # none booked
    assert all(nxt.fused_streak for _, nxt in on)  # the streak went on through each
    assert not any(nxt.fused_streak for _, nxt in off)  # each ended it
    assert {s.decode_host_ms for s in runs[False][0]} == {0.0, 1.0}
    # the host time hidden: requests finish sooner
    assert runs[True][1].finish_s.sum() < runs[False][1].finish_s.sum()


def test_fused_overruns_drawn_from_served_gaps_are_budgeted_as_served():
    """``fused_host_ms`` as draws (a served timeline's gaps less their price, some negative): each
    fused iteration's gap is its GPU time plus a draw, and the policy is told the P99 of what
    its gaps exceeded their price by, with no decode host draws needed."""
    snaps = []
    est = FakeEstimator()
    reqs = sim.load_trace("conversation", limit=20, rate=2, input_cap=3000)
    r = sim.simulate(reqs, est, PricedFused(est, snaps), sim.Calibration(fused_host_ms=[-1.0, 6.0], fused_host_quantile=0.9))
    seen = [s.fused_host_ms for s in snaps]
    # the P90 of {-1, 6} draws: 6 (None before 3 fused iterations are seen)
    assert seen[0] is None and max(f for f in seen if f is not None) == pytest.approx(6.0)
    assert r.summary["reasons"]["fused"] > 0
    with pytest.raises(ValueError, match="empty list of draws"):
        sim.simulate(reqs, FakeEstimator(), FusedEvery512(), sim.Calibration(fused_host_ms=[]))


def test_a_streaks_first_fused_iteration_draws_and_books_its_own_overrun():
    """``fused_start_host_ms``: the first fused iteration after any other kind draws its overrun
    from those (here 12 ms) and books it to its own budget, told the policy with the streak flag
    as the server tells it; the others draw and book the streak's (here -1 ms)."""
    snaps = []
    est = FakeEstimator()
    reqs = sim.load_trace("conversation", limit=20, rate=2, input_cap=3000)
    r = sim.simulate(reqs, est, PricedFused(est, snaps), sim.Calibration(fused_host_ms=[-1.0], fused_start_host_ms=[12.0], overlap_decode=False, fused_host_quantile=0.5))  # decodes alone end streaks: many starts
    assert snaps[0].fused_streak is False and snaps[0].fused_start_host_ms == 0.0  # nothing seen yet
    streaks = [s.fused_streak for s in snaps]
    assert True in streaks and streaks.count(False) > 1
    after = [s for s in snaps[1:] if s.fused_start_host_ms]
    assert after and {round(s.fused_start_host_ms, 9) for s in after} == {12.0}
    booked = [s.fused_host_ms for s in snaps if s.fused_host_ms is not None]
    assert booked and max(booked) == pytest.approx(0.0)  # -1 ms past the price: books 0
    assert r.summary["reasons"]["fused"] > 0
    with pytest.raises(ValueError, match="fused_start_host_ms: at least one overrun"):
        sim.simulate(reqs, FakeEstimator(), FusedEvery512(), sim.Calibration(fused_start_host_ms=[1.0]))


def _fused(*chunk):
    return FusedPlan(chunk=chunk, t_ms=0.0, total_sms=132)


class _Scripted:
    """A policy whose plans ``plan_for(snapshots seen so far)`` makes; FCFS queue."""
    wants_decode_contexts = False

    def __init__(self, plan_for):
        self.plan_for, self.snaps = plan_for, []

    def queue_key(self, arrival_s, prompt_tokens):
        return None

    def plan(self, snap):
        self.snaps.append(snap)
        return self.plan_for(self.snaps)


def test_fused_chunk_must_be_the_head_of_the_queue():
    class Wrong:
        wants_decode_contexts = False

        def queue_key(self, arrival_s, prompt_tokens):
            return None

        def plan(self, snap):
            return _fused(("nobody", 10))

    with pytest.raises(ValueError, match="not a prefix of the waiting queue"):
        sim.simulate([sim.TraceReq("a", 0.0, 100, 2, 0)], FakeEstimator(), Wrong())


def test_a_request_cut_by_a_fused_chunk_is_the_snapshots_chunked_request():
    """As in SGLang, a prompt cut at a chunk's end leaves the waiting queue: the next Snapshot
    shows its rest as ``chunked`` (done tokens as reused), and a plan that skips it is refused."""
    p = _Scripted(lambda snaps: _fused(("a", 60)) if len(snaps) == 1 else _fused(("b", 10)))
    with pytest.raises(ValueError, match="not a prefix of the waiting queue"):
        sim.simulate([sim.TraceReq("a", 0.0, 100, 2, 0), sim.TraceReq("b", 0.0, 10, 2, 0)], FakeEstimator(), p)
    second = p.snaps[1]
    assert second.chunked is not None and (second.chunked.rid, second.chunked.n, second.chunked.r) == ("a", 40, 60)
    assert [w.rid for w in second.waiting] == ["b"]


def test_hybrid_on_the_h100_table_fuses_more_as_prefill_beside_decode_slows():
    """On the capped conversation slice with the shipped H100 FA3 table: told prefill beside
    decode runs at its table speed, the hybrid partitions more than it fuses; told it runs 1.4x slower (what
    serving measured), it mostly fuses. Either way every request finishes and, with a fixed host
    time and the guard's worst case, no token gap exceeds the SLO."""
    from sglang_mux.tables import resolve_table

    h100 = Estimator.from_table(resolve_table(H100_FA3))
    reqs = sim.load_trace("conversation", limit=120, rate=3, input_cap=8000, arrival="poisson")
    shares = {}
    for slow in (1.0, 1.4):
        hy, disp = sim.run_policies(reqs, h100, "hybrid,dispatcher", sim.Calibration(host_ms=2.0, slowdown="worst", prefill_slowdown=slow))
        sh = hy.summary["partition_share"]
        shares[slow] = (sh.get("fused", 0.0), sum(v for k, v in sh.items() if not k.endswith("/P0") and k != "fused"))
        assert "fused" not in disp.summary["partition_share"]
        assert not np.isnan(hy.finish_s).any() and hy.summary["tbt_attainment"] == 1.0
    # more spatial (a prompt cut by a fused chunk is finished fused, as SGLang must)
    assert shares[1.0][1] > 1.5 * shares[1.0][0] > 0
    assert shares[1.4][0] > 10 * shares[1.4][1]  # mostly fused (19x: rule 0 cuts no new prompt)


def test_the_estimators_fused_price_is_its_solo_price_and_decode_rows_as_served(good):
    est = Estimator.from_table(good)  # its own: the served price is state
    pieces, ctx = [PrefillReq(300, 0)], [5000] * 8
    rows = pieces + [PrefillReq(1, 5000)] * 8
    solo = est.solo.prefill_ms(132, rows) + 8 * DECODE_ROW_MS  # a decode row costs more than a 1-token query
    assert est.fused_base_ms(rows) == pytest.approx(solo)
    assert est.fused_ms(pieces, ctx) == pytest.approx(solo)  # nothing served yet: that price
    assert est.observe_fused(rows, solo + 12.0) == pytest.approx((solo + 12.0) / solo)
    assert est.fused_ms(pieces, ctx) == pytest.approx(solo + 12.0)  # one size seen: its excess, slope 1
    assert est.observe_fused([], 5.0) is None


def test_estimator_fused_ms_is_the_prefill_model_on_the_whole_gpu(est):
    pieces, ctx = [PrefillReq(700, 1000), PrefillReq(300, 0)], [5000, 12000, 800]
    want = est.prefill_ms(est.total_sms, pieces + [PrefillReq(1, c) for c in ctx]) + 3 * DECODE_ROW_MS
    assert est.fused_ms(pieces, ctx) == pytest.approx(want) and est.fused_ms([], []) == 0.0
    assert est.fused_ms(pieces, ctx) > est.fused_ms(pieces, ctx[:1]) > est.prefill_ms(est.total_sms, pieces) * 0.999


def test_cli_fused_price_sets_the_served_price_the_hybrid_plans_with(good, capsys):
    """--fused-price 0,0.3: a fused iteration served at 0.3x its solo price is cheap enough to win
    where the solo price (the default) leaves every iteration spatial."""
    shares = []
    for extra in ([], ["--fused-price", "0,0.3"]):
        sim.main(["--table", str(good), "--trace", "conversation", "--limit", "60", "--rate", "2", "--input-cap",
                  "3000", "--policy", "hybrid", "--json", *extra])
        out = json.loads(capsys.readouterr().out)
        shares.append(out["results"][0]["partition_share"].get("fused", 0.0))
    assert out["setup"]["fused_price"] == "0,0.3"
    assert shares[1] > shares[0]


def test_cli_runs_the_hybrid_and_all_includes_it(capsys):
    sim.main(["--trace", "conversation", "--limit", "20", "--rate", "2", "--policy", "all", "--json",
              "--fused-host-ms", "1.5"], estimator=FakeEstimator())
    out = json.loads(capsys.readouterr().out)
    assert out["results"][-1]["policy"] == "hybrid" and out["setup"]["fused_host_ms"] == 1.5
    sim.main(["--trace", "conversation", "--limit", "20", "--rate", "2", "--policy", "hybrid"],
             estimator=FakeEstimator())
    assert "hybrid" in capsys.readouterr().out


def _planners(monkeypatch) -> list:
    """The planner each later ``sim.simulate`` call is given (``run_policies``' copies), in order."""
    planners, real = [], sim.simulate

    def spy(reqs_, est_, pol, *a, **kw):
        planners.append(kw["planner"])
        return real(reqs_, est_, pol, *a, **kw)

    monkeypatch.setattr(sim.runs, "simulate", spy)
    return planners


def test_the_hybrid_in_the_simulator_learns_the_fused_price_as_a_server_does(monkeypatch):
    """With ``online_guard`` the planner starts from the server's prior (a fresh FusedPrice: the
    solo price, not known) and learns each fused iteration's true time: here the truth is 10 ms +
    1.0 x solo, and after a run where the hybrid fuses (the H100 table, prompts <= 2000 tokens,
    prefill beside decode 1.4x slower) the planner's price is that line. Planning with the truth
    itself, the policy knows its price."""
    from sglang_mux.tables import resolve_table

    truth = Estimator.from_table(resolve_table(H100_FA3))
    truth.fused_price.fixed, truth.fused_price.slope = 10.0, 1.0
    reqs = sim.load_trace("conversation", limit=60, rate=3, input_cap=2000, arrival="poisson")
    (told,) = sim.run_policies(reqs, truth, "hybrid", sim.Calibration(host_ms=2.0, prefill_slowdown=1.4))
    assert truth.fused_price.known and told.summary["reasons"]["fused"] > 0
    learned = _planners(monkeypatch)
    (hy,) = sim.run_policies(reqs, truth, "hybrid", sim.Calibration(host_ms=2.0, prefill_slowdown=1.4), online_guard=True)
    price = learned[0].fused_price
    assert price is not truth.fused_price and not price.known and price.learned
    assert hy.summary["reasons"]["fused"] >= price.warmup
    assert (price.fixed, price.slope) == pytest.approx((10.0, 1.0), abs=1e-6)
    assert truth.fused_price.margin == 0.0 and price.margin == pytest.approx(0.0, abs=1e-6)


def test_fused_jitter_reads_measured_over_base_of_the_served_fused_rows(tmp_path):
    """The base is recovered from the planned price and the price's state (`FusedPrice.base_of`);
    a yield's and a park's iterations are fused ones too."""
    line = {"fixed_ms": 0.0, "slope": 1.0, "ratio": 0.0, "margin_ms": 0.0}
    rows = [{"reason": "fused", "measured_decode_ms": 33.0, "t_decode_worst_ms": 30.0, "fused_price": line},
            {"reason": "fused", "measured_decode_ms": 45.0, "t_decode_worst_ms": 60.0,  # base 50: 5 + 1.0 x + 5
             "fused_price": {"fixed_ms": 5.0, "slope": 1.0, "ratio": 0.0, "margin_ms": 5.0}},
            {"reason": "yield+fused", "measured_decode_ms": 12.0, "t_decode_worst_ms": 10.0, "fused_price": line},
            {"reason": "park+fused", "measured_decode_ms": 8.0, "t_decode_worst_ms": 10.0, "fused_price": line},
            {"reason": "decode-only", "measured_decode_ms": 20.0, "t_decode_worst_ms": 20.0, "fused_price": line}]
    assert list(sim.fused_jitter(_write(tmp_path, rows))) == pytest.approx([1.1, 0.9, 1.2, 0.8])
    with pytest.raises(ValueError, match="fused"):
        sim.fused_jitter(_write(tmp_path, rows[4:]))


def test_fused_jitter_by_size_keeps_each_padded_sizes_own_ratios(tmp_path):
    """A size with SIZE_MIN_OBS fused rows draws its own ratios; the rest, and a size unseen or
    unknown, draw the pooled ones."""
    import random

    from sglang_mux.fused_price import SIZE_MIN_OBS

    line = {"fixed_ms": 0.0, "slope": 1.0, "ratio": 0.0, "margin_ms": 0.0}
    row = lambda m, n: {"reason": "fused", "measured_decode_ms": m, "t_decode_worst_ms": 20.0,  # noqa: E731
                        "fused_price": line, "extend_tokens": n}
    rows = [row(20.0, 500)] * SIZE_MIN_OBS + [row(24.0, 600)] * (SIZE_MIN_OBS - 1)  # padded: 512, 640
    fj = sim.fused_jitter_by_size(_write(tmp_path, rows))
    assert sorted(fj.by_size) == [512] and set(fj.by_size[512]) == {1.0} and len(fj.pooled) == len(rows)
    rng = random.Random(0)
    assert {fj.draw(rng, 512) for _ in range(50)} == {1.0}
    assert {fj.draw(rng, 640) for _ in range(200)} == {1.0, 1.2} == {fj.draw(rng, None) for _ in range(200)}


def test_a_by_size_draw_follows_the_fused_batchs_padded_size(monkeypatch):
    """In the simulator a fused iteration takes its padded size's ratio: with 1,536-token batches
    (most of the hybrid's here) drawn at 2x and every other size at 1x, each batch of that size
    runs at 2x and every other at 1x, and the price the hybrid learns keeps it to less than half
    as many of them."""
    from sglang_mux.fused_price import FusedPrice
    from sglang_mux.tables import resolve_table

    truth = Estimator.from_table(resolve_table(H100_FA3))
    reqs = sim.load_trace("conversation", limit=80, rate=3, input_cap=2000, arrival="poisson")
    seen = []
    observe = FusedPrice.observe

    def spy(self, solo_ms, measured_ms, size=None):
        seen.append((len(seen) and seen[-1][0], size, measured_ms / solo_ms))
        return observe(self, solo_ms, measured_ms, size)

    monkeypatch.setattr(FusedPrice, "observe", spy)
    runs = {}
    for name, dear in (("flat", 1.0), ("dear", 2.0)):
        seen.clear()
        fj = sim.FusedJitter(np.array([1.0]), {1536: np.array([dear])})
        sim.run_policies(reqs, truth, "hybrid", sim.Calibration(host_ms=2.0, prefill_slowdown=1.4, fused_jitter=fj), online_guard=True, prefill_graph=True)
        runs[name] = [(z, r) for _, z, r in seen]
    assert {round(r, 6) for z, r in runs["dear"] if z == 1536} == {2.0}
    assert {round(r, 6) for z, r in runs["dear"] if z != 1536} == {1.0}
    n = {k: sum(z == 1536 for z, _ in v) for k, v in runs.items()}
    assert n["flat"] > 0.8 * len(runs["flat"]) and n["dear"] < n["flat"] / 2


def test_fused_jitter_scales_each_fused_iteration_and_the_learned_margin_follows(monkeypatch):
    """Fused iterations at their exact price leave a learned price's margin at 0; drawn at 0.8x to
    1.25x it, the planner learns a margin, as servers do (4-11 ms on the 70B)."""
    from sglang_mux.tables import resolve_table

    truth = Estimator.from_table(resolve_table(H100_FA3))
    reqs = sim.load_trace("conversation", limit=60, rate=3, input_cap=2000, arrival="poisson")
    planners = _planners(monkeypatch)
    for fj in (None, [0.8, 1.0, 1.0, 1.25]):
        sim.run_policies(reqs, truth, "hybrid", sim.Calibration(host_ms=2.0, prefill_slowdown=1.4, fused_jitter=fj), online_guard=True, prefill_graph=True)
    exact, jittered = (p.fused_price for p in planners)
    assert exact.margin == pytest.approx(0.0, abs=1e-6) and jittered.margin > 1.0
    with pytest.raises(ValueError, match="fused_jitter"):
        sim.run_policies(reqs, truth, "hybrid", sim.Calibration(fused_jitter=[]))


def test_through_the_prefill_graph_the_hybrid_cuts_long_prompts_from_the_start(monkeypatch):
    """``prefill_graph``: the planner acts on the base price in full before any fused iteration (a
    server with SGLang's prefill CUDA graph does), and both it and the truth pad a fused batch to
    the graph's next captured size. On a conversation whose prompts reach 8,000
    tokens, where the base price (the table's fused model) is the truth, the learning hybrid
    otherwise cannot cut a long prompt (its rest must fit one more chunk) and stays on partitions:
    100 fused decisions of ~1,500 against 292 (79 against 299 priced by the solo fit + DECODE_ROW_MS)."""
    from sglang_mux.tables import resolve_table

    truth = Estimator.from_table(resolve_table(H100_FA3))
    reqs = sim.load_trace("conversation", limit=60, rate=3, input_cap=8000, arrival="poisson")
    planners = _planners(monkeypatch)
    fused = [sim.run_policies(reqs, truth, "hybrid", sim.Calibration(host_ms=2.0, prefill_slowdown=1.4), online_guard=True, prefill_graph=h)[0].summary["reasons"]["fused"] for h in (False, True)]
    assert [p.fused_price.prior_holds for p in planners] == [False, True]
    assert planners[0].graph_tokens == truth.graph_tokens == () and planners[1].graph_tokens[-2:] == (3840, 4096)
    assert fused == [100, 292]


def test_a_learning_hybrid_learns_a_partitions_wall_time_as_the_server_does(monkeypatch):
    """With ``online_guard`` the hybrid is told no co-run slowdown: its planner books each finished
    layer-wise batch's wall time against the T_P its plan gave it (``prefill_wall``), as the
    server's loop does; the slowdown the simulator plays shows in that factor."""
    from sglang_mux.tables import resolve_table

    truth = Estimator.from_table(resolve_table(H100_FA3))
    reqs = sim.load_trace("conversation", limit=60, rate=3, input_cap=8000, arrival="poisson")
    seen, real = [], sim.simulate

    def spy(reqs_, est_, pol, *a, **kw):
        seen.append((pol, kw["planner"]))
        return real(reqs_, est_, pol, *a, **kw)

    monkeypatch.setattr(sim.runs, "simulate", spy)
    sim.run_policies(reqs, truth, "hybrid", sim.Calibration(host_ms=2.0, prefill_slowdown=1.4), online_guard=True)
    sim.run_policies(reqs, truth, "hybrid", sim.Calibration(host_ms=2.0, prefill_slowdown=1.4))
    (learning, planner), (told, none) = seen
    assert learning.prefill_slowdown == {0: 1.0} and told.prefill_slowdown == {0: 1.4} and none is None
    assert len(planner.prefill_wall._obs) >= 4 and planner.prefill_wall.factor >= 1.4
    assert truth.prefill_wall.factor == 1.0  # the truth learns nothing


def test_cli_prefill_graph_is_recorded_and_changes_the_fused_price(capsys):
    from sglang_mux.tables import resolve_table

    def run(*extra):
        sim.main(["--trace", "conversation", "--limit", "30", "--rate", "2", "--input-cap", "3000", "--policy",
                  "hybrid", "--json", *extra], estimator=Estimator.from_table(resolve_table(H100_FA3)))
        return json.loads(capsys.readouterr().out)

    plain, graph = run(), run("--prefill-graph")
    assert (plain["setup"]["prefill_graph"], graph["setup"]["prefill_graph"]) == (False, True)
    busy = [r["results"][0]["prefill_busy_s"] for r in (plain, graph)]
    assert busy[1] > busy[0]  # padded fused batches take longer


def test_batch_starts_draw_their_own_host_time_and_are_told_the_policy():
    """``start_host_ms``: an iteration whose plan starts a layer-wise batch beside a decode draws
    its host time from these, and the policy is told their P90 (``Snapshot.start_host_ms``), as
    the server books starts apart; without them it is told None."""
    snaps = []

    class Seeing:
        wants_decode_contexts = False

        def __init__(self, inner):
            self.inner = inner
            self.queue_key = inner.queue_key

        def plan(self, snap):
            snaps.append(snap)
            return self.inner.plan(snap)

    class Gaps:  # the simulator's timeline: each decode iteration's gap, apart for batch starts
        def __init__(self):
            self.start, self.other = [], []

        def write(self, plan, measured_decode_ms=None, **_):
            if measured_decode_ms is not None:
                (self.start if plan.new_prefill_rids else self.other).append(measured_decode_ms)

    reqs = sim.load_trace("conversation", limit=30, rate=2, input_cap=3000)
    runs = {}
    for name, starts in (("starts", [500.0]), ("plain", None)):  # a start's host time far above any GPU time
        snaps.clear()
        est, gaps_ = FakeEstimator(), Gaps()
        sim.simulate(reqs, est, Seeing(make_policy("dispatcher", est, SLO(2000.0))), sim.Calibration(host_draws=([2.0], [1.0]), start_host_ms=starts), timeline=gaps_)
        runs[name] = ([s.start_host_ms for s in snaps], gaps_)
    told, g = runs["starts"]
    assert told[0] == 0.0 and max(told) == pytest.approx(500.0)
    assert g.start and min(g.start) >= 500.0 and max(g.other) < 500.0  # a start's gap: GPU time + 500 ms
    told, g = runs["plain"]
    assert set(told) == {None} and g.start and max(g.start) < 500.0
    pol = Seeing(make_policy("dispatcher", FakeEstimator(), SLO(50.0)))
    with pytest.raises(ValueError, match="start_host_ms"):
        sim.simulate(reqs, FakeEstimator(), pol, sim.Calibration(start_host_ms=[]))


def test_a_yield_runs_whole_waiting_prompts_and_keeps_the_chunked_rest():
    """The replay's side of rule 0's yield: a yielding plan's chunk runs the queue's head and
    leaves the chunked rest as it was; a yield that cuts a prompt is refused (SGLang keeps one
    request mid-prefill), and so is a plan that skips the chunked request without yielding."""
    from collections import deque

    from sglang_mux.policy import WaitingReq
    from sglang_mux.sim.replay import _take_chunk

    long = WaitingReq("long", 95.0, 60000, 4000)
    waiting = deque([WaitingReq("s", 99.9, 300, 0), WaitingReq("t", 99.95, 500, 0)])
    pieces, done, rest = _take_chunk((("s", 300),), long, waiting, yields=True)
    assert pieces == [PrefillReq(300, 0)] and done == ["s"] and rest is long and [w.rid for w in waiting] == ["t"]
    pieces, done, rest = _take_chunk((("long", 252),), long, waiting)  # it goes on where it stopped
    assert done == [] and rest == WaitingReq("long", 95.0, 59748, 4252)
    with pytest.raises(ValueError, match="cuts a prompt while long yields"):
        _take_chunk((("t", 200),), long, waiting, yields=True)
    with pytest.raises(ValueError, match="not a prefix"):
        _take_chunk((("t", 500),), long, waiting)


def test_the_replay_queues_prompts_in_the_policys_order():
    """As the server sorts SGLang's queue: with the dispatcher's earliest-deadline order (2 s +
    0.2 ms a token) a 300-token prompt that arrives behind a 30,000-token one that has not
    started is planned ahead of it; with fcfs it waits its turn. Every request finishes."""
    from sglang_mux.policy import SLO, MuxDispatcher

    reqs = [sim.TraceReq("long", 0.0, 30_000, 2, 0), sim.TraceReq("long2", 0.001, 30_000, 2, 0),
            sim.TraceReq("short", 0.002, 300, 2, 0)]
    orders = {}
    for fcfs in (False, True):
        seen = []

        class Seeing(MuxDispatcher):
            def plan(self, snap):
                seen.append(tuple(w.rid for w in snap.waiting))
                return super().plan(snap)

        r = sim.simulate(reqs, FakeEstimator(), Seeing(FakeEstimator(), SLO(50, 2000, 0.2), fcfs=fcfs),
                         slo=SLO(50, 2000, 0.2))
        assert not np.isnan(r.finish_s).any()
        orders[fcfs] = next(o for o in seen if len(o) == 2)
    assert orders == {False: ("short", "long2"), True: ("long2", "short")}


def test_a_prompt_too_long_to_yield_to_parks_the_chunked_one_and_both_finish():
    """A 6,000-token prompt arriving while a 60,000-token one (over the layer-wise cap) runs as
    fused chunks beside 8 decodes: it fits no chunk whole, and waiting out the long one's rest it
    would miss its TTFT SLO (1 s + 0.2 ms x 6,000), so the long one is parked for it (once) and
    resumes after it; with preemption off it waits, and misses."""
    from sglang_mux.tables import resolve_table

    est = Estimator.from_table(resolve_table(H100_FA3))
    reqs = [sim.TraceReq(f"chat{i}", 0.01 * i, 2000, 2000) for i in range(8)]
    reqs += [sim.TraceReq("long", 0.2, 60000, 8), sim.TraceReq("medium", 1.0, 6000, 8)]
    slo = SLO(50, 1000, 0.2)
    out = {}
    for preemption in (True, False):
        r = sim.run_policies(reqs, est, "hybrid", sim.Calibration(host_ms=2.0), slo=slo, prefill_graph=True,
                             layerwise_max_tokens=40000, preemption=preemption)[0]
        assert np.isfinite(r.finish_s).all()  # every request finished, the parked one too
        out[preemption] = (r.summary["reasons"].get("park+fused", 0), r.ttft_s[-2], r.ttft_s[-1])
    parks, long_ttft, medium_ttft = out[True]
    assert parks == 1 and medium_ttft < 1.0 + 0.2 * 6 < out[False][2] and out[False][0] == 0
    assert long_ttft < 1.0 + 0.2 * 60  # the parked prompt still meets its own


def test_a_second_park_while_one_is_parked_is_refused():
    """The replay parks one request at a time, as the server does: a plan that parks again while
    one is parked is an error, never a request silently lost."""
    # a is cut (SGLang's chunked request), then the queue's head, b, then c, is cut in its place
    p = _Scripted(lambda snaps: _fused(("a", 60)) if len(snaps) == 1
                  else dataclasses.replace(_fused((snaps[-1].waiting[0].rid, 5)), parks=True))
    reqs = [sim.TraceReq(r, 0.0, 100, 2, 0) for r in "abc"]
    with pytest.raises(ValueError, match="parks b while a is parked"):
        sim.simulate(reqs, FakeEstimator(), p)
    assert (p.snaps[1].chunked.rid, p.snaps[1].parked) == ("a", None)
    assert (p.snaps[2].chunked.rid, p.snaps[2].parked.rid) == ("b", "a")
