"""The SLO-aware dispatcher: exact expectations against small fake estimators, plus an
integration check against the real Estimator on a synthetic table."""

import dataclasses
import io
import json
import math
import statistics
import subprocess
import sys
import time
from contextlib import redirect_stdout
from dataclasses import replace
from types import SimpleNamespace
from pathlib import Path

import pytest

from sglang_mux import dispatch
from sglang_mux import policy as D
from sglang_mux.estimator import PrefillReq
from sglang_mux.policy import (SLO, BatchSizePolicy, FixedPolicy, MuxDispatcher, PrefillBatchState, Snapshot,
                               SoloOnlyEstimator, WaitingReq, apply_plan, prefill_layers_for)
from sglang_mux.policy.hybrid import COMMIT_SPANS

OPTIONS = [16, 32, 48, 64, 80, 96, 112]
ROOT = Path(__file__).resolve().parents[1]


class FakeEstimator(SoloOnlyEstimator):
    """Analytic and cheap: decode slows with fewer SMs, more requests, longer contexts and a
    co-running prefill (guard 1.25); prefill is linear in tokens and inverse in SMs."""

    num_layers = 32
    total_sms = 132
    decode_sms_options = OPTIONS
    guard = 1.25

    def decode_solo_ms(self, d, bs, sum_reused, max_reused=None):
        return (4.0 + 0.05 * bs + 3e-5 * sum_reused) * (132 / d) ** 0.6

    def decode_worst_ms(self, d, bs, sum_reused, prefill_new, prefill_reused, max_reused=None):
        t = self.decode_solo_ms(d, bs, sum_reused)
        return t if d >= 132 or prefill_new <= 0 else t * self.guard

    def prefill_ms(self, p, reqs):
        return sum(0.1 * q.n + 1e-6 * q.n * q.n + 1e-6 * q.n * q.r for q in reqs) * 132 / p + 2.0


class TableEstimator(FakeEstimator):
    """Worst-case decode latency given per partition, for exact best-fit expectations."""

    def __init__(self, worst, prefill_ms=1000.0):
        self.worst, self.p_ms = worst, prefill_ms

    def decode_worst_ms(self, d, bs, sum_reused, prefill_new, prefill_reused, max_reused=None):
        return self.worst[d] if d < 132 and prefill_new > 0 else 10.0

    def prefill_ms(self, p, reqs):
        return self.p_ms


def snap(bs=0, reused_per_req=0, waiting=(), active=None, paused=None, now=100.0):
    return Snapshot(now, bs, bs * reused_per_req, active_prefill=active, paused_prefill=paused, waiting=tuple(waiting))


def w(rid, n, r=0, arrival=100.0):
    return WaitingReq(rid, arrival, n, r)


# ---- partition choice ------------------------------------------------------------------------

def test_best_fit_exact_table():
    est = TableEstimator({16: 80.0, 32: 60.0, 48: 50.0, 64: 40.0, 80: 30.0, 96: 20.0, 112: 10.0}, 1000.0)
    p = MuxDispatcher(est, SLO(50, 5000)).plan(snap(8, 100, [w("a", 1000)]))
    assert (p.decode_sms, p.prefill_sms, p.reason) == (48, 84, "best-fit")  # 50.0 <= 50: meets
    assert p.t_decode_worst_ms == 50.0 and p.t_prefill_ms == 1000.0
    assert p.prefill_layers == math.ceil(50 * 32 / 1000)  # 2
    assert p.new_prefill_rids == ("a",) and not p.preempt
    p = MuxDispatcher(est, SLO(49.9, 5000)).plan(snap(8, 100, [w("a", 1000)]))
    assert p.decode_sms == 64


def test_best_fit_budgets_the_loops_host_time():
    est = TableEstimator({16: 80.0, 32: 60.0, 48: 50.0, 64: 40.0, 80: 30.0, 96: 20.0, 112: 10.0}, 1000.0)
    d = MuxDispatcher(est, SLO(50, 5000))

    def plan(host_ms):
        return d.plan(Snapshot(100.0, 8, 800, waiting=(w("a", 1000),), decode_host_ms=host_ms))

    assert plan(0.0).decode_sms == 48  # 50 <= 50
    assert plan(0.1).decode_sms == 64  # 50 > 49.9: the next partition up
    assert plan(10.0).decode_sms == 64 and plan(10.0).t_decode_worst_ms == 40.0
    assert plan(10.1).decode_sms == 80
    # A host stall is not planned for: at most half the SLO is taken (budget 25 ms: 20 ms fits).
    assert plan(500.0).decode_sms == 96 and d.tbt_budget_ms(Snapshot(0.0, 1, 0, decode_host_ms=500.0)) == 25.0
    assert plan(-3.0).decode_sms == 48  # a negative reading is no host time


def test_decode_host_time_is_a_windowed_quantile():
    h = D.DecodeHostTime(window=10, quantile=0.9, refresh=5)
    assert h.value_ms == 0.0
    for gap in range(1, 11):  # wall = 20 + gap ms over 20 ms of GPU: gaps 1..10
        h.observe(20.0 + gap, 20.0)
    assert h.value_ms == 10.0  # sorted 1..10, index int(0.9 * 10) = 9
    h.observe(15.0, 20.0)  # the GPU outlasted the wall reading: no host time, not a negative one
    for _ in range(4):
        h.observe(21.0, 20.0)  # the window keeps the last 10: 6..10, 0, 1, 1, 1, 1
    assert sorted(h._gaps) == [0.0, 1.0, 1.0, 1.0, 1.0, 6.0, 7.0, 8.0, 9.0, 10.0]
    assert h.value_ms == 10.0
    for _ in range(10):
        h.observe(21.0, 20.0)
    assert h.value_ms == 1.0
    h.observe(float("nan"), 20.0)  # ignored
    assert len(h._gaps) == 10
    with pytest.raises(ValueError):
        D.DecodeHostTime(window=0)


def test_best_fit_is_fewest_meeting_sms():
    est = FakeEstimator()
    for bs in range(1, 300, 3):
        for rr in (0, 512, 4096, 16384):
            s = snap(bs, rr, [w("a", 4096, 1024)])
            p = MuxDispatcher(est, SLO(50, 5000)).plan(s)
            if p.reason != "best-fit":
                continue
            assert p.t_decode_worst_ms <= 50
            assert p.prefill_sms == 132 - p.decode_sms
            assert est.decode_worst_ms(p.decode_sms, bs, bs * rr, 4096, 1024) <= 50
            i = OPTIONS.index(p.decode_sms)
            if i:
                assert est.decode_worst_ms(OPTIONS[i - 1], bs, bs * rr, 4096, 1024) > 50


def _plan(est, slo, bs, rr, active=None, now=100.0):
    waiting = [] if active else [w("a", 2048, 512, arrival=now)]
    return MuxDispatcher(est, SLO(slo, 5000)).plan(snap(bs, rr, waiting, active=active, now=now))


@pytest.mark.parametrize("slack", ["fresh", "late"])
def test_monotone_more_load_never_fewer_decode_sms(slack):
    est = FakeEstimator()
    # "late": an active batch past its TTFT slack, so overload takes the max-decode branch.
    active = (PrefillBatchState(["x"], [PrefillReq(8192, 2048)], 3, arrival_s=100.0 - 4.99)
              if slack == "late" else None)
    bss = list(range(1, 400, 5))
    rrs = [0, 256, 1024, 4096, 8192, 16384, 65536]
    slos = [100, 80, 60, 50, 40, 30, 20, 15, 10, 5]  # tightening
    seen, reasons = set(), set()
    for rr in rrs:
        prev = 0
        for bs in bss:
            p = _plan(est, 50, bs, rr, active)
            d = p.decode_sms
            seen.add(d)
            reasons.add(p.reason)
            assert d >= prev, (bs, rr)
            prev = d
    for bs in bss[::4]:
        prev = 0
        for rr in rrs:
            d = _plan(est, 50, bs, rr, active).decode_sms
            assert d >= prev, (bs, rr)
            prev = d
    for bs in bss[::4]:
        for rr in rrs[::2]:
            prev = 0
            for slo in slos:
                d = _plan(est, slo, bs, rr, active).decode_sms
                assert d >= prev, (bs, rr, slo)
                prev = d
    assert len(seen) >= 4  # the sweep really crosses partitions and reaches overload
    assert {"best-fit", "overload-decode-first" if slack == "fresh" else "overload-max-decode"} <= reasons


# ---- N_PL --------------------------------------------------------------------------------------

def test_prefill_layers_formula():
    assert prefill_layers_for(48, 1000, 32, 0) == 2  # ceil(1.536)
    assert prefill_layers_for(25, 100, 32, 0) == 8  # exactly 8: no spurious round-up
    assert prefill_layers_for(50, 100, 32, 0) == 16
    assert prefill_layers_for(50, 10, 32, 30) == 2  # clamped to what remains
    assert prefill_layers_for(0.1, 1e6, 32, 0) == 1  # at least one layer
    assert prefill_layers_for(50, 100, 32, 32) == 0  # nothing left
    assert prefill_layers_for(50, 0.0, 32, 4) == 28


def test_plan_n_pl_uses_chosen_partition():
    est = FakeEstimator()
    s = snap(32, 2048, [w("a", 16384)])
    p = MuxDispatcher(est, SLO(50, 5000)).plan(s)
    t_p = est.prefill_ms(p.prefill_sms, [PrefillReq(16384, 0)])
    assert p.t_prefill_ms == pytest.approx(t_p)
    assert p.prefill_layers == max(1, math.ceil(p.t_decode_worst_ms * 32 / t_p))
    act = PrefillBatchState(["a"], [PrefillReq(16384, 0)], 31, 100.0)
    assert MuxDispatcher(est, SLO(50, 5000)).plan(snap(32, 2048, active=act)).prefill_layers == 1


