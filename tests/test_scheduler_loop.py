"""The CPU-testable parts of the scheduler loop (no torch, no sglang): what goes into a
Snapshot, which partition a Plan maps to, when a new prefill batch is formed, and bookkeeping of
arrival times. tests/test_mux_loop.py drives whole iterations."""

import dataclasses
from types import SimpleNamespace as NS

import pytest

from sglang_mux import loop_layerwise
from sglang_mux import scheduler_loop as sl
from sglang_mux.estimator import PrefillReq
from sglang_mux.loop_state import PrefillRun, decode_shape, fused_rows, guard_record, queue_note
from sglang_mux.mux_args import MuxArgs
from sglang_mux.partitions import PartitionConfig, full_modes, partition_configs
from sglang_mux.policy import DecodeHostTime, DecodePlan, FusedPlan, HostBudgets, Snapshot, SpatialPlan, WaitingReq


class FakeBatch:
    """seq_lens_sum as ScheduleBatch keeps it, and reqs whose prompt + output = seq_len."""

    def __init__(self, seq_lens, with_reqs=True):
        self.seq_lens_sum = sum(seq_lens)
        self._bs = len(seq_lens)
        if with_reqs:
            self.reqs = [NS(origin_input_ids=[0] * (n - 3), output_ids=[0] * 3) for n in seq_lens]

    def batch_size(self):
        return self._bs

    def is_empty(self):
        return self._bs == 0


def mux_state(sched=None):
    """A MuxLoop on 132 SMs in steps of 16 over `sched` (a stand-in Scheduler)."""
    cfgs = partition_configs(132, 16)
    fp, fd = full_modes(132)
    allc = [fp, *sorted(cfgs, key=lambda c: -c.prefill_sms), fd]
    parts = NS(configs=cfgs, full_prefill=fp, full_decode=fd)
    policy = NS(wants_decode_contexts=False, fuses_long_prompts=False,  # what the loop reads of a dispatcher
                queue_key=lambda arrival_s, prompt_tokens: None)
    m = sl.MuxLoop(sched, args=MuxArgs(), parts=parts, cfgs=allc, policy=policy, estimator=None)
    assert m.cfg_index == {c: i for i, c in enumerate(allc)}
    return m


def plan(d, p, layers=2):
    return SpatialPlan(partition=PartitionConfig(d, p), t_decode_worst_ms=1.0, t_prefill_ms=1.0, prefill_layers=layers,
                       reason="test")


FUSED = FusedPlan(chunk=(("a", 480),), t_ms=25.0, total_sms=132)


def test_decode_shape_counts_kv_before_the_decoded_token():
    # (bs, Σ reused, longest reused): the KV before the token being decoded.
    assert decode_shape(FakeBatch([101, 201, 301])) == (3, 600, 300)
    assert decode_shape(FakeBatch([])) == (0, 0, None)
    assert decode_shape(None) == (0, 0, None)
    # No per-request list: the longest is unknown (the estimator assumes a uniform batch).
    assert decode_shape(FakeBatch([101, 201], with_reqs=False)) == (2, 300, None)
    # No seq_lens_sum: the sum comes from the same per-request lengths.
    b = FakeBatch([11, 51])
    b.seq_lens_sum = None
    assert decode_shape(b) == (2, 60, 50)


def test_config_follows_the_plan_when_both_phases_run():
    m = mux_state()
    assert m.config_for(plan(48, 84), True, True).decode_sms == 48


def test_full_gpu_for_a_phase_alone():
    m = mux_state()
    assert m.config_for(plan(48, 84), True, False) == m.parts.full_decode
    assert m.config_for(plan(48, 84), False, True) == m.parts.full_prefill


def test_held_prefill_runs_decode_on_the_full_gpu():
    m = mux_state()
    # (132, 0) with prefill held (0 layers): decode alone on every SM.
    assert m.config_for(plan(132, 0, layers=0), True, True) == m.parts.full_decode
    # A full-mode plan that still launches prefill falls back to the largest decode partition.
    assert m.config_for(plan(132, 0, layers=1), True, True).decode_sms == 112


