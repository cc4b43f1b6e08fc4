"""The multiplexed scheduler loop: SGLang 0.5.16's Scheduler driven by our policy (`MuxLoop`).

`init_mux` (patched in as `Scheduler.init_pdmux`) builds one MuxLoop; `mux_event_loop` (as
`Scheduler.event_loop_pdmux`) runs it. One iteration (`MuxLoop.step`), phase by phase:
  receive         new requests
  plan            poll the in-flight prefill's completion events (never block on them; a finished
                  prefill is processed and merged into the running decode batch), Snapshot ->
                  policy.plan, one Decision for every TP rank (tp_consensus) -> preemption / new
                  prefill batch (SGLang's own batch formation); then the partition switch: new
                  streams wait on the old ones' events
  (fused)         a fused plan instead runs SGLang's own mixed iteration on the whole GPU: a prompt
                  chunk and every decode row in one extend batch (`run_fused`), launched before the
                  last fused iteration's result is processed, as SGLang's overlap loop does; the
                  first other plan ends the streak (`drain_fused`) and is made again
  launch_decode   one decode iteration (a CUDA graph captured on this partition's decode stream)
  launch_prefill  N_PL prefill layers on the prefill stream (at most two chunks in flight, so a
                  preemption or partition change takes effect within about one decode iteration)
  finish          wait for the decode (its tokens are needed), process it, feed the measured
                  latency to the estimator, the metrics and the timeline
Each phase's host time goes into the timeline row of its decode iteration (``host_ms``,
loop_clock.py): a token's gap is the decode's GPU time plus the host's between two decode results.
Decisions live in dispatch.py, numbers in estimator.py, the loop's records in loop_state.py; this
module alone calls the Scheduler and CUDA (torch and sglang are imported where used, so the class
can be built and tested on the CPU with stand-ins).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import time
from typing import TYPE_CHECKING

from sglang_mux.loop_clock import LoopClock
from sglang_mux.loop_state import (Chunk, DecodeLaunch, Decision, FusedLaunch, Iteration, PrefillRun, chunked_view,
                                   decode_contexts, decode_shape, decoding_view, fused_rows, guard_record,
                                   prefill_state)
from sglang_mux.mux_args import MuxArgs
from sglang_mux.tp_consensus import Consensus, PendingTp, SingleRank, TpConsensus, agree, before_group

if TYPE_CHECKING:
    import torch
    from sglang.srt.managers.scheduler import Scheduler

    from sglang_mux.dispatch import DecodeHostTime, Plan, Policy, Snapshot
    from sglang_mux.estimator import Estimator
    from sglang_mux.green_ctx import GreenPartitionSet
    from sglang_mux.mux_metrics import MuxMetrics, TimelineWriter
    from sglang_mux.partitions import PartitionConfig

logger = logging.getLogger(__name__)
WAITING_VIEW = 64  # the policy looks at the head of the queue only (decision cost is bounded)


def init_mux(self: Scheduler) -> None:
    """Replaces SchedulerMultiplexMixin.init_pdmux (which reads a missing self.gpu_id)."""
    self._mux = MuxLoop.build(self)


def mux_event_loop(self: Scheduler) -> None:
    """Replaces SchedulerMultiplexMixin.event_loop_pdmux."""
    self._mux.run()


class MuxLoop:
    """The multiplexed loop over one SGLang Scheduler (`sched`), and its state across iterations.

    The Scheduler attributes it uses are SGLang's; `build` also sets those SGLang's decode graph
    runner reads (stream_groups, sm_counts, real_sm_group_num, split_prefill_batch). Not
    thread-safe: it runs on the scheduler's thread only.
    """

    def __init__(self, sched: Scheduler, args: MuxArgs, parts: GreenPartitionSet, cfgs: list[PartitionConfig],
                 policy: Policy, estimator: Estimator, *, metrics: MuxMetrics | None = None,
                 timeline: TimelineWriter | None = None, host_time: DecodeHostTime | None = None,
                 fused_host_time: DecodeHostTime | None = None, start_host_time: DecodeHostTime | None = None,
                 fused_start_host_time: DecodeHostTime | None = None,
                 clock: LoopClock | None = None, consensus: Consensus | None = None):
        """``cfgs``: the partitions in SGLang's stream-group order (index = stream index);
        ``host_time``: None leaves the loop's host time out of the TBT budget; ``fused_host_time``:
        a fused iteration's own (None: it counts in ``host_time``); ``start_host_time``: that of a
        decode iteration that starts a layer-wise batch, also counted in ``host_time`` (None: not
        kept); ``fused_start_host_time``: that of the first fused iteration of a streak, not
        counted in ``fused_host_time`` (None: counted there); ``consensus``: how TP ranks agree on
        each iteration (None: a single rank)."""
        self.sched = sched
        self.args = args
        self.parts = parts
        self.cfgs = cfgs
        self.cfg_index: dict[PartitionConfig, int] = {c: i for i, c in enumerate(cfgs)}
        self.policy = policy
        self.estimator = estimator
        self.metrics = metrics
        self.timeline = timeline
        self.host_time = host_time
        self.fused_host_time = fused_host_time
        self.start_host_time = start_host_time
        self.fused_start_host_time = fused_start_host_time
        self.clock = clock if clock is not None else LoopClock(os_stats=False)
        self.consensus = consensus if consensus is not None else SingleRank()
        self.idx = 0  # the current stream group
        self.active: PrefillRun | None = None
        self.paused: PrefillRun | None = None  # preempted, KV kept; at most one
        self.arrival: dict[str, float] = {}  # rid -> first time seen waiting (time.monotonic)
        self.idle_unmeasurable = False  # elapsed_time across prefill streams failed once: stop trying
        self.last_decode_done: float | None = None  # perf_counter after the last decode's result (None: gap broken)
        self.defer_failed = False  # the last new prefill batch formed after a decode launch could not start
        self.pending: FusedLaunch | None = None  # a fused iteration launched, its result not processed yet
        self.launch_note: dict | None = None  # the last layer-wise launch, for this iteration's timeline row

    @classmethod
    def build(cls, sched: Scheduler) -> MuxLoop:
        """From the Scheduler being initialised and MuxArgs.from_env(): green-context partitions,
        their stream groups installed into SGLang, the estimator, policy, metrics and timeline.
        Raises MuxArgError / GreenContextError / TableError with what to do; a metrics problem
        only logs a warning (metrics must never stop serving)."""
        import torch
        from sglang.srt.multiplex import pdmux_context

        from sglang_mux.dispatch import HOST_STALL_SHARE, DecodeHostTime, make_policy, policy_name
        from sglang_mux.estimator import Estimator
        from sglang_mux.green_ctx import GreenPartitionSet, install_stream_groups
        from sglang_mux.mux_args import attention_backend
        from sglang_mux.probe import safe_probe
        from sglang_mux.tables import resolve_table, tables_root

        args = MuxArgs.from_env()
        backend = attention_backend(sched.server_args)
        gpu_id = getattr(sched, "gpu_id", None)
        if gpu_id is None:
            gpu_id = sched.ps.gpu_id
        parts = GreenPartitionSet(device_index=gpu_id, granularity=args.sm_granularity)
        args.validate(parts.total_sms)
        cfgs = install_stream_groups(parts, sched.server_args)
        sched.stream_groups = pdmux_context.STREAM_GROUPS
        sched.sm_counts = pdmux_context.SM_COUNTS
        sched.real_sm_group_num = len(cfgs)
        sched.split_prefill_batch = None

        tables = None if args.contention_table == "auto" else resolve_table(args.contention_table)
        estimator = Estimator.for_model(
            _model_config(sched),
            gpu_name=torch.cuda.get_device_name(gpu_id),
            total_sms=parts.total_sms,
            tables_root=tables_root(),
            attention_backend=backend,
            table_dir=tables,
            granularity=args.sm_granularity,
            tp_size=int(getattr(sched.server_args, "tp_size", 1) or 1),
            probe=lambda: safe_probe(parts),
        )
        policy = make_policy(policy_name(args), estimator, tbt_slo_ms=args.tbt_slo_ms, ttft_slo_ms=args.ttft_slo_ms,
                             preemption=args.preemption, ttft_ms_per_token=args.ttft_ms_per_token)
        consensus = before_group(sched)  # SGLang creates the TP group after this: run() joins it
        stall_ms = HOST_STALL_SHARE * args.tbt_slo_ms
        loop = cls(sched, args, parts, cfgs, policy, estimator,
                   host_time=DecodeHostTime(quantile=args.tbt_host_quantile) if args.tbt_host_budget else None,
                   fused_host_time=DecodeHostTime(quantile=args.fused_host_quantile, stall_ms=stall_ms)
                   if args.tbt_host_budget else None,
                   start_host_time=DecodeHostTime(quantile=args.tbt_host_quantile) if args.tbt_host_budget else None,
                   fused_start_host_time=DecodeHostTime(quantile=args.fused_host_quantile, stall_ms=stall_ms)
                   if args.tbt_host_budget and args.fused_start_budget else None,
                   clock=LoopClock(os_stats=bool(args.timeline)), consensus=consensus)
        if not consensus.leader:  # the leader decides, so its metrics and timeline are the server's
            return loop
        try:
            from sglang_mux import mux_metrics

            # Data-parallel replicas (each its own scheduler and GPU): metrics labelled and a
            # timeline file each, so that no two replicas write one series or one file.
            ps = getattr(sched, "ps", None)
            dp = getattr(ps, "dp_rank", None) if getattr(ps, "dp_size", 1) > 1 else None
            loop.metrics = mux_metrics.MuxMetrics(labels={"dp_rank": str(dp)} if dp is not None else None)
            if args.timeline:
                loop.timeline = mux_metrics.TimelineWriter(mux_metrics.replica_path(args.timeline, dp),
                                                           max_bytes=int(args.timeline_max_mb * 2**20))
        except Exception as e:  # metrics must never stop serving
            logger.warning("sglang_mux metrics disabled: %s", e)
        logger.info(
            "sglang_mux: %d partitions on %d SMs, attention backend %s, policy=%s, TBT SLO %.0f ms, TTFT SLO %.0f ms, "
            "estimator: %s", len(cfgs), parts.total_sms, backend, args.policy,
            args.tbt_slo_ms, args.ttft_slo_ms, estimator.source,
        )
        return loop

    # ---- the loop ---------------------------------------------------------------------------

    def run(self) -> None:
        """Until the Scheduler's ``gracefully_exit``: first, at TP > 1, the TP group (`join_tp`),
        the prompt-length limit (the KV pool and decode graphs are allocated by now) and whether
        the fused price's prior holds, then
        `step` after `step`, then the last fused iteration's result."""
        import torch

        self.clock.hook_gc()
        if isinstance(self.consensus, PendingTp):
            self.join_tp()
        torch.cuda.empty_cache()
        self.limit_prompts(*torch.cuda.mem_get_info())
        # Through SGLang's prefill CUDA graph (captured after init_mux) a fused iteration costs about
        # a table's base price, padded to a captured size; eagerly, 15 ms more.
        self.estimator.graph_tokens = _prefill_graph_tokens(self.sched)
        self.estimator.fused_price.prior_holds = self.estimator.fused_prior_holds()
        with torch.inference_mode():
            while not self.sched.gracefully_exit:
                self.step()
            self.drain_fused()  # its requests' tokens are still to be sent

    def join_tp(self) -> None:
        """Swap `PendingTp` for the Scheduler's TP group, now that SGLang has created it, and check
        that every rank built the leader's partitions."""
        c = TpConsensus.of(self.sched)
        if c.leader != self.consensus.leader:
            raise RuntimeError(f"sglang_mux: this rank was built as TP {'leader' if self.consensus.leader else 'follower'}"
                               f" but is {'the leader' if c.leader else 'a follower'} of SGLang's TP group")
        agree(c, [(cfg.decode_sms, cfg.prefill_sms) for cfg in self.cfgs], "the green-context partitions")
        self.consensus = c

    def step(self) -> None:
        """One iteration: receive, plan, switch, launch decode, launch prefill, finish. With
        nothing to run it calls SGLang's ``on_idle`` instead of the launches."""
        clock = self.clock
        clock.lap("book")  # the last iteration's accounting (estimator, metrics, timeline)
        now = time.monotonic()
        self.receive(now)
        it = self.plan(now)
        if it.plan.chunk or it.overlapped:
            self.run_fused(it)
            return
        if not it.has_work:
            self.last_decode_done = None
            clock.reset()
            self.sched.on_idle()
            return
        it.cfg = self.config_for(it.plan, it.has_decode, it.has_prefill)
        it.streams = self.switch(it.cfg)
        clock.lap("switch")
        self.launch_decode(it)
        clock.lap("decode_launch")
        self.launch_prefill(it)
        clock.lap("prefill_launch")
        self.finish(it)

    # ---- phases -----------------------------------------------------------------------------

    def receive(self, now: float) -> None:
        """SGLang receives and queues new requests (the same on every TP rank: SGLang
        broadcasts them)."""
        sched = self.sched
        try:
            reqs = sched.request_receiver.recv_requests()
        except RuntimeError as e:  # at TP, SGLang's broadcast of them is where a dead rank shows first
            lost = getattr(self.consensus, "lost_peer", None)  # TP > 1 only
            if lost is not None and "gloo" in str(e).lower():
                raise lost(e, "receiving requests") from e
            raise
        sched.process_input_requests(reqs)
        self.clock.lap("recv")

    def decide(self, now: float) -> tuple[Decision, Snapshot, float | None]:
        """This iteration's `Decision`, the same on every TP rank (tp_consensus): the leader
        retires the active prefill's finished chunks (`poll_prefill`; a finished batch joins the
        decode batch), asks the policy for a Plan on a Snapshot and looks whether fewer than two
        chunks are queued; a follower applies the leader's retirements, waiting on its own
        events, and takes its plan. Returns (decision, snapshot, decision CPU µs or None)."""
        if not self.consensus.leader:
            d = self.consensus.share(None)
            self.poll_prefill(now, retire=d.retired)
            self.clock.lap("poll")
            return d, self.snapshot(now), None
        retired = self.poll_prefill(now)
        self.clock.lap("poll")
        snap = self.snapshot(now)
        t0 = time.perf_counter()
        plan = self.policy.plan(snap)
        decide_us = (time.perf_counter() - t0) * 1e6
        run = self.active
        launch = run is None or sum(1 for ev in run.inflight if not ev[1].query()) < 2
        return self.consensus.share(Decision(retired, plan, launch)), snap, decide_us

    def plan(self, now: float) -> Iteration:
        """The iteration's Plan (`decide`), then its preemption or new prefill batch
        (`apply_plan`); a plain new batch may be left for after the decode launch
        (`Iteration.deferred`)."""
        sched = self.sched
        d, snap, decide_us = self.decide(now)
        overlapped = self.overlaps(d.plan, snap)
        if self.pending is not None and not d.plan.chunk and not overlapped:
            # The fused streak ends: its last batch's tokens and requests are needed (the running
            # batch catches up), and the plan is made again on that state.
            self.drain_fused()
            d, snap, decide_us = self.decide(now)
            overlapped = self.overlaps(d.plan, snap)
        plan = d.plan
        deferred = False
        if not overlapped:  # a decode alone in overlap mode starts and preempts nothing
            decoding = sched.running_batch is not None and not sched.running_batch.is_empty()
            deferred = self.apply_plan(plan, now, defer_start=self.may_defer_start(decoding))
            if self.active is not None:
                self.defer_failed = False
        self.clock.lap("plan")
        # in a fused streak the decoding requests are in the batch in flight, not the running batch
        has_decode = overlapped or (sched.running_batch is not None and not sched.running_batch.is_empty())
        has_prefill = self.active is not None or deferred
        if self.metrics:
            self.metrics.on_plan(plan, decide_us)
            self.metrics.on_memory(now=now)
        return Iteration(now, snap, plan, deferred, has_decode, has_prefill, launch_prefill=d.launch_prefill,
                         overlapped=overlapped)

    def launch_decode(self, it: Iteration) -> None:
        """SGLang prepares the decode batch and launches one iteration on the decode stream
        between two timing events (`it.decode`; None when the batch turned out empty)."""
        if not it.has_decode:
            return
        import torch
        from sglang.srt.distributed.parallel_state import set_pdmux_status

        sched = self.sched
        decode_stream = it.streams[1]
        with torch.cuda.stream(decode_stream):
            set_pdmux_status(False)
            sched.running_batch = sched.update_running_batch(sched.running_batch)
            if not sched.running_batch.is_empty():
                batch = sched.running_batch
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record(decode_stream)
                result = sched.run_batch(batch)
                end.record(decode_stream)
                it.decode = DecodeLaunch(batch, result, start, end)

    def launch_prefill(self, it: Iteration) -> None:
        """Form a deferred new prefill batch (the decode is on the GPU meanwhile), then launch the
        plan's layers of the active batch on the prefill stream, unless the policy holds prefill
        (0 layers), the partition has no prefill SMs, or two chunks are still queued."""
        import torch

        plan, cfg = it.plan, it.cfg
        if it.deferred:  # the decode is on the GPU: form the new prefill batch meanwhile
            self.defer_failed = not self.start_prefill(it.now, plan)
            if not self.defer_failed:
                # Its inputs were just copied on this (non-mux) stream; the first layers follow at
                # once, where without deferring the decode launch stood in between.
                it.streams[0].wait_stream(torch.cuda.current_stream())
            self.clock.lap("prefill_start")
        run = it.prefill = self.active
        # prefill_layers == 0 means the policy holds prefill back (overload: decode first).
        # it.launch_prefill: fewer than two chunks queued when decided (bounded preemption and
        # partition-switch latency), the leader's view on every TP rank.
        if run is not None and plan.prefill_layers > 0 and cfg.prefill_sms > 0 \
                and not run.batch.split_prefill_finished and it.launch_prefill:
            self.launch_prefill_layers(run, plan.prefill_layers, cfg.prefill_sms)
            if self.launch_note is not None and it.decode is not None:  # the decode finished meanwhile?
                self.launch_note["decode_done"] = it.decode.end.query()
            if self.timeline and it.decode is None:  # prefill-only steps are decisions too
                self.timeline.write(plan, now=it.now, decode_bs=0, decode_sms=cfg.decode_sms,
                                    prefill_sms=cfg.prefill_sms, **self.take_launch_note())

    def finish(self, it: Iteration) -> None:
        """Wait for the decode iteration, let SGLang process its tokens, and feed its measured
        GPU time and the loop's host time to the estimator, metrics and timeline. Without a
        decode the token gap is broken (host time not counted) and, with prefill alone, the
        loop sleeps 0.2 ms (nothing to launch until an event fires or a request comes)."""
        import torch

        sched, clock, d = self.sched, self.clock, it.decode
        if d is not None:
            decode_stream = it.streams[1]
            with torch.cuda.stream(decode_stream):
                decode_stream.synchronize()
                clock.lap("sync")
                sched.process_batch_result(d.batch, d.result)
            clock.lap("result")
            self.observe_decode(it, d.start.elapsed_time(d.end))
        else:
            self.last_decode_done = None  # no decode this step: the next gap is not a token's
            clock.reset()
        if d is None and it.has_prefill:
            time.sleep(0.0002)
        sched.last_batch = d.batch if d is not None else None

    # ---- receive ----------------------------------------------------------------------------

    def poll_prefill(self, now: float, retire: int | None = None) -> int:
        """Query-based sync: retire the active batch's finished chunks (their GPU time to the
        estimator and metrics); a finished batch is processed by SGLang and joins the decode
        batch, and a paused batch resumes. ``retire``: that many chunks, waiting for any not
        finished yet (a TP follower applying the leader's count; all of them after a preemption's
        sync); None: as many as have finished (never blocks). Returns the chunks retired."""
        sched = self.sched
        run = self.active
        if run is None:
            return 0
        n_layers = sched.model_config.num_hidden_layers
        if retire is None:
            retire = 0
            while retire < len(run.inflight) and run.inflight[retire][1].query():
                retire += 1
        for _ in range(retire):
            start, end, layers, psms = run.inflight.pop(0)
            if not end.query():
                end.synchronize()
            ms = start.elapsed_time(end)
            ratio = None
            if psms and layers:
                ratio = self.estimator.observe_prefill(psms, run.state.reqs, ms * n_layers / layers)
            if self.metrics:
                # Prefill-stream idle time between two chunks of one batch: a bubble (or a hold
                # by the policy); a preempted batch's pause is not counted (last_end reset).
                idle = None
                if run.last_end is not None and not self.idle_unmeasurable:
                    try:  # metrics must never stop serving (e.g. events of two streams not comparable)
                        idle = max(0.0, run.last_end.elapsed_time(start))
                    except Exception as e:  # noqa: BLE001
                        logger.warning("sglang_mux: prefill idle time not measurable (%s); not counted", e)
                        self.idle_unmeasurable = True
                self.metrics.on_prefill_chunk(ms, idle, ratio)
                if psms:
                    self.metrics.on_prefill_correction(psms, self.estimator.prefill_correction(psms))
            run.last_end = end
        if run.batch.split_prefill_finished and not run.inflight:
            batch = run.batch
            if run.started_s is not None and not run.state.preempted_by_other:  # a pause is not its rate
                self.estimator.prefill_wall.observe(run.planned_ms, (now - run.started_s) * 1e3)
            sched.process_batch_result(batch, run.result)
            for r in batch.reqs:
                self.arrival.pop(r.rid, None)
            # It joins the decode batch before this iteration's decode: the gap to its second token
            # stays one iteration (joining after the decode doubled it, 37 -> 67 ms median on an H100).
            batch.filter_batch()
            self.join_running(batch)
            self.active = None
            if self.paused is not None:  # resume the preempted batch where it stopped, KV kept
                self.active, self.paused = self.paused, None
                self.active.needs_reinit = True
                self.active.last_end = None  # its pause is the policy's choice, not a bubble
        return retire

    # ---- plan -------------------------------------------------------------------------------

    def snapshot(self, now: float) -> Snapshot:
        """The policy's input: decode batch shape, the head of the waiting queue (first-seen
        times kept in `arrival`), the active and paused prefill batches, the host-time budget."""
        from sglang_mux.dispatch import Snapshot, WaitingReq

        sched = self.sched
        decoding = decoding_view(sched.running_batch, self.pending, getattr(sched, "chunked_req", None))
        bs, sum_reused, max_reused = decode_shape(decoding)
        if len(self.arrival) > 4 * WAITING_VIEW + len(sched.waiting_queue):
            self.forget_gone()  # requests aborted while waiting never reach a prefill batch
        waiting = []
        for req in sched.waiting_queue[:WAITING_VIEW]:
            t = self.arrival.setdefault(req.rid, now)
            waiting.append(WaitingReq(rid=req.rid, arrival_s=t, n=len(req.origin_input_ids), r=0))
        act = self.active.state if self.active else None
        if act is not None:
            act.layers_done = self.active.batch.split_index
        wants_ctx = getattr(self.policy, "wants_decode_contexts", False)
        return Snapshot(
            now_s=now, decode_bs=bs, decode_sum_reused=sum_reused, decode_max_reused=max_reused,
            active_prefill=act, paused_prefill=self.paused.state if self.paused else None, waiting=waiting,
            decode_host_ms=self.host_time.value_ms if self.host_time is not None else 0.0,
            decode_contexts=decode_contexts(decoding) if wants_ctx else None,
            chunked=chunked_view(getattr(sched, "chunked_req", None), now, self.arrival),
            fused_host_ms=self.fused_host_time.budget_ms if self.fused_host_time is not None else None,
            fused_rate_host_ms=self.fused_host_time.median_ms if self.fused_host_time is not None else None,
            start_host_ms=self.start_host_time.value_ms if self.start_host_time is not None else None,
            fused_streak=self.pending is not None,
            fused_start_host_ms=self.fused_start_host_time.value_ms if self.fused_start_host_time is not None
            else None,
        )

    def forget_gone(self) -> None:
        """Drop the arrival times of requests neither waiting nor in a prefill batch."""
        live = {r.rid for r in self.sched.waiting_queue}
        chunked = getattr(self.sched, "chunked_req", None)
        if chunked is not None:
            live.add(chunked.rid)
        for run in (self.active, self.paused):
            if run is not None:
                live.update(run.state.rids)
        self.arrival = {rid: t for rid, t in self.arrival.items() if rid in live}

    def apply_plan(self, plan: Plan, now: float, defer_start: bool = False) -> bool:
        """Carry out the plan's preemption or new prefill batch. ``defer_start``: a plain start (no
        preemption) is left to the caller, who forms the batch once the decode iteration is launched
        so that SGLang's batch formation overlaps the decode's GPU time; returns whether it did so."""
        if plan.preempt and self.active is not None and self.paused is None:
            # Its launched layers must finish first: the prefill attention backend's metadata
            # buffers are shared, and the new batch is about to rewrite them.
            for _, end, _, _ in self.active.inflight:
                end.synchronize()
            self.poll_prefill(now)
            if self.active is not None and not self.active.batch.split_prefill_finished:
                # The preempted batch keeps its KV and hidden state (ForwardBatch) and resumes later.
                self.paused, self.active = self.active, None
                self.paused.state.preempted_by_other = True
                if self.start_prefill(now, plan):
                    self.active.state.is_preemptor = True
                    if self.metrics:
                        self.metrics.on_preemption()
                else:  # nothing could be scheduled after all: resume at once
                    self.active, self.paused = self.paused, None
            elif self.active is None and self.paused is None:
                self.start_prefill(now, plan)
        elif plan.new_prefill_rids and self.active is None:
            if defer_start:
                return True
            self.start_prefill(now, plan)
        return False

    def start_prefill(self, now: float, plan: Plan) -> bool:
        """Start the batch the policy chose (``plan.new_prefill_rids``; it becomes `active`, its
        planned time ``plan.t_prefill_ms``); False if SGLang formed none. SGLang's own batch
        formation (prefix match, memory checks) does the work, restricted to the chosen requests
        so that its ordering cannot override ours."""
        from sglang.srt.model_executor.forward_batch_info import ForwardMode

        sched = self.sched
        with self.only_waiting(plan.new_prefill_rids or None):
            formed = sched.get_new_batch_prefill(sched.running_batch)
        sched.running_batch = formed.running_batch
        batch = formed.batch_to_run
        if not batch or batch.is_empty():
            return False
        batch.forward_mode = ForwardMode.SPLIT_PREFILL
        batch.split_index = 0
        batch.split_prefill_finished = False
        self.active = PrefillRun(batch=batch, state=prefill_state(batch, now, self.arrival), started_s=now,
                                 planned_ms=plan.t_prefill_ms)
        return True

    @contextlib.contextmanager
    def only_waiting(self, rids):
        """SGLang's batch formation sees only the chosen waiting requests (``rids``; None: all),
        so that its ordering cannot override ours; leftovers of the chosen (e.g. no memory) keep
        their place at the head afterwards."""
        sched = self.sched
        if rids is None:
            yield
            return
        chosen = set(rids)
        others = [r for r in sched.waiting_queue if r.rid not in chosen]
        sched.waiting_queue = [r for r in sched.waiting_queue if r.rid in chosen]
        try:
            yield
        finally:
            sched.waiting_queue = sched.waiting_queue + others

    def overlaps(self, plan: Plan, snap: Snapshot) -> bool:
        """Whether ``plan``, a decode alone, runs as SGLang's overlap loop runs a decode
        (`run_fused` with no chunk: the whole GPU, its result processed after the next launch):
        ``--mux-overlap-decode`` with the hybrid, requests decoding (``snap``'s; in a fused streak
        they are the batch in flight's, SGLang's running batch is empty) and no prefill anywhere
        (none to start, active, paused, or chunked by SGLang), as every TP rank sees alike."""
        return bool(self.args.overlap_decode and self.args.policy == "hybrid") and not plan.chunk \
            and not plan.new_prefill_rids and self.active is None and self.paused is None \
            and getattr(self.sched, "chunked_req", None) is None and snap.decode_bs > 0

    def may_defer_start(self, decoding: bool) -> bool:
        """Whether a new prefill batch may be formed after this iteration's decode launch: the flag is
        on, a decode runs (its GPU time is what the formation overlaps), and the last deferred start did
        not fail. The decode's partition was planned for a prefill that then could not start (no KV for
        the chosen requests), so until a start succeeds the batch is formed first again and decode gets
        the whole GPU while prefill waits, as without the flag."""
        return bool(self.args.defer_prefill_start) and decoding and not self.defer_failed

    def config_for(self, plan: Plan, has_decode: bool, has_prefill: bool) -> PartitionConfig:
        """The partition to run now: the plan's, or a full mode when only one phase has work."""
        if has_decode and has_prefill:
            cfg = plan.config
            if cfg.is_multiplexed and cfg in self.cfg_index:
                return cfg
            # (total, 0): decode alone while prefill is held; (0, total) cannot happen with a decode.
            return self.parts.full_decode if plan.prefill_layers == 0 else self.parts.configs[-1]
        return self.parts.full_decode if has_decode else self.parts.full_prefill

    def switch(self, cfg: PartitionConfig) -> tuple[torch.cuda.Stream, torch.cuda.Stream]:
        """Make `cfg` current and return its (prefill, decode) streams. New streams wait on the old
        ones' last work (GPU-side ordering, no host sync); SGLang's graph runner then replays the
        graph set captured for this partition."""
        sched = self.sched
        new = self.cfg_index[cfg]
        if new != self.idx:
            import torch
            from sglang.srt.multiplex import pdmux_context

            old_p, old_d = sched.stream_groups[self.idx]
            new_p, new_d = sched.stream_groups[new]
            for old, nw in ((old_p, new_p), (old_d, new_d)):
                if old is not nw:
                    ev = torch.cuda.Event()
                    ev.record(old)
                    nw.wait_event(ev)
            # Prefill and decode results are exchanged across the two roles too (merge, radix hits).
            ev = torch.cuda.Event()
            ev.record(old_d)
            new_p.wait_event(ev)
            self.idx = new
            pdmux_context.set_current_stream_idx(new)
            sched.tp_worker.model_runner.update_decode_attn_backend(new)
            if self.metrics:
                self.metrics.on_partition(cfg.decode_sms, cfg.prefill_sms)
        return sched.stream_groups[self.idx]

    # ---- fused ------------------------------------------------------------------------------

    def run_fused(self, it: Iteration) -> None:
        """A fused plan: SGLang's own mixed iteration on the whole GPU, as its overlap loop runs one
        with ``--enable-mixed-chunk``: form it (`form_fused`; the last fused batch joins the running
        batch), launch it on SGLang's forward stream between two timing events, and only then
        process the last fused iteration's result (`finish_fused`), so that forming, launching and
        processing overlap the GPU's work instead of adding to it (on an H100 ~4.5 ms of ~34 ms per
        1,000-token chunk, synchronously). This one stays ``pending`` until the next is launched or
        the streak ends (`drain_fused`). Its time is a token's gap: it goes to the TBT host budget,
        the estimator's served fused price and the timeline like a decode's."""
        import torch
        from sglang.srt.distributed.parallel_state import set_pdmux_status

        sched, clock, prev = self.sched, self.clock, self.pending
        it.cfg = self.parts.full_decode
        it.streams = self.switch(it.cfg)  # a decode alone in the streak replays the full GPU's graph
        fwd = sched.forward_stream
        if prev is None:  # a streak starts: after what the partitions' streams have queued
            for s in dict.fromkeys(it.streams):
                fwd.wait_stream(s)
        clock.lap("switch")
        set_pdmux_status(False)
        batch = self.form_fused(it.plan, prev, it.snap.decode_bs)
        clock.lap("fused_form")
        if batch is None:  # nothing could be formed (no KV for the chunk): try again next step
            self.drain_fused()
            self.last_decode_done = None
            clock.reset()
            sched.last_batch = None
            return
        rows = None if batch is sched.running_batch else fused_rows(batch)
        self.set_overlap(True)  # after forming: the first batch of a streak was formed with nothing in flight
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record(fwd)  # fires when the last fused batch is done: the gap includes any idle GPU
        result = sched.run_batch(batch)
        sched._apply_war_barrier()  # later formations' writes wait for this forward's reads, as in SGLang
        end.record(fwd)
        clock.lap("fused_launch")
        # Whether SGLang's prefill graph ran it, and whether the host waited for the GPU meanwhile:
        # an eager batch's ~30 ms of launches, or a sync, would outlast its GPU time.
        note = {"graph": getattr(result, "can_run_cuda_graph", None), "waited": end.query()} \
            if self.timeline else None
        # SGLang's record of what is in flight: its result is processed against the batch as launched
        sched.result_queue.append((batch.copy(), result))
        self.pending = FusedLaunch(batch, start, end, rows, it, note=note)
        sched.last_batch = batch
        if prev is not None:
            self.finish_fused(prev)

    def form_fused(self, plan: Plan, prev: FusedLaunch | None, decode_bs: int):
        """SGLang's next batch (``get_next_batch_to_run``: the last fused batch ``prev`` merged into
        the running batch, the chunked request's last chunk cached, a pending abort carried out, a
        new extend batch mixed with the running decodes) with its chunk budget set to the plan's
        chunk plus the ``decode_bs`` decode rows (the plan's Snapshot's; SGLang counts both) and
        mixing on, for this call only; waiting requests outside the chunk are not looked at.
        Returns the batch to run (the running batch itself when no chunk could be formed) or None."""
        sched = self.sched
        running = sched.running_batch
        chunked = getattr(sched, "chunked_req", None)
        tokens = sum(t for _, t in plan.chunk)
        rids = [rid for rid, _ in plan.chunk if chunked is None or rid != chunked.rid]
        saved = sched.chunked_prefill_size, sched.is_mixed_chunk
        sched.chunked_prefill_size, sched.is_mixed_chunk = tokens + decode_bs, True
        try:
            with self.only_waiting(rids):
                nxt = sched.get_next_batch_to_run(running, prev.live if prev is not None else None)
        finally:
            sched.chunked_prefill_size, sched.is_mixed_chunk = saved
        if prev is not None:
            prev.merged = True
        sched.running_batch = nxt.running_batch
        batch = nxt.batch_to_run
        return batch if batch is not None and not batch.is_empty() else None

    def finish_fused(self, f: FusedLaunch) -> None:
        """Process a fused iteration's result (SGLang waits for its tokens' copy) and book it;
        the prompts it finished leave ``arrival``."""
        sched = self.sched
        batch, result = sched.result_queue.popleft()
        sched.process_batch_result(batch, result)
        chunked = getattr(sched, "chunked_req", None)
        for r in batch.reqs:
            if r is not chunked:
                self.arrival.pop(r.rid, None)
        self.clock.lap("result")
        self.observe_fused(f.it, f.rows, f.start.elapsed_time(f.end), note=f.note)

    def drain_fused(self) -> None:
        """End a fused streak: process the last fused iteration's result, merge what goes on
        decoding into the running batch (as SGLang's next formation would), leave overlap mode,
        and order the partitions' streams after the forward stream. No-op without one."""
        f, self.pending = self.pending, None
        if f is None:
            return
        self.finish_fused(f)
        if f.rows is not None and not f.merged:
            self.merge_fused(f.live)
        self.set_overlap(False)
        sched = self.sched
        for s in dict.fromkeys(sched.stream_groups[self.idx]):
            s.wait_stream(sched.forward_stream)

    def set_overlap(self, on: bool) -> None:
        """SGLang's overlap mode on or off where 0.5.16 reads it at run time: ``run_batch`` (forward
        stream, future map) and the result processor (a row that finished one batch earlier is
        skipped); a batch takes it from ``get_new_batch_prefill`` (a mixed batch's decode rows'
        prefix lengths). pdmux starts SGLang with it off, so the buffers it keeps then are made
        here."""
        sched = self.sched
        if getattr(sched, "result_queue", None) is None:
            sched.result_queue = collections.deque()
        if bool(sched.enable_overlap) == on:
            return
        sched.enable_overlap = on
        # A frozen dataclass in 0.5.16, read at each result: set in place so every holder sees it.
        object.__setattr__(sched.batch_result_processor, "enable_overlap", on)
        if on and getattr(sched, "batch_record_buf", None) is None:
            sched.batch_record_buf, sched.batch_record_ct = [None] * 2, 0

    def merge_fused(self, batch) -> None:
        """After a fused streak's last result: its requests still decoding join the running batch,
        all but the chunked request (whose next chunk is still to run), as SGLang merges its last
        batch at the start of the next iteration."""
        sched = self.sched
        chunked = getattr(sched, "chunked_req", None)
        n = batch.batch_size()
        batch.filter_batch(chunked_req_to_exclude=[chunked] if chunked is not None else [])
        if batch.batch_size() < n and sched.running_batch is not None:
            sched.running_batch.batch_is_full = False
        self.join_running(batch)

    def join_running(self, batch) -> None:
        """A filtered batch's requests join SGLang's running batch (become it, if that is empty)."""
        sched = self.sched
        if batch.is_empty():
            return
        if sched.running_batch is None or sched.running_batch.is_empty():
            sched.running_batch = batch
        else:
            sched.running_batch.merge_batch(batch)

    def observe_fused(self, it: Iteration, rows, ms: float, note: dict | None = None) -> None:
        """Book a fused iteration of ``ms`` GPU time (``rows``: its extend rows, `fused_rows`; None
        for a decode alone): the TBT host budget (a fused iteration's own where there is one; the
        first of a streak, no fused batch in flight when it was planned, to its own; a decode alone
        to none, its host work overlapped), the estimator's served fused price, metrics, timeline
        (with ``note``: its launch); a decode alone also teaches the estimator its fixed cost."""
        done = time.perf_counter()
        host_ms = self.clock.take()
        fused = rows is not None
        if fused:
            self.book_host(it.plan, done, ms, fused=True, starts_streak=not it.snap.fused_streak)
        else:  # a decode alone: its host work overlapped the GPU's, unlike a synchronous decode's
            self.last_decode_done = done
        est, snap = self.estimator, it.snap
        dec = est.decode_rows(rows.contexts) if fused else None
        ratio = est.observe_fused(rows.pieces, ms, dec) if fused else None
        if not fused and snap.decode_bs > 0 and not est.learn_decode:
            # A table's serving fixed cost (at TP, the decode's all-reduces) is learned from decodes
            # alone on the whole GPU, and the hybrid runs every such decode here. A cold start keeps
            # learning its per-partition correction from the partitions' decodes only: one learned on
            # the whole GPU would set the unseen partitions' (`decode_correction`).
            est.observe_decode(it.cfg.decode_sms, snap.decode_bs, snap.decode_sum_reused, 0, 0, ms,
                               max_reused=snap.decode_max_reused)
        if self.metrics:
            self.metrics.on_decode(it.plan, ms, count_decision=False,
                                   fixed_cost_ms=None if fused else est.decode_offset_ms)
        if self.timeline:
            self.timeline.write(it.plan, now=it.now, decode_bs=it.snap.decode_bs, measured_decode_ms=ms,
                                **({} if fused else {"decode_offset_ms": round(est.decode_offset_ms, 4)}),
                                extend_tokens=rows.tokens if fused else 0,
                                fused_ratio=round(ratio, 4) if ratio is not None else None,
                                fused_price=est.fused_price.to_dict(est.fused_tokens(rows.pieces, dec) if fused else None),
                                decode_sms=it.cfg.decode_sms, prefill_sms=0, decode_host_ms=it.snap.decode_host_ms,
                                fused_host_ms=it.snap.fused_host_ms, fused_streak=it.snap.fused_streak,
                                fused_start_host_ms=it.snap.fused_start_host_ms, host_ms=host_ms,
                                os_ms=self.clock.last_os,
                                **({"launch": note} if note else {}))

    # ---- launch prefill ---------------------------------------------------------------------

    def launch_prefill_layers(self, run: PrefillRun, layers: int, prefill_sms: int) -> None:
        """Launch `layers` more layers of `run` (at least one, at most what remains) on the current
        prefill stream between two timing events (a new `Chunk`); the host's launch time goes to
        the estimator (what a short prefill really waits for) and the metrics."""
        import torch
        from sglang.srt.distributed.parallel_state import set_pdmux_status

        sched = self.sched
        batch = run.batch
        n_layers = sched.model_config.num_hidden_layers
        layers = max(1, min(layers, n_layers - batch.split_index))
        stream = sched.stream_groups[self.idx][0]
        with torch.cuda.stream(stream):
            set_pdmux_status(True)
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record(stream)
            batch.split_forward_count = layers
            if run.needs_reinit and batch.split_index > 0:
                # Another batch's prefill replaced the attention metadata while this one was paused.
                sched.tp_worker.model_runner.attn_backend.init_forward_metadata(batch.split_forward_batch)
                run.needs_reinit = False
            next_index = batch.split_index + layers
            first = batch.split_index == 0
            allocs = _device_allocs() if self.timeline and first else None
            t0 = time.perf_counter()
            result = sched.run_batch(batch)
            end.record(stream)
            host_ms = (time.perf_counter() - t0) * 1e3
            if self.timeline:
                self.launch_note = launch_note(layers, host_ms, first, end.query(), allocs)
            self.estimator.observe_prefill_launch(layers, host_ms)
            if self.metrics:
                self.metrics.on_prefill_launch(host_ms)
            batch.split_index = next_index
            if next_index >= n_layers:
                batch.split_prefill_finished = True
                run.result = result
            run.inflight.append(Chunk(start, end, layers, prefill_sms))
            set_pdmux_status(False)

    # ---- finish -----------------------------------------------------------------------------

    def observe_decode(self, it: Iteration, ms: float) -> None:
        """Book one finished decode iteration of `ms` GPU time: the loop's host time since the
        last decode (to the TBT budget), the estimator's online refinement, metrics, timeline."""
        clock, est, plan, cfg, snap, run = self.clock, self.estimator, it.plan, it.cfg, it.snap, it.prefill
        done = time.perf_counter()
        host_ms = clock.take()
        self.book_host(plan, done, ms)
        bs, sum_reused = snap.decode_bs, snap.decode_sum_reused
        co = run is not None and run.inflight and cfg.is_multiplexed
        p_new = sum(r.n for r in run.state.reqs) if co else 0
        p_reused = sum(r.r for r in run.state.reqs) if co else 0
        guard = guard_record(est, cfg.decode_sms, bs, sum_reused, p_new, p_reused) \
            if self.timeline and co and bs > 0 else None
        refined = bs > 0 and est.observe_decode(cfg.decode_sms, bs, sum_reused, p_new, p_reused, ms,
                                                max_reused=snap.decode_max_reused)
        if self.metrics:
            self.metrics.on_decode(plan, ms, count_decision=False, fixed_cost_ms=est.decode_offset_ms)
            if refined:
                self.metrics.on_guard_refinement()
        if self.timeline:
            # The estimate's inputs, so that a refitted table can be scored against
            # served iterations (bench.timeline_profile --table).
            self.timeline.write(plan, now=it.now, decode_bs=bs, measured_decode_ms=ms,
                                decode_sum_reused=sum_reused, decode_max_reused=snap.decode_max_reused,
                                prefill_new=p_new, prefill_reused=p_reused,
                                decode_offset_ms=round(est.decode_offset_ms, 4),
                                decode_sms=cfg.decode_sms, prefill_sms=cfg.prefill_sms,
                                decode_host_ms=snap.decode_host_ms, host_ms=host_ms, os_ms=clock.last_os,
                                **({"guard": guard} if guard else {}), **self.take_launch_note(),
                                **({"start_host_ms": round(snap.start_host_ms, 3)}
                                   if plan.new_prefill_rids and snap.start_host_ms is not None else {}),
                                **({"prefill_wall": round(est.prefill_wall.factor, 3)} if run is not None else {}))

    def take_launch_note(self) -> dict:
        """``{"launch": note}`` for the timeline row of the iteration that launched layers, once."""
        note, self.launch_note = self.launch_note, None
        return {"launch": note} if note else {}

    def book_host(self, plan: Plan, done: float, ms: float, fused: bool = False, starts_streak: bool = False) -> None:
        """An iteration of ``ms`` GPU time that gave decoding requests a token finished at ``done``
        (perf_counter): its wall time since the last such result goes to the TBT host budget, and,
        when its plan started a layer-wise batch, to the start's own (SGLang's batch formation and
        first launch). A ``fused`` iteration with prompt rows books its gap against its planned
        price to the fused budget where there is one (the first of a streak, ``starts_streak``, to
        its own where there is one): a host that outlasts the GPU shows as GPU time (kernels wait
        for their launches), so against ``ms`` the budget would not see it."""
        if self.last_decode_done is not None:
            wall = (done - self.last_decode_done) * 1e3
            if fused and starts_streak and self.fused_start_host_time is not None:
                self.fused_start_host_time.observe(wall, plan.t_decode_worst_ms)
            elif fused and self.fused_host_time is not None:
                self.fused_host_time.observe(wall, plan.t_decode_worst_ms)
            else:
                if self.host_time is not None:
                    self.host_time.observe(wall, ms)
                if self.start_host_time is not None and plan.new_prefill_rids:
                    self.start_host_time.observe(wall, ms)
        self.last_decode_done = done

    # ---- start-up ---------------------------------------------------------------------------

    def limit_prompts(self, free_bytes: int, total_bytes: int) -> None:
        """Keep prompts too long for one layer-wise prefill's activations (prefill_memory.py) out of
        one, rather than run out of memory mid-prefill, which kills every request in flight: the
        hybrid fuses them in chunks (its ``layerwise_max_tokens``); another policy refuses them
        (the Scheduler's ``max_req_input_len`` lowered). Called once the KV pool and the decode
        graphs are allocated: what is free then is what prefills have. Raises ValueError when not
        even one batch fits."""
        from sglang_mux import prefill_memory

        sched = self.sched
        per_token = prefill_memory.bytes_per_token_of(_model_config(sched))
        lim = prefill_memory.prompt_limit(
            free_bytes=free_bytes, total_bytes=total_bytes, per_token=per_token,
            max_input_len=sched.max_req_input_len, max_prefill_tokens=sched.max_prefill_tokens,
            mem_fraction=sched.server_args.mem_fraction_static)
        # Every TP rank takes the same branch (one policy) and the same limit: the smallest of any
        # rank (a prompt refused, or planned otherwise, on one rank alone would hang the others).
        if hasattr(self.policy, "layerwise_max_tokens"):
            self.policy.layerwise_max_tokens = self.consensus.min(lim.fits)
            logger.info("sglang_mux: %.1f GiB free for prefill activations: a prompt of more than %d new tokens "
                        "runs as fused chunks, never as one layer-wise prefill; the server accepts %d",
                        free_bytes / prefill_memory.GIB, self.policy.layerwise_max_tokens, sched.max_req_input_len)
            return
        if lim.message:
            logger.warning(lim.message)
        else:
            logger.info("sglang_mux: %.1f GiB free for prefill activations: one prefill holds %d prompt tokens, "
                        "the server accepts %d", free_bytes / prefill_memory.GIB, lim.fits, lim.max_input_len)
        sched.max_req_input_len = self.consensus.min(lim.max_input_len)