# ---- full-GPU modes, batch formation --------------------------------------------------------

def test_full_gpu_modes_and_idle():
    est = FakeEstimator()
    d = MuxDispatcher(est, SLO(50, 5000))
    p = d.plan(snap(64, 1000))
    assert (p.decode_sms, p.prefill_sms, p.prefill_layers, p.reason) == (132, 0, 0, "decode-only")
    assert p.t_decode_worst_ms == pytest.approx(est.decode_solo_ms(132, 64, 64000))
    p = d.plan(snap(0, 0, [w("a", 8192)]))
    assert (p.decode_sms, p.prefill_sms, p.reason, p.new_prefill_rids) == (0, 132, "prefill-only", ("a",))
    t_p = est.prefill_ms(132, [PrefillReq(8192, 0)])
    assert p.prefill_layers == math.ceil(50 * 32 / t_p)  # TBT-long quantum: stays preemptable
    p = MuxDispatcher(est, SLO(50, 5000), preemption=False).plan(snap(0, 0, [w("a", 8192)]))
    assert p.prefill_layers == 32  # nothing can preempt it: all layers at once
    p = d.plan(snap())
    assert (p.reason, p.prefill_layers, p.new_prefill_rids) == ("idle", 0, ())


def test_batch_formation_fcfs_budget():
    est = FakeEstimator()
    d = MuxDispatcher(est, SLO(50, 5000), max_prefill_tokens=10000, max_prefill_bs=3)
    q = [w("a", 4000), w("b", 4000), w("c", 4000), w("d", 100)]
    assert d.plan(snap(4, 100, q)).new_prefill_rids == ("a", "b")  # c does not fit; d not skipped to
    q = [w("a", 100), w("b", 100), w("c", 100), w("d", 100)]
    assert d.plan(snap(4, 100, q)).new_prefill_rids == ("a", "b", "c")  # batch-size cap
    q = [w("big", 50000), w("b", 10)]
    assert d.plan(snap(4, 100, q)).new_prefill_rids == ("big",)  # first request always taken


def test_batch_formation_reads_only_the_head_of_the_queue():
    class Guarded(list):
        def __iter__(self):
            for i, x in enumerate(list.__iter__(self)):
                assert i < 20, "read past the batch being formed"
                yield x

    q = Guarded(w(f"r{i}", 1000) for i in range(1000))
    p = MuxDispatcher(FakeEstimator(), SLO(50, 5000)).plan(Snapshot(100.0, 64, 64000, waiting=q))
    assert len(p.new_prefill_rids) == 16


def test_active_batch_continues_and_paused_resumes_first():
    est = FakeEstimator()
    d = MuxDispatcher(est, SLO(50, 5000))
    act = PrefillBatchState(["a"], [PrefillReq(8000, 0)], 10, 99.0)
    p = d.plan(snap(16, 1000, [w("z", 100)], active=act))
    assert p.new_prefill_rids == () and p.prefill_layers > 0
    paused = PrefillBatchState(["p"], [PrefillReq(8000, 0)], 10, 90.0, preempted_by_other=True)
    p = d.plan(snap(16, 1000, [w("z", 100)], paused=paused))
    assert p.new_prefill_rids == () and p.prefill_layers > 0
    a2, p2, k = apply_plan(p, None, paused, [w("z", 100)])
    assert a2 is paused and p2 is None and k == 0


# ---- preemption --------------------------------------------------------------------------------

class LinearPrefill(FakeEstimator):
    def prefill_ms(self, p, reqs):  # 0.1 ms per new token on the full GPU
        return sum(0.1 * q.n for q in reqs) * 132 / p


def _preempt_case(*, long_age_s=3.0, short_age_s=0.1, short_n=1000, per_token=0.2, base=500,
                  preemption=True, **flags):
    """Prefill-only (no decode): long = 40k tokens (4 s), half done (2 s left); short = 0.1 s.
    TTFT SLO = 500 ms + 0.2 ms/token: long 8.5 s, short 0.7 s."""
    est = LinearPrefill()
    now = 100.0
    long = PrefillBatchState(["long"], [PrefillReq(40000, 0)], 16, now - long_age_s, **flags)
    d = MuxDispatcher(est, SLO(50, base, per_token), preemption=preemption)
    return d, snap(0, 0, [w("s", short_n, arrival=now - short_age_s)], active=long, now=now), long


def test_preemption_allowed():
    d, s, long = _preempt_case()
    p = d.plan(s)
    assert p.preempt and p.new_prefill_rids == ("s",) and p.reason == "preempt+prefill-only"
    assert p.prefill_layers == 32  # a preemptor cannot be preempted: no quantum needed
    act, paused, k = apply_plan(p, long, None, s.waiting)
    assert k == 1 and paused is long and long.preempted_by_other and long.layers_done == 16
    assert act.is_preemptor and act.rids == ["s"]
    # No recursion: a newer short request cannot preempt the preemptor ...
    later = Snapshot(100.05, 0, 0, active_prefill=act, paused_prefill=paused, waiting=(w("s2", 500, arrival=100.0),))
    p2 = d.plan(later)
    assert not p2.preempt and p2.new_prefill_rids == ()
    # ... and when the preemptor is done, the preempted batch resumes where it stopped.
    after = Snapshot(100.2, 1, 1001, active_prefill=None, paused_prefill=paused, waiting=(w("s2", 500, arrival=100.0),))
    p3 = d.plan(after)
    assert not p3.preempt and p3.new_prefill_rids == () and p3.prefill_layers > 0
    assert apply_plan(p3, None, paused, after.waiting)[:2] == (paused, None)
    # ... and a resumed batch may be preempted again (only a preemptor may not: MuxWise §3.4) by a
    # short batch that would miss its deadline behind it while it still meets its own.
    again = Snapshot(100.3, 0, 0, active_prefill=paused, waiting=(w("s3", 500, arrival=100.29 - 1.0),))
    p4 = d.plan(again)
    assert p4.preempt and p4.new_prefill_rids == ("s3",)
    assert apply_plan(p4, paused, None, again.waiting)[1] is paused
    late = Snapshot(104.0, 0, 0, active_prefill=paused, waiting=(w("s4", 500, arrival=103.99 - 1.0),))
    assert not d.plan(late).preempt  # its 2 s left after the short's 0.05 s: 106.05, past its own 97 + 8.5 s


def test_preemption_with_decode_running_uses_best_fit():
    d, s, long = _preempt_case()
    s = Snapshot(s.now_s, 16, 16000, active_prefill=long, paused_prefill=None, waiting=s.waiting)
    p = d.plan(s)
    assert p.preempt and p.reason == "preempt+best-fit" and 0 < p.decode_sms < 132


@pytest.mark.parametrize("case, kw", [
    ("long would miss its TTFT", dict(long_age_s=7.0)),
    ("short meets its TTFT waiting", dict(per_token=2.0)),
    ("short is not shorter than what remains", dict(short_n=30000, per_token=0.01)),
    ("flat SLO: the newer batch never preempts", dict(per_token=0.0, base=2000)),
    ("preemption switched off", dict(preemption=False)),
    ("active batch is a preemptor", dict(is_preemptor=True)),
])
def test_preemption_denied(case, kw):
    d, s, _ = _preempt_case(**kw)
    p = d.plan(s)
    assert not p.preempt and p.new_prefill_rids == () and not p.reason.startswith("preempt"), case


def test_no_preemption_while_a_batch_is_paused():
    d, s, long = _preempt_case()
    other = PrefillBatchState(["o"], [PrefillReq(100, 0)], 0, 99.0, preempted_by_other=True)
    assert not d.plan(Snapshot(s.now_s, 0, 0, active_prefill=long, paused_prefill=other, waiting=s.waiting)).preempt


# ---- overload ----------------------------------------------------------------------------------

def test_overload_decode_first_then_max_decode():
    est = TableEstimator({k: 80.0 for k in OPTIONS}, prefill_ms=1000.0)  # nothing meets 50 ms
    d = MuxDispatcher(est, SLO(50, 5000))
    p = d.plan(snap(64, 1000, [w("a", 4000, arrival=100.0)]))
    # Fresh prefill with plenty of TTFT slack: decode alone on the full GPU, batch not started.
    assert (p.decode_sms, p.prefill_sms, p.prefill_layers, p.reason) == (132, 0, 0, "overload-decode-first")
    assert p.new_prefill_rids == () and p.t_decode_worst_ms == 10.0
    # Slack gone (1 s of prefill left on the smallest prefill partition, 4.2 s already waited):
    p = d.plan(snap(64, 1000, [w("a", 4000, arrival=100.0 - 4.2)]))
    assert (p.decode_sms, p.prefill_sms, p.reason) == (112, 20, "overload-max-decode")
    assert p.new_prefill_rids == ("a",) and p.prefill_layers == math.ceil(80 * 32 / 1000)
    act = PrefillBatchState(["a"], [PrefillReq(4000, 0)], 8, 100.0 - 4.5)
    p = d.plan(snap(64, 1000, active=act))
    assert p.reason == "overload-max-decode" and p.prefill_layers == 3


# ---- baselines -----------------------------------------------------------------------------------

def test_fixed_and_batch_size_policies():
    est = FakeEstimator()
    p = FixedPolicy(est, 64).plan(snap(8, 100, [w("a", 4000)]))
    assert (p.decode_sms, p.prefill_sms, p.reason) == (64, 68, "fixed")
    assert FixedPolicy(est, 64).plan(snap(8, 100)).reason == "decode-only"
    p = FixedPolicy(est, 64, full_gpu_when_alone=False).plan(snap(8, 100))
    assert (p.decode_sms, p.prefill_sms, p.prefill_layers) == (64, 68, 0)
    with pytest.raises(ValueError):
        FixedPolicy(est, 132)
    bp = BatchSizePolicy(est)
    assert [bp.decode_sms_for(b) for b in (1, 5, 6, 10, 35, 36, 500)] == [16, 16, 16, 16, 96, 112, 112]
    p = bp.plan(snap(20, 100, [w("a", 16384)]))
    assert (p.decode_sms, p.prefill_layers, p.reason) == (bp.decode_sms_for(20), 4, "batch-size")
    assert D.make_policy("fixed:32", est).decode_sms == 32
    with pytest.raises(ValueError):
        D.make_policy("nope", est)