def test_snapshot_sees_queue_head_only_and_keeps_arrival_times():
    m = mux_state()
    m.arrival = {}
    q = [NS(rid=f"r{i}", origin_input_ids=[0] * (10 + i)) for i in range(200)]
    m.sched = NS(running_batch=FakeBatch([11, 21]), waiting_queue=q)
    s1 = m.snapshot(now=5.0)
    assert len(s1.waiting) == sl.WAITING_VIEW and s1.waiting[0].n == 10
    assert (s1.decode_bs, s1.decode_sum_reused, s1.decode_max_reused) == (2, 30, 20)
    s2 = m.snapshot(now=9.0)
    assert s2.waiting[0].arrival_s == 5.0  # first seen, not re-stamped


def test_the_waiting_queue_goes_in_the_policys_order_before_each_snapshot():
    """The dispatcher's order (earliest TTFT deadline, 2 s + 0.2 ms a token): a 300-token prompt
    that came at 5.0 s (deadline 7.06) goes ahead of a 30,000-token one from 4.0 s (deadline 12.0);
    SGLang's own queue is reordered in place, so its batch formation sees that order too. With
    --mux-fcfs-prefill the queue stays in arrival order."""
    from sglang_mux.policy import SLO, MuxDispatcher

    from test_dispatch import FakeEstimator

    m = mux_state()
    m.policy = MuxDispatcher(FakeEstimator(), SLO(50, 2000, 0.2))
    long_, short, later = (NS(rid="long", origin_input_ids=[0] * 30_000), NS(rid="short", origin_input_ids=[0] * 300),
                           NS(rid="later", origin_input_ids=[0] * 300))
    q = [long_, short]
    m.sched = NS(running_batch=FakeBatch([]), waiting_queue=q)
    m.arrival = {"long": 4.0}
    snap = m.snapshot(now=5.0)
    assert [w.rid for w in snap.waiting] == ["short", "long"] and m.sched.waiting_queue is q and q == [short, long_]
    q.append(later)  # same length, later: behind the first short one, ahead of the long one
    assert [w.rid for w in m.snapshot(now=6.0).waiting] == ["short", "later", "long"]
    m.policy = MuxDispatcher(FakeEstimator(), SLO(50, 2000, 0.2), fcfs=True)
    q[:] = [long_, short]
    assert [w.rid for w in m.snapshot(now=7.0).waiting] == ["long", "short"]


def test_aborted_waiting_requests_are_forgotten():
    m = mux_state()
    m.arrival = {f"gone{i}": 1.0 for i in range(1000)}
    m.arrival["live"] = 2.0
    m.layerwise.active = PrefillRun(batch=NS(split_index=3), state=NS(rids=["act"], reqs=[PrefillReq(5, 0)]))
    m.arrival["act"] = 3.0
    m.sched = NS(running_batch=None, waiting_queue=[NS(rid="live", origin_input_ids=[1])])
    m.snapshot(now=10.0)
    assert m.arrival == {"live": 2.0, "act": 3.0}


class FakeEvent:
    """A completed CUDA timing event at time ``t`` ms."""

    def __init__(self, t, done=True):
        self.t, self.done = t, done

    def query(self):
        return self.done

    def elapsed_time(self, other):
        return other.t - self.t