def _prefill_graph_tokens(sched: Scheduler) -> tuple[int, ...]:
    """The token counts SGLang captured its prefill CUDA graph at, ascending (empty: none, an
    extend batch runs eagerly)."""
    runner = getattr(getattr(sched, "tp_worker", None), "model_runner", None)
    graph = getattr(runner, "prefill_cuda_graph_runner", None)
    if graph is None or type(graph).__name__ == "EagerRunner":
        return ()
    return tuple(sorted(int(n) for n in getattr(graph, "capture_num_tokens", ())))


def launch_note(layers: int, host_ms: float, first: bool, waited: bool,
                allocs_before: tuple[int, int] | None) -> dict:
    """A layer-wise launch as the timeline records it: its layers and host ms, whether it was a
    batch's first (SGLang builds the ForwardBatch and attention metadata then), whether its layers
    had already run on the GPU when the launch returned (the host waited for the GPU inside it),
    and for a first launch the caching allocator's cudaMalloc / cudaFree calls during it."""
    note = {"layers": layers, "host_ms": round(host_ms, 2), "first": first, "waited": bool(waited)}
    if allocs_before is not None:
        after = _device_allocs()
        note["cuda_malloc"], note["cuda_free"] = after[0] - allocs_before[0], after[1] - allocs_before[1]
    return note


def _device_allocs() -> tuple[int, int]:
    """The caching allocator's cudaMalloc and cudaFree calls so far (a cudaFree waits for the GPU)."""
    import torch

    st = torch.cuda.memory_stats()
    return int(st.get("num_device_alloc", 0)), int(st.get("num_device_free", 0))


def _model_config(sched: Scheduler) -> str:
    return os.path.join(sched.server_args.model_path, "config.json")