def test_the_server_settings_name_the_same_policies():
    """The server builds its policy through make_policy too: MuxArgs' 'fixed' + fixed_decode_sms
    is the simulator's 'fixed:<SMs>', and the SLO settings reach the dispatcher."""
    from sglang_mux.mux_args import split_argv

    est = FakeEstimator()
    args = split_argv(["--mux-policy", "fixed", "--mux-fixed-decode-sms", "48"])[0]
    assert D.policy_name(args) == "fixed:48"
    pol = D.make_policy(D.policy_name(args), est)
    assert isinstance(pol, FixedPolicy) and pol.decode_sms == 48
    assert D.policy_name(split_argv(["--mux-policy", "batch-size"])[0]) == "batch-size"
    args = split_argv(["--mux-tbt-slo-ms", "40", "--mux-ttft-slo-ms", "3000", "--no-mux-preemption",
                       "--mux-ttft-ms-per-token", "0.5"])[0]
    assert D.policy_name(args) == "hybrid"  # the default
    pol = D.make_policy(D.policy_name(args), est, SLO(args.tbt_slo_ms, args.ttft_slo_ms, args.ttft_ms_per_token), preemption=args.preemption)
    assert isinstance(pol, D.HybridPolicy)
    assert (pol.slo, pol.preemption) == (SLO(40.0, 3000.0, 0.5), False)


# ---- the longest decode context -----------------------------------------------------------------

class MaxRecorder(FakeEstimator):
    """Decode gets slower with a longer longest context; records what the policy passed."""

    def __init__(self):
        self.seen = set()

    def decode_worst_ms(self, d, bs, sum_reused, prefill_new, prefill_reused, max_reused=None):
        self.seen.add(max_reused)
        t = super().decode_worst_ms(d, bs, sum_reused, prefill_new, prefill_reused)
        return t + (0.0 if max_reused is None else 1e-3 * max_reused * 16 / d)


def test_snapshot_longest_context_reaches_every_decode_estimate():
    for pol in (MuxDispatcher, lambda e: FixedPolicy(e, 64), BatchSizePolicy):
        est = MaxRecorder()
        pol(est).plan(Snapshot(100.0, 8, 8 * 4000, decode_max_reused=30000, waiting=(w("a", 4000),)))
        pol(est).plan(Snapshot(100.0, 8, 8 * 4000, decode_max_reused=30000))  # decode alone
        assert est.seen == {30000}
    est = MaxRecorder()
    MuxDispatcher(est).plan(snap(8, 4000, [w("a", 4000)]))
    assert est.seen == {None}  # unknown: the estimator assumes a uniform batch
    # It can change the decision: one long request needs more decode SMs than the uniform batch.
    uni = MuxDispatcher(MaxRecorder()).plan(Snapshot(100.0, 8, 8 * 4000, decode_max_reused=4000,
                                                     waiting=(w("a", 4000),)))
    skew = MuxDispatcher(MaxRecorder()).plan(Snapshot(100.0, 8, 8 * 4000, decode_max_reused=30000,
                                                      waiting=(w("a", 4000),)))
    assert skew.decode_sms > uni.decode_sms
    # The fields after the sum are keyword-only: an old positional call cannot shift them.
    with pytest.raises(TypeError):
        Snapshot(100.0, 8, 32000, None, None, ())


def test_cli_decode_max_reused():
    for extra, want in (([], 2048), (["--decode-max-reused", "65536"], 65536)):
        est = MaxRecorder()
        with redirect_stdout(io.StringIO()):
            dispatch.main(["plan", "--decode-bs", "32", "--decode-reused", "2048", "--prefill-new", "8192", *extra],
                   estimator=est)
        assert est.seen == {want}
    with pytest.raises(SystemExit):
        dispatch.main(["plan", "--decode-bs", "32", "--decode-reused", "2048", "--decode-max-reused", "100"],
               estimator=MaxRecorder())


# ---- CLI -----------------------------------------------------------------------------------------

def test_cli_prints_plan_json():
    buf = io.StringIO()
    with redirect_stdout(buf):
        dispatch.main(["plan", "--tbt-slo-ms", "50", "--ttft-slo-ms", "5000", "--decode-bs", "32",
                "--decode-reused", "2048", "--prefill-new", "8192", "--prefill-reused", "0"],
               estimator=FakeEstimator())
    out = json.loads(buf.getvalue())
    for k in ("decode_sms", "prefill_sms", "t_decode_worst_ms", "t_prefill_ms", "prefill_layers", "reason",
              "preempt"):
        assert k in out
    assert out["decode_sms"] + out["prefill_sms"] == 132 and out["reason"] == "best-fit"