def test_poll_prefill_counts_chunk_time_bubbles_and_estimate_error():
    from prometheus_client import CollectorRegistry

    from sglang_mux.mux_metrics import MuxMetrics

    reg = CollectorRegistry()
    m = mux_state()
    m.metrics = MuxMetrics(registry=reg)
    seen = []
    m.estimator = NS(observe_prefill=lambda psms, reqs, ms: seen.append((psms, ms)) or 1.25,
                     prefill_correction=lambda psms: 1.3)
    # three chunks of 8 layers on 84 SMs: 10 ms each, a 2 ms gap, then back-to-back; the
    # third has not finished yet
    run = PrefillRun(batch=NS(split_prefill_finished=False), state=NS(reqs=[PrefillReq(4096)]),
                         inflight=[(FakeEvent(0), FakeEvent(10), 8, 84), (FakeEvent(12), FakeEvent(22), 8, 84),
                                   (FakeEvent(22), FakeEvent(32, done=False), 8, 84)])
    m.layerwise.active = run
    m.sched = NS(model_config=NS(num_hidden_layers=32))
    m.layerwise.poll(now=0.0)
    assert seen == [(84, 40.0), (84, 40.0)]           # 10 ms for 8 of 32 layers -> 40 ms model
    assert len(run.inflight) == 1 and run.last_end.t == 22
    v = lambda name: reg.get_sample_value(name)  # noqa: E731
    assert v("sglang_mux:prefill_busy_seconds_total") == pytest.approx(0.020)
    assert v("sglang_mux:prefill_idle_seconds_total") == pytest.approx(0.002)
    assert v("sglang_mux:prefill_latency_ratio_count") == 2
    assert v("sglang_mux:prefill_latency_ratio_sum") == pytest.approx(2.5)
    assert reg.get_sample_value("sglang_mux:prefill_correction", {"prefill_sms": "84"}) == 1.3
    # a resumed batch's pause is not a bubble
    run.last_end = None
    run.inflight[0][1].done = True
    m.layerwise.poll(now=0.0)
    assert v("sglang_mux:prefill_idle_seconds_total") == pytest.approx(0.002)


def test_a_finished_batch_books_its_wall_time_against_its_planned_time_unless_it_was_paused():
    """From its formation to the poll that finds its last chunk done, against the T_P its plan
    gave it (``PrefillWall``); a batch that was preempted waited for another."""
    from sglang_mux.prefill_wall import PrefillWall

    for preempted, booked in ((False, [(45.0, 90.0)]), (True, [])):
        m = mux_state()
        m.metrics = None
        wall = PrefillWall()
        m.estimator = NS(observe_prefill=lambda *a: None, prefill_wall=wall)
        batch = NS(split_prefill_finished=True, reqs=[], filter_batch=lambda: None, is_empty=lambda: True)
        run = PrefillRun(batch=batch, state=NS(reqs=[PrefillReq(64)], preempted_by_other=preempted),
                         inflight=[(FakeEvent(0), FakeEvent(10), 8, 84), (FakeEvent(12), FakeEvent(22), 8, 84)],
                         started_s=10.0, planned_ms=45.0)
        m.layerwise.active, m.layerwise.paused = run, None
        m.sched = NS(model_config=NS(num_hidden_layers=32), process_batch_result=lambda b, r: None)
        m.layerwise.poll(now=10.09)
        assert m.layerwise.active is None and list(wall._obs) == [pytest.approx(b) for b in booked]


def test_unmeasurable_idle_time_never_stops_serving():
    from prometheus_client import CollectorRegistry

    from sglang_mux.mux_metrics import MuxMetrics

    class Incomparable(FakeEvent):
        def elapsed_time(self, other):
            if isinstance(other, Incomparable) and other is not self and other.t - self.t != 10:
                raise RuntimeError("events from different contexts")
            return other.t - self.t

    reg = CollectorRegistry()
    m = mux_state()
    m.metrics = MuxMetrics(registry=reg)
    m.estimator = NS(observe_prefill=lambda *a: None, prefill_correction=lambda psms: 1.0)
    run = PrefillRun(batch=NS(split_prefill_finished=False), state=NS(reqs=[PrefillReq(64)]),
                         inflight=[(Incomparable(0), Incomparable(10), 8, 84), (Incomparable(12), Incomparable(22), 8, 84),
                                   (Incomparable(23), Incomparable(33), 8, 84)])
    m.layerwise.active = run
    m.sched = NS(model_config=NS(num_hidden_layers=32))
    m.layerwise.poll(now=0.0)
    assert not run.inflight and m.layerwise.idle_unmeasurable          # all chunks retired, idle given up
    assert reg.get_sample_value("sglang_mux:prefill_busy_seconds_total") == pytest.approx(0.030)
    assert reg.get_sample_value("sglang_mux:prefill_idle_seconds_total") == 0.0


def test_guard_record_shows_what_online_refinement_added(good):
    from sglang_mux.estimator import Estimator

    est = Estimator.from_table(good)
    q = (64, 16, 16 * 3000, 8192, 2048)
    before = guard_record(est, *q)
    assert before["in_use"] == before["table"] > 1.0
    est.observe_decode(*q, est.decode_worst_ms(*q) * 1.2)
    after = guard_record(est, *q)
    assert after["table"] == before["table"]
    assert after["in_use"] == pytest.approx(before["table"] * 1.2, abs=1e-3)


def test_a_plain_prefill_start_can_wait_for_the_decode_launch(monkeypatch):
    started = []
    m = mux_state()
    lw = m.layerwise
    monkeypatch.setattr(lw, "start", lambda now, p: started.append(p.new_prefill_rids) or True)
    new = dataclasses.replace(plan(48, 84), new_prefill_rids=("a", "b"))
    assert lw.apply(new, 0.0, defer_start=True) is True and started == []  # the caller starts it
    assert lw.apply(new, 0.0) is False and started == [("a", "b")]  # formed at once
    lw.active = object()  # a batch already running: nothing to start, nothing deferred
    assert lw.apply(new, 0.0, defer_start=True) is False and started == [("a", "b")]


def test_deferring_needs_the_flag_a_decode_and_no_failed_start():
    from sglang_mux.mux_args import split_argv

    m = mux_state()
    m.args = split_argv([])[0]
    assert m.args.defer_prefill_start is False and not m.layerwise.may_defer_start(decoding=True)
    m.args = split_argv(["--mux-defer-prefill-start"])[0]
    assert m.layerwise.may_defer_start(decoding=True) and not m.layerwise.may_defer_start(decoding=False)
    m.layerwise.defer_failed = True  # no KV for the last deferred batch: form the next one first again
    assert not m.layerwise.may_defer_start(decoding=True)


def test_the_scheduler_refuses_prompts_one_prefill_cannot_hold(caplog):
    sched = NS(server_args=NS(model_path="launch/models/llama-3.1-8b", mem_fraction_static=0.85),
               max_req_input_len=131071, max_prefill_tokens=16384)
    with caplog.at_level("WARNING", logger="sglang_mux.scheduler_loop"):
        mux_state(sched).limit_prompts(free_bytes=int(7.61 * 2**30), total_bytes=int(79.18 * 2**30))
    assert sched.max_req_input_len == 34432
    assert "--mem-fraction-static 0.67" in caplog.text
    sched.max_req_input_len = 131071
    mux_state(sched).limit_prompts(free_bytes=22 * 2**30, total_bytes=int(79.18 * 2**30))
    assert sched.max_req_input_len == 131071


def test_the_hybrid_fuses_prompts_one_prefill_cannot_hold_instead_of_refusing_them(caplog):
    sched = NS(server_args=NS(model_path="launch/models/llama-3.1-8b", mem_fraction_static=0.85),
               max_req_input_len=131071, max_prefill_tokens=16384)
    m = mux_state(sched)
    m.policy = NS(fuses_long_prompts=True, layerwise_max_tokens=None)  # what the loop reads of HybridPolicy
    with caplog.at_level("INFO", logger="sglang_mux.scheduler_loop"):
        m.limit_prompts(free_bytes=int(7.61 * 2**30), total_bytes=int(79.18 * 2**30))
    assert sched.max_req_input_len == 131071 and m.policy.layerwise_max_tokens == 34432
    assert "more than 34432 new tokens runs as fused chunks" in caplog.text
    # --mux-layerwise-max-tokens lowers it (the greedy check's yield: its 40K prompts go fused), never raises it
    for cap, got in ((20000, 20000), (50000, 34432)):
        m.args = MuxArgs(layerwise_max_tokens=cap)
        m.limit_prompts(free_bytes=int(7.61 * 2**30), total_bytes=int(79.18 * 2**30))
        assert m.policy.layerwise_max_tokens == got


def test_a_launch_note_says_whether_the_host_waited_and_what_the_allocator_did(monkeypatch):
    later = loop_layerwise.launch_note(3, 4.567, first=False, waited=False, allocs_before=None)
    assert later == {"layers": 3, "host_ms": 4.57, "first": False, "waited": False}
    monkeypatch.setattr(loop_layerwise, "_device_allocs", lambda: (12, 5))
    first = loop_layerwise.launch_note(1, 31.0, first=True, waited=True, allocs_before=(10, 5))
    assert first == {"layers": 1, "host_ms": 31.0, "first": True, "waited": True, "cuda_malloc": 2, "cuda_free": 0}