def test_cli_missing_table_is_a_usage_error(tmp_path, capsys):
    table = str(tmp_path / "no_such_table")
    with pytest.raises(SystemExit) as exc:
        dispatch.main(["plan", "--table", table, "--decode-bs", "32", "--decode-reused", "2048", "--prefill-new", "8192"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {table}: no such table directory") and err.count("\n") == 1


# ---- performance ---------------------------------------------------------------------------------

def _median_us(policy, snaps, reps=300):
    ts = []
    for _ in range(reps):
        for s in snaps:
            t0 = time.perf_counter()
            policy.plan(s)
            ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e6


def _perf_snaps():
    """Decode batch 256, 1,000 waiting requests: a new batch; an active long batch that the
    queue head preempts (TTFT SLO 1 s + 0.3 ms/token); an overloaded decode."""
    q = tuple(WaitingReq(f"r{i}", 59.2 + i * 1e-4, 1500 + (i * 37) % 3000, (i * 101) % 4096) for i in range(1000))
    act = PrefillBatchState(["long"], [PrefillReq(20000, 0)], 5, 59.0)
    return [Snapshot(60.0, 256, 256 * 1000, active_prefill=None, paused_prefill=None, waiting=q),
            Snapshot(60.0, 256, 256 * 1000, active_prefill=act, paused_prefill=None, waiting=q),
            Snapshot(60.0, 256, 256 * 30000, active_prefill=act, paused_prefill=None, waiting=q)]


def _perf_policy(est):
    return MuxDispatcher(est, SLO(50, 1000, 0.3), max_prefill_tokens=8192)


def test_decision_time_fake_estimator():
    p = _perf_policy(FakeEstimator())
    assert [p.plan(s).reason for s in _perf_snaps()] == ["best-fit", "preempt+best-fit", "overload-max-decode"]
    assert _median_us(p, _perf_snaps()) <= 100


def test_integration_real_estimator(good):
    from sglang_mux.estimator import Estimator

    est = Estimator.from_table(good)
    d = MuxDispatcher(est, SLO(50, 5000))
    for bs in (1, 16, 64, 128, 256):
        p = d.plan(snap(bs, 2048, [w("a", 8192, 0)]))
        assert p.decode_sms + p.prefill_sms in (132,) and p.reason in ("best-fit", "overload-decode-first",
                                                                        "overload-max-decode")
        if p.reason == "best-fit":
            assert p.t_decode_worst_ms <= 50
            i = est.decode_sms_options.index(p.decode_sms)
            assert all(est.decode_worst_ms(x, bs, bs * 2048, 8192, 0) > 50 for x in est.decode_sms_options[:i])
            assert 1 <= p.prefill_layers <= 32
    p = _perf_policy(est)
    assert p.plan(_perf_snaps()[1]).preempt
    assert _median_us(p, _perf_snaps(), reps=100) <= 100
    # The CLI, as a user runs it.
    r = subprocess.run([sys.executable, "-m", "sglang_mux.dispatch", "plan", "--table", str(good),
                        "--tbt-slo-ms", "50", "--ttft-slo-ms", "5000", "--decode-bs", "64", "--decode-reused",
                        "4096", "--prefill-new", "8192", "--prefill-reused", "0"],
                       capture_output=True, text=True, check=True, cwd=ROOT)
    out = json.loads(r.stdout)
    assert out["decode_sms"] in est.decode_sms_options and out["t_decode_worst_ms"] <= 50


def test_monotone_on_the_shipped_h200_table():
    """The same property with the real estimator: the guard's cells need not be monotone in
    batch size or context, so best fit over solo x guard is checked on the shipped table."""
    from sglang_mux.estimator import Estimator

    est = Estimator.from_table(Path(__file__).resolve().parents[1] / "contention_tables/llama-3.1-8b__nvidia-h200__triton")

    def d(slo, bs, rr, n, r):
        return MuxDispatcher(est, SLO(slo, 5000)).plan(
            Snapshot(100.0, bs, bs * rr, waiting=(WaitingReq("a", 100.0, n, r),))).decode_sms

    for n, r in ((2048, 512), (8192, 0), (512, 30000)):
        for rr in (0, 1024, 4096, 16384, 65536):
            ds = [d(50, bs, rr, n, r) for bs in range(1, 400, 6)]
            assert ds == sorted(ds), (n, r, rr)
        for bs in (1, 16, 64, 160, 256):
            ds = [d(50, bs, rr, n, r) for rr in (0, 512, 2048, 8192, 32768, 65536)]
            assert ds == sorted(ds), (n, r, bs)
            ds = [d(slo, bs, 4096, n, r) for slo in (100, 60, 50, 40, 30, 20)]
            assert ds == sorted(ds), (n, r, bs)
    assert len({d(50, bs, 4096, 8192, 0) for bs in range(1, 400, 6)}) >= 3  # not a constant


# ---- the hybrid policy: decode alone, a fused chunk or a spatial partition --------------------

class HybridFake(FakeEstimator):
    """Prefill linear in new tokens plus attention n x r (so a decode row costs its context);
    decode slows with fewer SMs and longer contexts; guard 1.2. No fused_ms: the policy prices a
    fused iteration from prefill_ms on the whole GPU, as Estimator.fused_ms does."""

    def prefill_ms(self, p, reqs):
        return sum(0.05 * q.n + 2e-5 * q.n * q.r for q in reqs) * 132 / p + 2.0

    def decode_solo_ms(self, d, bs, sum_reused, max_reused=None):
        return (3.0 + 0.02 * bs + 2e-5 * sum_reused) * (132 / d) ** 0.5

    def decode_worst_ms(self, d, bs, sum_reused, prefill_new, prefill_reused, max_reused=None):
        t = self.decode_solo_ms(d, bs, sum_reused)
        return t if d >= 132 or prefill_new <= 0 else t * 1.2


def _hyb_snap(bs, ctx, waiting, host=0.0, active=None, paused=None):
    return Snapshot(100.0, bs, bs * ctx, decode_max_reused=ctx, waiting=tuple(waiting), decode_host_ms=host,
                    active_prefill=active, paused_prefill=paused)


def test_hybrid_fuses_short_prompts_beside_a_light_decode():
    est = HybridFake()
    pol = D.make_policy("hybrid", est)
    s = _hyb_snap(4, 1000, [WaitingReq("a", 99.0, 300, 0), WaitingReq("b", 99.5, 300, 0)])
    p = pol.plan(s)
    rows = [PrefillReq(1, 1000)] * 4
    t_f = est.prefill_ms(132, [PrefillReq(300, 0), PrefillReq(300, 0)] + rows)  # 1024 takes both whole
    assert p.kind == D.KIND_FUSED and p.reason == D.FUSED
    assert p.chunk == (("a", 300), ("b", 300)) and p.new_prefill_rids == () and p.prefill_layers == 0
    assert (p.decode_sms, p.prefill_sms) == (132, 0) and p.t_decode_worst_ms == pytest.approx(t_f)
    spatial = MuxDispatcher(est).plan(s)  # what today's mux does: D16/P116, 600 tokens in T_P
    assert spatial.kind == D.KIND_SPATIAL and 600 / spatial.t_prefill_ms < 600 / t_f
    assert p.to_dict()["kind"] == "fused" and p.to_dict()["chunk"] == [["a", 300], ["b", 300]]


def test_hybrid_keeps_spatial_for_a_long_prompt_beside_a_heavy_long_context_decode():
    est = HybridFake()
    pol = D.HybridPolicy(est)
    s = _hyb_snap(32, 30000, [WaitingReq("long", 99.0, 8000, 0)])
    f_plan, f_rate = pol.fused_candidate(s)
    # 32 rows of 30K context cost 20.8 ms: a 512-token batch (480 prompt tokens and the rows) fits
    # within 50 ms, a 1024-token one does not
    assert f_plan.chunk == (("long", 480),)
    assert est.prefill_ms(132, [PrefillReq(992, 0)] + [PrefillReq(1, 30000)] * 32) > 50
    p = pol.plan(s)
    assert p == MuxDispatcher(est).plan(s) and p.kind == D.KIND_SPATIAL and p.chunk == ()
    assert (p.decode_sms, p.new_prefill_rids) == (48, ("long",))
    assert 8000 / p.t_prefill_ms > f_rate
    # Told that prefill beside decode runs 3x slower, it fuses (1.5x is not enough: fusing the first
    # 480 tokens commits to the other 7,520 in chunks over an ever longer prefix)
    for x, kind in ((1.5, D.KIND_SPATIAL), (3.0, D.KIND_FUSED)):
        slow = D.HybridPolicy(est, prefill_slowdown={16: 1.0, 48: x})
        assert slow.corun_slowdown(48) == x and slow.corun_slowdown(40) == x and slow.corun_slowdown(30) == 1.0
        assert slow.plan(s).kind == kind


def test_hybrid_fuses_a_prompt_too_long_for_one_layer_wise_prefill():
    """The case above, where spatial wins on rates: with room for only 4,096 tokens of one
    layer-wise prefill's activations (the server's prefill_memory limit), the 8,000-token head is
    fused, cut to the largest chunk that fits, and a short batch behind it preempts nothing."""
    est = HybridFake()
    s = _hyb_snap(32, 30000, [WaitingReq("long", 99.0, 8000, 0)])
    assert D.HybridPolicy(est).plan(s).kind == D.KIND_SPATIAL
    pol = D.HybridPolicy(est, max_prefill_tokens=4096, layerwise_max_tokens=4096)
    p = pol.plan(s)
    assert p.kind == D.KIND_FUSED and p.chunk == (("long", 480),) and p.new_prefill_rids == ()
    fits = _hyb_snap(32, 30000, [WaitingReq("long", 99.0, 4096, 0)])  # at the limit: as before
    assert pol.plan(fits) == D.HybridPolicy(est, max_prefill_tokens=4096).plan(fits)
    # with its price not yet learned the head is still cut (rule 3 would otherwise end the chunk)
    est.fused_price = type("Unlearned", (), {"learned": False, "margin": 0.0})()
    assert pol.plan(s).chunk == (("long", 480),)
    del est.fused_price
    # a slow layer-wise batch in flight (4,000 tokens over 100K cached), a 5,000-token head behind
    # it that would preempt it, but one layer-wise prefill cannot hold it: the batch goes on
    active = PrefillBatchState(["a"], [PrefillReq(4000, 100_000)], 1, 99.0)
    busy = _hyb_snap(32, 30000, [WaitingReq("b", 99.5, 5000, 0)], active=active)
    kw = dict(max_prefill_tokens=4096)
    assert D.HybridPolicy(est, SLO(ttft_ms_per_token=0.1), **kw).plan(busy).preempt
    assert not D.HybridPolicy(est, SLO(ttft_ms_per_token=0.1), layerwise_max_tokens=4096, **kw).plan(busy).preempt
    with pytest.raises(ValueError, match="must hold a batch of max_prefill_tokens"):
        D.HybridPolicy(est, layerwise_max_tokens=8000)  # max_prefill_tokens 16,384 by default


def test_hybrid_chunks_take_every_size_the_prefill_graph_captured():
    """The same case as above: on the coarse sizes only 480 prompt tokens fit 50 ms beside 32
    rows of 30K context; with SGLang's captured sizes up to 1,024 the largest that fits is found
    (by bisection), here a 576-token batch; none below the smallest coarse size, none between
    1,024 and 2,048."""
    from sglang_mux.fused_price import sglang_graph_tokens

    est = HybridFake()
    est.graph_tokens = sglang_graph_tokens(4096)
    pol = D.HybridPolicy(est)
    assert pol.sizes()[:3] == (256, 288, 320) and 768 in pol.sizes() and pol.sizes()[-3:] == (1024, 2048, 4096)
    s = _hyb_snap(32, 30000, [WaitingReq("long", 99.0, 8000, 0)])
    plan, _ = pol.fused_candidate(s)
    (_, c), = plan.chunk
    rows = [PrefillReq(1, 30000)] * 32
    assert c + 32 in pol.sizes() and c + 32 > 512 and plan.t_decode_worst_ms <= 50.0
    larger = [x for x in pol.sizes() if x > c + 32][0]
    assert est.prefill_ms(132, [PrefillReq(larger - 32, 0)] + rows) > 50.0
    assert c + 32 == 576
    del est.graph_tokens  # a stand-in without a graph: the coarse sizes
    assert pol.sizes() == D.CHUNK_SIZES


def test_hybrid_chunks_skip_the_captured_sizes_a_larger_one_beats():
    """cuBLAS's slow token counts (``graph_cliffs``: 448 on an H100) are never filled: in the case
    above, where a 576-token batch was the largest that fit, 576 slow gives 512. A coarse size
    (``chunk_sizes``: 512 here) stays even if slow."""
    from sglang_mux.fused_price import sglang_graph_tokens

    est = HybridFake()
    est.graph_tokens = sglang_graph_tokens(4096)
    est.graph_cliffs = {448: 4.2, 576: 1.0, 832: 1.5, 512: 0.1}
    pol = D.HybridPolicy(est)
    sizes = pol.sizes()
    assert not {448, 576, 832} & set(sizes) and {416, 480, 512, 640, 768, 896} <= set(sizes)
    assert sizes[:3] == (256, 288, 320) and sizes[-3:] == (1024, 2048, 4096)
    plan, _ = pol.fused_candidate(_hyb_snap(32, 30000, [WaitingReq("long", 99.0, 8000, 0)]))
    (_, c), = plan.chunk
    assert c + 32 == 512


@pytest.mark.parametrize("host", [0.0, 5.0, 15.0, 25.0, 40.0])
def test_hybrid_fused_chunk_is_the_largest_within_the_tbt_slo_less_host_time(host):
    est = HybridFake()
    pol = D.HybridPolicy(est, SLO(50.0))
    s = _hyb_snap(4, 1000, [WaitingReq("a", 99.0, 8000, 0)], host=host)
    plan, rate = pol.fused_candidate(s)
    budget = 50.0 - min(host, 25.0)  # the host never takes more than half the SLO
    (rid, c), = plan.chunk
    rows = [PrefillReq(1, 1000)] * 4
    assert plan.t_decode_worst_ms == pytest.approx(est.prefill_ms(132, [PrefillReq(c, 0)] + rows))
    assert plan.t_decode_worst_ms <= budget
    bigger = [x - 4 for x in D.CHUNK_SIZES if x - 4 > c]  # a size counts the 4 decode rows
    assert not bigger or est.prefill_ms(132, [PrefillReq(bigger[0], 0)] + rows) > budget
    # the rate is over what fusing commits to: the whole 8000-token prompt, its rest in the chunks
    # rule 0 will run, each the largest that meets the budget over its prefix (c stops fitting at
    # ~2,200 tokens here): within 4 % of them walked chunk by chunk, never above
    walked = 8000 / (plan.t_decode_worst_ms + host + _rule0_ms(pol, est, 8000 - c, c, [1000] * 4, budget, host))
    assert 0.96 * walked <= rate <= walked
    assert rate == pytest.approx({0.0: 7.290220, 5.0: 6.315914, 15.0: 5.052807, 25.0: 4.141125, 40.0: 3.316967}[host])
    assert c == {0.0: 508, 5.0: 508, 15.0: 508, 25.0: 252, 40.0: 252}[host]


def _rule0_ms(pol, est, n, r, contexts, budget, host):
    """ms that rule 0 takes to run a chunked request's ``n`` tokens from prefix ``r`` beside decode
    rows of ``contexts``: chunk by chunk, each the largest room (a size less the rows) that meets
    ``budget`` at its prefix, else chunk_sizes[0]; each chunk's price plus ``host``."""
    rows = [PrefillReq(1, c) for c in contexts]
    rooms = [c - len(rows) for c in pol.sizes() if c > len(rows)]
    ms = 0.0
    while n > 0:
        fits = [c for c in rooms if est.prefill_ms(132, [PrefillReq(min(c, n), r)] + rows) <= budget]
        take = min(max(fits) if fits else pol.chunk_sizes[0], n)
        ms += est.prefill_ms(132, [PrefillReq(take, r)] + rows) + host
        n, r = n - take, r + take
    return ms


def test_hybrid_prices_a_cut_prompts_rest_in_the_chunks_that_meet_its_budget():
    """A fused candidate that cuts a prompt commits to its rest, which rule 0 runs in the largest
    chunks that meet the TBT budget over an ever longer prefix. Priced at the candidate's size
    throughout, a long prompt's rest looked cheaper than it ran (Mooncake's synthetic trace at
    TBT 30: 20-56K prompts fused in ~500-token chunks, 0.45 req/s where the partitions pass 0.8)."""
    est = HybridFake()
    pol = D.HybridPolicy(est, SLO(50.0))
    s = _hyb_snap(4, 1000, [WaitingReq("a", 99.0, 8000, 0)])
    plan, rate = pol.fused_candidate(s)
    rows = [PrefillReq(1, 1000)] * 4
    assert plan.chunk == (("a", 508),) and plan.t_decode_worst_ms == pytest.approx(27.68)
    # 508 tokens over a 2,500-token prefix cost 53 ms: rule 0 runs smaller chunks there
    assert est.prefill_ms(132, [PrefillReq(508, 2500)] + rows) == pytest.approx(53.08)
    assert pol.plan(replace(s, waiting=(), chunked=WaitingReq("a", 99.0, 5500, 2500))).chunk == (("a", 252),)
    # 508-token chunks throughout, priced at the first and the last: 7.53 tokens/ms; as rule 0
    # runs them: 7.44; the candidate's rate 7.29 (each span at the room that fits at its last chunk)
    k = math.ceil(7492 / 508)
    first, last = (est.prefill_ms(132, [PrefillReq(508, r)] + rows) for r in (508, 508 + (k - 1) * 508))
    at_508 = 8000 / (plan.t_decode_worst_ms + k * (first + last) / 2)
    walked = 8000 / (plan.t_decode_worst_ms + _rule0_ms(pol, est, 7492, 508, [1000] * 4, 50.0, 0.0))
    assert (round(at_508, 2), round(walked, 2), round(rate, 2)) == (7.53, 7.44, 7.29)
    # a partition served at 2.36x its T_P rates the prompt at 7.40 tokens/ms: above the rest as it
    # runs fused, below it at 508 tokens throughout, which chose the fused chunk
    from types import SimpleNamespace

    spatial = MuxDispatcher(est).plan(s)
    est.prefill_wall = SimpleNamespace(factor=2.365)
    assert pol.spatial_rate(spatial, s) == pytest.approx(7.399, abs=1e-3)
    assert pol.plan(s) == spatial and (spatial.decode_sms, spatial.new_prefill_rids) == (16, ("a",))
    # where the size fits to the prompt's end the rest is priced as before: its chunks at that size,
    # the last one full (its room goes on to the queue), priced at the first and last prefix
    short = _hyb_snap(4, 1000, [WaitingReq("a", 99.0, 2000, 0)])
    plan, rate = pol.fused_candidate(short)
    first, last = (est.prefill_ms(132, [PrefillReq(508, r)] + rows) for r in (508, 1524))
    assert plan.chunk == (("a", 508),)
    assert rate == pytest.approx(2000 / (plan.t_decode_worst_ms + 3 * (first + last) / 2))


def test_hybrid_prices_a_long_rest_in_a_few_spans(monkeypatch):
    """A 100K-token prompt's rest is priced in COMMIT_SPANS spans, not chunk by chunk (~200 chunks
    here, each a price: milliseconds of a decision on the server's host)."""
    est = HybridFake()
    pol = D.HybridPolicy(est, SLO(50.0))
    priced = []
    price = est.fused_ms
    monkeypatch.setattr(est, "fused_ms", lambda *a: priced.append(1) or price(*a))
    s = _hyb_snap(4, 1000, [WaitingReq("a", 99.0, 100_000, 0)])
    plan, rate = pol.fused_candidate(s)
    assert plan.chunk == (("a", 508),) and COMMIT_SPANS == 4
    assert len(priced) == 21  # the candidate's bisection and the rest's spans
    walked = 100_000 / (plan.t_decode_worst_ms + _rule0_ms(pol, est, 100_000 - 508, 508, [1000] * 4, 50.0, 0.0))
    assert 0.96 * walked <= rate <= walked


def test_hybrid_budgets_a_fused_iteration_with_its_own_host_time():
    """``snap.fused_host_ms`` (measured on fused iterations) replaces the decode's host time in
    the fused candidate's budget and rate; the spatial plan keeps the decode's."""
    est = HybridFake()
    pol = D.HybridPolicy(est, SLO(50.0))
    base = _hyb_snap(4, 1000, [WaitingReq("a", 99.0, 8000, 0)], host=25.0)
    for fused_host, size in ((None, 252), (25.0, 252), (0.0, 508)):  # sizes less the 4 decode rows
        s = replace(base, fused_host_ms=fused_host)
        plan, rate = pol.fused_candidate(s)
        assert plan.chunk == (("a", size),)
        h = 25.0 if fused_host is None else fused_host
        walked = _rule0_ms(pol, est, 8000 - size, size, [1000] * 4, 50.0 - h, h)
        assert 0.96 * walked <= 8000 / rate - plan.t_decode_worst_ms - h <= walked / 0.96
        assert rate == pytest.approx({None: 4.141125, 25.0: 4.141125, 0.0: 7.290220}[fused_host])
        assert MuxDispatcher(est).plan(s) == MuxDispatcher(est).plan(base)  # the partition's budget: decode's
    # two short prompts beside a decode whose loop costs 25 ms of host: fused only when a fused
    # iteration's own host time is known to be small
    short = _hyb_snap(4, 1000, [WaitingReq("a", 99.0, 300, 0), WaitingReq("b", 99.5, 300, 0)], host=25.0)
    kinds = [pol.plan(replace(short, fused_host_ms=h)).kind for h in (None, 5.0, 0.0)]
    assert kinds == [D.KIND_SPATIAL, D.KIND_SPATIAL, D.KIND_FUSED]


def test_hybrid_rates_a_partition_by_its_served_wall_time():
    """``est.prefill_wall.factor`` (served batches' wall time over their planned T_P) divides a
    partition's rate: at 3x the hybrid fuses where it partitioned before."""
    from types import SimpleNamespace

    est = HybridFake()
    pol = D.HybridPolicy(est)
    s = _hyb_snap(32, 30000, [WaitingReq("long", 99.0, 8000, 0)])
    spatial = MuxDispatcher(est).plan(s)
    assert pol.plan(s) == spatial and pol.fused_candidate(s)[1] < pol.spatial_rate(spatial, s)
    est.prefill_wall = SimpleNamespace(factor=3.0)
    assert pol.spatial_rate(spatial, s) == pytest.approx(8000 / (spatial.t_prefill_ms * 3.0))
    assert pol.plan(s).kind == D.KIND_FUSED


def test_hybrid_chunk_sizes_count_the_decode_rows_as_sglangs_budget_does():
    """A size is the whole extend batch, prompt tokens and decode rows (a captured graph size: a
    chunk plus its rows ran padded to the next); a size the rows fill holds no prompt."""
    est = HybridFake()
    pol = D.HybridPolicy(est, SLO(1000.0), chunk_sizes=(256, 512))
    rows300 = _hyb_snap(300, 10, [WaitingReq("a", 99.0, 8000, 0)])
    assert [(room, [(w.rid, t) for w, t in ch]) for room, ch in pol._chunks(rows300)] == [(212, [("a", 212)])]
    assert pol.fused_candidate(rows300)[0].chunk == (("a", 212),)
    none = _hyb_snap(600, 10, [WaitingReq("a", 99.0, 8000, 0)])
    assert pol._chunks(none) == [] and pol.fused_candidate(none) is None


def test_hybrid_cuts_no_prompt_on_a_price_it_has_not_learned():
    """Before its fused price is learned (``est.fused_price.learned``) a fused candidate holds
    only prompts that fit whole, in the smallest size that holds them: a cut commits to the
    prompt's rest, and on the optimistic prior a long prompt held the loop fused."""
    from types import SimpleNamespace

    est = HybridFake()
    pol = D.HybridPolicy(est)
    s = _hyb_snap(4, 1000, [WaitingReq("a", 99.0, 300, 0), WaitingReq("b", 99.5, 3000, 0)])
    est.fused_price = SimpleNamespace(learned=True, margin=0.0)
    assert pol.fused_candidate(s)[0].chunk == (("a", 300), ("b", 208))  # learned: 512 with 4 rows, cutting b
    est.fused_price.learned = False
    plan, _ = pol.fused_candidate(s)
    assert plan.chunk == (("a", 300),)  # 256 cannot hold a whole, 512 does; b is not cut
    assert pol.fused_candidate(_hyb_snap(4, 1000, [WaitingReq("b", 99.5, 9000, 0)])) is None


def test_hybrid_without_a_fitting_chunk_or_with_nothing_waiting_is_the_dispatcher():
    est = HybridFake()
    pol = D.HybridPolicy(est)
    heavy = _hyb_snap(64, 30000, [WaitingReq("a", 99.0, 300, 0)])  # 64 rows of 30K: 41.6 ms + 2 + chunk
    assert pol.fused_candidate(heavy) is None and pol.plan(heavy) == MuxDispatcher(est).plan(heavy)
    for s in (_hyb_snap(8, 1000, []), _hyb_snap(0, 0, [])):
        assert pol.plan(s) == MuxDispatcher(est).plan(s) and pol.plan(s).kind == D.KIND_DECODE


def test_hybrid_fuses_where_the_dispatcher_holds_prefill_back_in_overload():
    est = TableEstimator({d: 60.0 for d in OPTIONS}, prefill_ms=20.0)  # no partition meets 50 ms
    pol = D.HybridPolicy(est)
    s = _hyb_snap(8, 1000, [WaitingReq("a", 100.0, 4000, 0)])
    assert MuxDispatcher(est).plan(s).reason == D.OVERLOAD_DECODE_FIRST
    p = pol.plan(s)  # the fake prices every batch 20 ms: the largest chunk, 4096, fits
    assert p.kind == D.KIND_FUSED and p.chunk == (("a", 4000),)


def test_hybrid_never_turns_a_layer_wise_prefill_in_flight_into_chunks():
    est = HybridFake()
    pol = D.HybridPolicy(est)
    short = [WaitingReq("s1", 99.9, 300, 0), WaitingReq("s2", 99.9, 300, 0)]
    assert pol.plan(_hyb_snap(4, 1000, short)).kind == D.KIND_FUSED  # alone, these would be fused
    for layers_done in (0, 10, 31):
        active = PrefillBatchState(["long"], [PrefillReq(8000, 0)], layers_done, 99.0)
        s = _hyb_snap(4, 1000, short, active=active)
        p = pol.plan(s)
        assert p.chunk == () and p.kind == D.KIND_SPATIAL and p == MuxDispatcher(est).plan(s)
    paused = PrefillBatchState(["long"], [PrefillReq(8000, 0)], 12, 99.0, preempted_by_other=True)
    p = pol.plan(_hyb_snap(4, 1000, short, paused=paused))
    assert p.chunk == () and p.kind == D.KIND_SPATIAL


def test_hybrid_continues_a_chunked_request_fused_before_anything_else():
    """Rule 0: a prompt part-way through fused chunks (SGLang's chunked request) is continued
    fused, its rest first, even where the policy would otherwise partition (a heavy decode) and
    even when no chunk meets the TBT budget (the smallest then: it holds KV and must move on).
    Preemption off: no yield to the waiting prompt (the next test)."""
    est = HybridFake()
    pol = D.HybridPolicy(est, preemption=False)
    rest = WaitingReq("long", 99.0, 7488, 512)
    heavy = _hyb_snap(32, 30000, [WaitingReq("b", 99.5, 100, 0)])
    assert pol.plan(heavy).kind == D.KIND_SPATIAL  # without a chunked request: spatial
    p = pol.plan(replace(heavy, chunked=rest))
    rows = [PrefillReq(1, 30000)] * 32
    # a 256-token batch: 224 prompt tokens and the 32 rows (a 512-token one would not fit)
    assert p.kind == D.KIND_FUSED and p.chunk == (("long", 224),)
    assert est.prefill_ms(132, [PrefillReq(480, 512)] + rows) > 50.0
    assert p.t_decode_worst_ms == pytest.approx(est.prefill_ms(132, [PrefillReq(224, 512)] + rows))
    # its rest is short: the chunk goes on into the waiting queue, FCFS
    p = pol.plan(replace(heavy, chunked=WaitingReq("long", 99.0, 200, 300)))
    assert p.chunk == (("long", 200), ("b", 100))  # 512 fits: the queue head whole
    # the next waiting prompt is cut into the chunk as rule 3 cuts it (a part-empty chunk after a
    # long prompt's last piece lost goodput); on a price not yet learned only if its rest fits one
    # more chunk
    from types import SimpleNamespace

    light = _hyb_snap(4, 1000, [WaitingReq("b", 99.5, 100, 0), WaitingReq("c", 99.6, 3000, 0)])
    p = pol.plan(replace(light, chunked=WaitingReq("long", 99.0, 200, 300)))
    assert p.kind == D.KIND_FUSED and p.chunk == (("long", 200), ("b", 100), ("c", 208))  # 512 with 4 rows
    est.fused_price = SimpleNamespace(learned=False, margin=0.0)
    p = pol.plan(replace(light, chunked=WaitingReq("long", 99.0, 200, 300)))
    assert p.chunk == (("long", 200), ("b", 100))  # c's rest fits no one more chunk
    del est.fused_price
    # nothing fits (a 64-row decode of 30K costs 41.6 ms + the host's 10): the smallest chunk of
    # its rest anyway, and no waiting request is cut into it
    over = replace(_hyb_snap(64, 30000, [WaitingReq("b", 99.5, 100, 0)], host=10.0), chunked=rest)
    assert pol.fused_candidate(over) is None
    assert pol.plan(over).chunk == (("long", 256),)
    assert pol.plan(replace(over, chunked=WaitingReq("long", 99.0, 30, 7970))).chunk == (("long", 30),)
    with pytest.raises(ValueError, match="cannot both be in flight"):
        pol.plan(replace(heavy, chunked=rest, active_prefill=PrefillBatchState(["x"], [PrefillReq(9, 0)], 0, 99.0)))


def test_hybrid_chunked_request_yields_to_a_short_prompt_at_once():
    """Rule 0's yield: a 10K-token prompt with 6,000 tokens left in 252-token fused chunks (35 ms
    the first; later ones attend over a longer prefix: its rest is 1.208 s as `commitment` prices
    it, where 24 chunks at the first's price would be 0.84 s) sits out one iteration for a
    300-token prompt (17.28 ms), whether or not that one would meet its own deadline waiting,
    as long as its own (98 + 2 s + 0.2 ms x 10,000 = 102.0) holds after both (101.2255 at 100.0).
    It does not where the yield would make the long one miss, where the queue head is not
    whole-chunk short, with preemption off, or on its last chunk."""
    est = HybridFake()
    pol = D.HybridPolicy(est, SLO(50, 2000, 0.2))
    long = WaitingReq("long", 98.0, 6000, 4000)
    s = replace(_hyb_snap(4, 1000, [WaitingReq("s", 99.1, 300, 0)]), chunked=long)
    rest = pol.fused_candidate(s, force=True)[0]
    assert rest.chunk == (("long", 252),) and rest.t_ms == pytest.approx(35.04)
    budget, host, ctx = pol.fused_terms(s)
    assert pol.commitment(((long, 252),), 252, rest.t_ms, ctx, host, budget, 4)[1] == pytest.approx(1208.268, abs=1e-3)
    terms = []
    pol.fused_terms = lambda snap: terms.append(snap) or D.HybridPolicy.fused_terms(pol, snap)
    p = pol.plan(s)
    assert p.yields and p.reason == D.YIELD_FUSED == "yield+fused" and p.kind == D.KIND_FUSED
    assert p.chunk == (("s", 300),) and p.t_ms == pytest.approx(17.28)
    assert len(terms) == 1  # the decode rows priced once for the rest, its pricing and the candidate
    del pol.fused_terms
    meets = replace(s, waiting=(WaitingReq("s", 99.9, 300, 0),))  # 101.96: it would meet it waiting
    assert pol.plan(meets).chunk == (("s", 300),)  # and goes first all the same
    assert pol.plan(replace(s, chunked=replace(long, arrival_s=97.23))).chunk == (("s", 300),)  # 101.23 >= 101.2255
    assert pol.plan(replace(s, chunked=replace(long, arrival_s=97.21))).chunk == (("long", 252),)  # 101.21 < 101.2255
    assert pol.plan(replace(s, chunked=replace(long, arrival_s=97.0))).chunk == (("long", 252),)  # misses its own anyway
    big_first = replace(s, waiting=(WaitingReq("big", 99.0, 20000, 0), WaitingReq("s", 99.1, 300, 0)))
    assert pol.plan(big_first).chunk == (("long", 252),)
    assert D.HybridPolicy(est, SLO(50, 2000, 0.2), preemption=False).plan(s).chunk == (("long", 252),)
    assert pol.plan(replace(s, chunked=WaitingReq("long", 98.0, 200, 9800))).chunk[0] == ("long", 200)  # its last


def test_hybrid_chunked_prompt_one_chunk_could_hold_yields_only_to_a_prompt_that_would_miss():
    """Behind a chunked prompt no longer than the largest chunk size (3,000 tokens, 2,000 left:
    its rest is a few hundred ms) a short prompt waits while it would meet its deadline behind
    that rest, and goes first only where it would miss it."""
    est = HybridFake()
    pol = D.HybridPolicy(est, SLO(50, 2000, 0.2))
    long = WaitingReq("long", 99.0, 2000, 1000)
    assert long.n + long.r <= max(D.CHUNK_SIZES)
    waits = replace(_hyb_snap(4, 1000, [WaitingReq("s", 99.9, 300, 0)]), chunked=long)  # deadline 101.96
    assert pol.plan(waits).chunk[0][0] == "long"
    late = replace(waits, waiting=(WaitingReq("s", 97.9, 300, 0),))  # 99.96: already past at 100.0
    p = pol.plan(late)
    assert p.yields and p.chunk == (("s", 300),)


def test_hybrid_parks_the_chunked_request_for_a_prompt_too_long_to_yield_to():
    """Rule 0's park: a 6,000-token prompt fits no fused chunk whole, so it cannot be yielded to;
    behind the chunked request's rest (6,000 tokens over an 18,000-token prefix: 2.94 s as
    `commitment` prices it) and its own prefill (0.70 s at its candidate's rate) it would be done at
    103.63, past its deadline (arrival + 2 s + 0.2 ms x 6,000), and the chunked request's own
    (99 + 2 + 4.8 = 105.8) holds: it is chunked in its place, its first chunk the candidate's 508
    tokens. Not where it meets its deadline waiting, where the parked one would miss its own, where
    one is parked already (nobody else is cut then either), or with preemption off."""
    est = HybridFake()
    pol = D.HybridPolicy(est, SLO(50, 2000, 0.2))
    long = WaitingReq("long", 99.0, 6000, 18000)
    s = replace(_hyb_snap(4, 1000, [WaitingReq("m", 100.42, 6000, 0)]), chunked=long)  # deadline 103.62
    p = pol.plan(s)
    assert p.parks and p.reason == D.PARK_FUSED == "park+fused" and p.chunk == (("m", 508),)
    def continues(snap):
        plan = pol.plan(snap)
        return plan.chunk[0][0] == "long" and not plan.parks and not plan.yields

    assert continues(replace(s, waiting=(WaitingReq("m", 100.44, 6000, 0),)))  # done 103.63 <= 103.64
    assert continues(replace(s, chunked=replace(long, arrival_s=96.8)))  # its own 103.6 < 103.63
    parked = replace(s, parked=WaitingReq("other", 98.0, 9000, 1000))
    assert continues(parked)
    light = replace(parked, chunked=WaitingReq("long", 99.0, 200, 3000), waiting=(WaitingReq("x", 100.5, 40, 0),
                                                                                  WaitingReq("m", 100.42, 6000, 0)))
    assert pol.plan(light).chunk == (("long", 200), ("x", 40))  # "m" is not cut while "other" is parked
    assert pol.plan(replace(light, parked=None)).chunk == (("long", 200), ("x", 40), ("m", 268))  # else it is
    assert not D.HybridPolicy(est, SLO(50, 2000, 0.2), preemption=False).plan(s).parks


def test_plan_kinds_of_the_existing_policies_and_hybrid_settings():
    est = FakeEstimator()
    disp = MuxDispatcher(est)
    assert disp.plan(snap(bs=4, reused_per_req=100)).kind == D.KIND_DECODE
    assert disp.plan(snap(waiting=[WaitingReq("a", 99.0, 1000, 0)])).kind == D.KIND_SPATIAL  # prefill-only
    assert disp.plan(snap(bs=4, waiting=[WaitingReq("a", 99.0, 1000, 0)])).kind == D.KIND_SPATIAL
    assert disp.plan(snap()).kind == D.KIND_DECODE  # idle
    assert isinstance(D.make_policy("hybrid", est), D.HybridPolicy)
    for bad in ((), (0, 512), (-1,)):
        with pytest.raises(ValueError, match="chunk_sizes"):
            D.HybridPolicy(est, chunk_sizes=bad)
    with pytest.raises(ValueError, match="prefill_slowdown"):
        D.HybridPolicy(est, prefill_slowdown=0.9)
    D.check_policy_name("hybrid", est)  # the simulator and the CLI accept it


def test_decode_contexts_keep_the_sum_and_the_longest():
    assert D.decode_contexts(Snapshot(0.0, 3, 10, decode_max_reused=6)) == [6, 2, 2]
    assert D.decode_contexts(Snapshot(0.0, 3, 11, decode_max_reused=6)) == [6, 3, 2]
    assert D.decode_contexts(Snapshot(0.0, 3, 10)) == [3, 4, 3]
    assert D.decode_contexts(Snapshot(0.0, 1, 7, decode_max_reused=7)) == [7]
    assert D.decode_contexts(Snapshot(0.0, 0, 0)) == []
    assert D.decode_contexts(Snapshot(0.0, 2, 9, decode_contexts=(4, 5))) == [4, 5]


def test_the_server_selects_the_hybrid_by_name():
    from sglang_mux.mux_args import POLICIES, split_argv

    assert "hybrid" in POLICIES
    args = split_argv(["--mux-policy", "hybrid"])[0]
    assert isinstance(D.make_policy(D.policy_name(args), FakeEstimator()), D.HybridPolicy)


def test_hybrid_budgets_a_fused_chunk_by_the_tail_overrun_and_rates_it_by_the_median():
    est = HybridFake()
    pol = D.HybridPolicy(est, SLO(50.0))
    w = [WaitingReq("a", 99.0, 300, 0)]  # fits whole: the rate is over this chunk alone
    base = Snapshot(100.0, 4, 4000, decode_max_reused=1000, waiting=tuple(w), fused_host_ms=6.0)
    plan, rate = pol.fused_candidate(base)
    assert rate == pytest.approx(300 / (plan.t_decode_worst_ms + 6.0))  # no median given: the budget's
    plan2, rate2 = pol.fused_candidate(dataclasses.replace(base, fused_rate_host_ms=0.5))
    assert plan2 == plan and rate2 == pytest.approx(300 / (plan.t_decode_worst_ms + 0.5))
    # the budget is the tail's: at TBT 30, 30 - 14 leaves 16 ms, which the whole prompt (17.3 ms)
    # does not fit and a 256-token batch (252 of its tokens and the 4 rows) does
    tight = D.HybridPolicy(est, SLO(30.0))
    assert tight.fused_candidate(dataclasses.replace(base, fused_rate_host_ms=0.5))[0].chunk == (("a", 300),)
    small, _ = tight.fused_candidate(dataclasses.replace(base, fused_host_ms=14.0, fused_rate_host_ms=0.5))
    assert small.chunk == (("a", 252),) and small.t_decode_worst_ms <= 16.0


class MarginFake(HybridFake):
    """A fused price with a tail allowance, as a served one learns it (``fused_price.margin``)."""

    def __init__(self, margin):
        self.fused_price = SimpleNamespace(margin=margin, learned=True)

    def fused_ms(self, pieces, decode_contexts):
        return super().fused_ms(pieces, decode_contexts) + self.fused_price.margin


def test_hybrid_budgets_a_fused_chunk_with_its_price_margin_and_rates_it_without():
    """The price's margin (the P90 of served residuals) shrinks the chunk that fits the TBT budget,
    but a rate weighs each fused iteration at the price less it, as it weighs host time by its median."""
    w = (WaitingReq("a", 99.0, 300, 0),)
    base = Snapshot(100.0, 4, 4000, decode_max_reused=1000, waiting=w, fused_host_ms=2.0)
    plan0, rate0 = D.HybridPolicy(MarginFake(0.0), SLO(50.0)).fused_candidate(base)
    pol = D.HybridPolicy(MarginFake(8.0), SLO(50.0))
    plan, rate = pol.fused_candidate(base)
    assert pol.fused_tail_ms() == 8.0 and plan.chunk == plan0.chunk == (("a", 300),)
    assert plan.t_decode_worst_ms == pytest.approx(plan0.t_decode_worst_ms + 8.0)  # the budget's price
    assert rate == pytest.approx(rate0) == pytest.approx(300 / (plan0.t_decode_worst_ms + 2.0))
    # a long prompt: at 30 ms the margin leaves room for a 256-token batch, not the 508 of no margin;
    # the cut prompt's rest is weighed at its chunks' median price as well
    long = dataclasses.replace(base, waiting=(WaitingReq("a", 99.0, 8000, 0),))
    tight0, tight = (D.HybridPolicy(MarginFake(m), SLO(30.0)) for m in (0.0, 8.0))
    assert tight0.fused_candidate(long)[0].chunk == (("a", 508),)
    plan, rate = tight.fused_candidate(long)
    assert plan.chunk == (("a", 252),)
    tight.fused_tail_ms = lambda: 0.0  # the margin in the rate, as the hybrid weighed it before
    at_tail = tight.fused_candidate(long)[1]
    # 8000 tokens in 32 chunks of 252 (the last shorter): 8 ms more in each at the tail
    assert 8000 / at_tail - 8000 / rate == pytest.approx(32 * 8.0)


def test_hybrid_budgets_the_first_fused_iteration_of_a_streak_by_its_own_overrun():
    """The case above at TBT 30: a streak's first fused iteration (none in flight) takes the larger
    of its own overrun and the streak's; one that continues a streak takes the streak's alone."""
    tight = D.HybridPolicy(HybridFake(), SLO(30.0))
    base = Snapshot(100.0, 4, 4000, decode_max_reused=1000, waiting=(WaitingReq("a", 99.0, 300, 0),),
                    fused_host_ms=2.0, fused_rate_host_ms=0.5, fused_start_host_ms=14.0)
    first, _ = tight.fused_candidate(base)
    assert first.chunk == (("a", 252),) and first.t_decode_worst_ms <= 16.0
    assert tight.fused_candidate(dataclasses.replace(base, fused_streak=True))[0].chunk == (("a", 300),)
    # a start budget below the streak's (not learned yet) does not loosen it
    low = dataclasses.replace(base, fused_host_ms=14.0, fused_start_host_ms=0.0)
    assert tight.fused_candidate(low)[0].chunk == (("a", 252),)


def test_host_time_keeps_its_tail_quantile_and_its_median():
    h = D.DecodeHostTime(window=100, quantile=0.99, refresh=1)
    for x in range(100):
        h.observe(20.0 + x * 0.1, 20.0)  # overruns 0.0 .. 9.9 ms
    assert h.value_ms == pytest.approx(9.9) and h.median_ms == pytest.approx(5.0)


def test_host_time_leaves_rare_stalls_out_of_its_quantile_not_a_slow_host():
    """Served at TBT 30, a host's fused overruns were ~8 ms at P99 but for 1.3 % of stalls over 15 ms,
    which booked for every chunk starved prefill and shortened no stall."""
    h = D.DecodeHostTime(window=100, quantile=0.99, refresh=1, stall_ms=15.0)
    plain = D.DecodeHostTime(window=100, quantile=0.99, refresh=1)
    for x in [0.1 * i for i in range(97)] + [20.0, 25.0, 30.0]:  # 0.0 .. 9.6 ms, and three stalls
        h.observe(20.0 + x, 20.0)
        plain.observe(20.0 + x, 20.0)
    assert plain.value_ms == 30.0
    assert h.value_ms == pytest.approx(9.6)  # index int(0.99 * 97) of the 97 that are not stalls
    assert h.median_ms == plain.median_ms == pytest.approx(5.0)  # the rate's time counts stalls
    for _ in range(51):  # now most of the window is over 15 ms: the host's pace, booked in full
        h.observe(38.0, 20.0)
    assert h.value_ms == 30.0  # 54 of 100 are stalls, the three first ones still among them
    with pytest.raises(ValueError, match="stall_ms"):
        D.DecodeHostTime(stall_ms=0.0)


def test_host_time_is_ready_once_its_quantile_is_not_the_largest_seen():
    h = D.DecodeHostTime(window=256, quantile=0.99, refresh=1)
    h.observe(21.0, 20.0)
    h.observe(22.0, 20.0)
    assert h.budget_ms is None  # two: the policy books the decode's host time
    h = D.DecodeHostTime(window=256, quantile=0.99, refresh=1)
    for x in [0.1 * i for i in range(96)] + [13.6]:  # 0.0 .. 9.5 ms and one outlier: 97 overruns
        h.observe(20.0 + x, 20.0)
    assert not h.ready and h.value_ms == pytest.approx(13.6)  # a P99 of 97 is their maximum...
    assert h.budget_ms == h.resolved_ms == pytest.approx(9.4)  # ...so it books the rank with two above
    for _ in range(103):
        h.observe(21.0, 20.0)
    assert h.ready and h.budget_ms == h.value_ms == pytest.approx(9.5)  # 200: the P99 itself
    assert D.DecodeHostTime(window=10, quantile=0.99).ready is False  # a window too small never is...
    small = D.DecodeHostTime(window=10, quantile=0.99, refresh=1)
    for _ in range(10):
        small.observe(21.0, 20.0)
    assert small.ready  # ...until it is full: then the window is all there is
    assert not D.DecodeHostTime(quantile=1.0).ready


def test_hybrid_budgets_a_batch_start_for_its_host_time_and_fuses_while_none_fits():
    """The case of test_hybrid_keeps_spatial_for_a_long_prompt_beside_a_heavy_long_context_decode,
    told how much host time an iteration that starts a layer-wise batch adds to its gap."""
    est = HybridFake()
    pol = D.HybridPolicy(est)
    s = _hyb_snap(32, 30000, [WaitingReq("long", 99.0, 8000, 0)])
    spatial = MuxDispatcher(est).plan(s)
    assert pol.plan(s) == spatial and spatial.decode_sms == 48
    # 10 ms of start host time: the start's decode needs a larger partition to meet 40 ms
    p = pol.plan(dataclasses.replace(s, start_host_ms=10.0))
    assert p.kind == D.KIND_SPATIAL and p.new_prefill_rids == ("long",) and p.decode_sms > 48
    assert p.t_decode_worst_ms <= 40.0 and est.decode_worst_ms(p.decode_sms - 16, 32, 32 * 30000, 8000, 0) > 40.0
    # the dispatcher alone does not budget starts (its served cells ran without it)
    assert MuxDispatcher(est).plan(dataclasses.replace(s, start_host_ms=10.0)) == spatial
    # none fits 50 - 25 ms while the deadline allows: the start waits and the hybrid fuses
    held = pol.plan(dataclasses.replace(s, start_host_ms=25.0))
    assert held.kind == D.KIND_FUSED and held.chunk == (("long", 480),)
    # a host time below the decode's own changes nothing
    assert pol.plan(dataclasses.replace(s, start_host_ms=0.0)) == spatial


def test_a_hybrid_plan_sums_the_decode_rows_once(monkeypatch):
    """At ~300 decoding requests each fused price walked every decode row, and the decision took
    2-3 ms of a host-bound loop (bench/results/h200x4_s40_2026-11-27/sharegpt): a plan now sums
    them once (``Estimator.decode_rows``) and each price walks only the chunk's pieces."""
    import random

    from sglang_mux.estimator import Estimator
    from sglang_mux.latency_model import SoloLatencyModel

    est = Estimator.from_table(Path(__file__).resolve().parents[1] / "contention_tables/llama-3.1-8b__nvidia-h200__fa3")
    walked, summed = [], []
    walk, total = SoloLatencyModel._accumulate, Estimator.decode_rows
    monkeypatch.setattr(SoloLatencyModel, "_accumulate", lambda self, reqs, qmax: walked.append(len(reqs)) or
                        walk(self, reqs, qmax))
    monkeypatch.setattr(Estimator, "decode_rows", lambda self, ctx: summed.append(len(ctx)) or total(self, ctx))
    rng = random.Random(0)
    ctx = [rng.randint(20, 1200) for _ in range(300)]
    snap = Snapshot(1.0, 300, sum(ctx), decode_max_reused=max(ctx), decode_contexts=ctx,
                    waiting=tuple(WaitingReq(f"r{i}", 0.0, rng.randint(10, 800), 0) for i in range(8)),
                    fused_host_ms=5.0, fused_rate_host_ms=2.0)
    D.HybridPolicy(est, SLO(50.0)).plan(snap)  # fused candidates priced beside a spatial one
    assert summed == [300]
    assert walked and max(walked) <= 9  # a chunk's pieces (and the graph's padding), never the 300 rows


@pytest.mark.parametrize("tp, slos, layers, preempts", [
    (1, (50, 20, 0.1), 4, False),  # session 46's token check: the long batch launches whole, a short one waits
    (1, (6, 1, 0.05), 2, True),    # bench/plans/token_check.sh's: two layers a quantum, then a short preempts
    (2, (6, 1, 0.05), 4, False),   # at TP 2 a rank's layer is cheaper: the long batch launches whole
    (2, (3, 0.5, 0.05), 2, True),  # bench/plans/multi_gpu.sh's correctness part
])
def test_token_check_slos_make_the_hybrid_preempt(tp, slos, layers, preempts):
    """The tiny checkpoint's burst as bench/plans/token_check.sh relies on it, with the estimator the
    server starts with (cold start: no table for the tiny model; at TP 2 a rank's shape): 3 x
    30K-token prompts on an idle GPU go layer-wise; a 64-token prompt arriving with the long batch's
    first quantum done preempts it only where it would miss its TTFT SLO waiting."""
    import warnings
    from sglang_mux.estimator import Estimator
    from sglang_mux.tables import ModelShape
    cfg = json.loads((Path(__file__).parents[1] / "launch/models/tiny-llama/config.json").read_text())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = Estimator.cold_start(ModelShape.coerce(cfg).per_rank(tp), warn=False)
    tbt, ttft, k = slos
    pol = D.HybridPolicy(est, SLO(tbt, ttft, k))
    longs = [WaitingReq(f"L{i}", 0.0, 30000, 0) for i in range(3)]
    first = pol.plan(Snapshot(0.0, 0, 0, waiting=longs, fused_host_ms=3.0))
    assert (first.reason, first.prefill_layers, first.new_prefill_rids) == (D.PREFILL_ONLY, layers, ("L0",))
    active = PrefillBatchState(["L0"], [PrefillReq(30000, 0)], min(layers, 2), 0.0)
    nxt = pol.plan(Snapshot(0.031, 0, 0, active_prefill=active,
                            waiting=[WaitingReq("S0", 0.031, 64, 0)] + longs[1:], fused_host_ms=3.0))
    assert nxt.preempt is preempts
    assert nxt.new_prefill_rids == (("S0",) if preempts else ())


def test_token_check_second_burst_makes_the_hybrid_yield():
    """The burst's second half as bench/plans/token_check.sh serves it (--mux-layerwise-max-tokens
    35000, the server's cold-start estimator for the tiny checkpoint): two 38K-token prompts, over
    the cap, start as fused chunks beside the running decodes; a 64-token prompt arriving 30 ms
    later would miss its TTFT SLO behind their rest and goes first, the chunked one sitting out."""
    import warnings
    from sglang_mux.estimator import Estimator
    from sglang_mux.tables import ModelShape
    cfg = json.loads((Path(__file__).parents[1] / "launch/models/tiny-llama/config.json").read_text())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = Estimator.cold_start(ModelShape.coerce(cfg), warn=False)
    pol = D.HybridPolicy(est, SLO(6, 1, 0.05), layerwise_max_tokens=35000)
    longs = [WaitingReq(f"F{i}", 0.0, 38000, 0) for i in range(2)]
    first = pol.plan(Snapshot(0.0, 4, 800, waiting=longs, fused_host_ms=3.0))
    assert first.reason == D.FUSED and first.chunk == (("F0", 4092),)
    nxt = pol.plan(Snapshot(0.031, 4, 800, waiting=[WaitingReq("S0", 0.03, 64, 0), longs[1]],
                            chunked=WaitingReq("F0", 0.0, 38000 - 4092, 4092), fused_host_ms=3.0, fused_streak=True))
    assert nxt.yields and nxt.reason == D.YIELD_FUSED and nxt.chunk == (("S0", 64),)