def test_an_iterations_launch_note_goes_into_one_timeline_row_only():
    lw = mux_state().layerwise
    assert lw.take_launch_note() == {}
    lw.launch_note = {"layers": 2}
    assert lw.take_launch_note() == {"launch": {"layers": 2}}
    assert lw.take_launch_note() == {}


def test_a_timeline_row_says_what_the_policy_saw_waiting():
    """The 2026-12-06 mixed point's short prompts waited 2.5-3.5 s behind a fused 81K-token prompt
    and its rows could not say whether the policy saw them: each row now says."""
    snap = Snapshot(65.5, 1, 400, waiting=(WaitingReq("r48", 65.06, 90, 0), WaitingReq("r49", 65.8, 67, 0)),
                    chunked=WaitingReq("r46", 63.25, 45000, 36000))
    assert queue_note(snap) == {"waiting": 2, "head": [90, 440.0], "chunked": [45000, 2250.0]}
    assert queue_note(Snapshot(65.5, 1, 400)) == {}


def test_an_iteration_that_starts_a_batch_books_its_host_time_twice():
    m = mux_state()
    gaps = m.gaps
    b = gaps.budgets = HostBudgets(decode=DecodeHostTime(refresh=1), start=DecodeHostTime(refresh=1))
    plain = SpatialPlan(partition=PartitionConfig(64, 68), t_decode_worst_ms=20.0, t_prefill_ms=50.0, prefill_layers=2)
    start = dataclasses.replace(plain, new_prefill_rids=("a",))
    gaps.book(plain, 1.000, 20.0)  # the first result: no gap before it
    assert b.decode.value_ms == 0.0 and gaps.last_done == 1.000
    gaps.book(plain, 1.024, 20.0)  # 24 ms wall, 20 on the GPU
    gaps.book(start, 1.060, 22.0)  # 36 ms wall: formation and first launch in the gap
    assert b.decode._gaps == pytest.approx([4.0, 14.0])
    assert b.start._gaps == pytest.approx([14.0])
    gaps.break_gap()  # an iteration without a decode broke the gap
    gaps.book(start, 2.0, 20.0)
    assert len(b.start._gaps) == 1 and gaps.last_done == 2.0


def test_a_fused_iteration_books_its_gap_against_its_price_to_its_own_budget():
    m = mux_state()
    gaps = m.gaps
    b = gaps.budgets = HostBudgets(decode=DecodeHostTime(refresh=1), fused=DecodeHostTime(refresh=1))
    gaps.book(FUSED, 1.000, 24.0, fused=True)
    gaps.book(FUSED, 1.031, 24.0, fused=True)  # 31 ms: 6 past its 25-ms price, 7 past its GPU time
    assert b.fused._gaps == pytest.approx([6.0]) and b.decode._gaps == []
    gaps.book(FUSED, 1.050, 18.0)  # a synchronous decode: the decode's budget, against its GPU time
    assert b.decode._gaps == pytest.approx([1.0])
    b.fused = None  # no fused budget: the decode's, against GPU time
    gaps.book(FUSED, 1.080, 26.0, fused=True)
    assert b.decode._gaps == pytest.approx([1.0, 4.0])


def test_the_first_fused_iteration_of_a_streak_books_to_its_own_budget():
    """SGLang's set-up of the first mixed batch after another kind of iteration lands in that
    token's gap: booked apart, so that the streak's budget is not its tail (and without a start
    budget, to the streak's as before)."""
    m = mux_state()
    gaps = m.gaps
    b = gaps.budgets = HostBudgets(fused=DecodeHostTime(refresh=1), fused_start=DecodeHostTime(refresh=1))
    gaps.book(FUSED, 1.000, 20.0)  # a decode alone
    gaps.book(FUSED, 1.040, 24.0, fused=True, starts_streak=True)  # 40 ms: 15 past its price
    gaps.book(FUSED, 1.066, 24.0, fused=True)  # 26 ms: 1 past
    assert b.fused_start._gaps == pytest.approx([15.0]) and b.fused._gaps == pytest.approx([1.0])
    b.fused_start = None
    gaps.book(FUSED, 1.106, 24.0, fused=True, starts_streak=True)
    assert b.fused._gaps == pytest.approx([1.0, 15.0])


def test_the_snapshots_host_fields_are_the_budgets_view():
    m = mux_state()
    m.sched = NS(running_batch=None, waiting_queue=[])
    m.gaps.budgets = HostBudgets.measured(25.0)
    for wall in (1.000, 1.030, 1.070, 1.105):
        m.gaps.book(FUSED, wall, 20.0, fused=True)
    snap = m.snapshot(now=1.0)
    # overruns of 5, 15 and 10 ms: three are too few for a P99, so the rank below the two largest
    assert (snap.fused_host_ms, snap.fused_rate_host_ms) == pytest.approx((5.0, 10.0)) and not snap.fused_streak
    assert (snap.decode_host_ms, snap.start_host_ms, snap.fused_start_host_ms) == (0.0, 0.0, None)


def test_fused_rows_split_prompt_pieces_from_one_token_rows():
    """A mixed batch's rows: prompt pieces as PrefillReq, one-token rows (decodes, and a one-token
    piece, priced alike) as contexts, in SGLang's order; the batch's tokens counted once each."""
    from sglang_mux.estimator import PrefillReq

    batch = NS(extend_lens=[400, 1, 1, 37, 1], prefix_lens=[0, 1002, 1199, 4096, 0])
    rows = fused_rows(batch)
    assert rows.pieces == [PrefillReq(400, 0), PrefillReq(37, 4096)] and rows.contexts == [1002, 1199, 0]
    assert rows.tokens == 440


def test_a_decode_alone_in_overlap_mode_teaches_a_tables_fixed_cost_and_nothing_else():
    """The hybrid runs every decode alone through observe_fused: served at TP 2 (the 70B on H200s)
    those ran 5.6 % over the table's price, and the fixed cost they should teach stayed at 0."""
    from pathlib import Path

    from sglang_mux.estimator import DEFAULT_H100_PROBE, Estimator
    from sglang_mux.tables import ModelShape

    root = Path(__file__).resolve().parents[1]
    est = Estimator.from_table(root / "contention_tables/llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3")
    m = mux_state()
    m.estimator = est
    snap = NS(decode_bs=16, decode_sum_reused=16 * 2048, decode_max_reused=2048, fused_streak=True,
              decode_host_ms=0.0, fused_host_ms=None, fused_start_host_ms=None)
    alone = NS(plan=DecodePlan(partition=PartitionConfig(132, 0), t_decode_worst_ms=10.0), snap=snap,
               cfg=NS(decode_sms=132, prefill_sms=0), now=0.0)
    solo = est.decode_solo_ms(132, 16, 16 * 2048, 2048)
    for _ in range(50):
        m.fused.observe(alone, None, solo + 1.0)
    assert 0.9 < est.decode_offset_ms < 1.0  # most of the way to the 1-ms excess
    assert est.decode_worst_ms(132, 16, 16 * 2048, 0, 0, 2048) == pytest.approx(solo + est.decode_offset_ms)
    learned = est.decode_offset_ms
    fused = NS(plan=FUSED, snap=snap,
               cfg=alone.cfg, now=0.0)
    rows = fused_rows(NS(extend_lens=[480] + [1] * 16, prefix_lens=[0] + [2048] * 16))
    m.fused.observe(fused, rows, solo + 20.0)
    assert est.decode_offset_ms == learned  # a fused iteration prices its own way
    cold = Estimator.cold_start(ModelShape.coerce(root / "launch/models/llama-3.1-8b/config.json"),
                                DEFAULT_H100_PROBE, 132, 16, warn=False)
    m.estimator = cold
    before = cold.decode_solo_ms(32, 16, 16 * 2048, 2048)
    for _ in range(50):
        m.fused.observe(alone, None, 0.5 * cold.decode_solo_ms(132, 16, 16 * 2048, 2048))
    # a cold start's partitions keep their price: a whole-GPU decode sets no unseen partition's
    assert cold.decode_offset_ms == 0.0 and cold.decode_solo_ms(32, 16, 16 * 2048, 2048) == before
