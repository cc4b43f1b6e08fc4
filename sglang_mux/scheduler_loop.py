"""The multiplexed scheduler loop: SGLang 0.5.16's Scheduler driven by our policy (`MuxLoop`).

`init_mux` (patched in as `Scheduler.init_pdmux`) builds one MuxLoop; `mux_event_loop` (as
`Scheduler.event_loop_pdmux`) runs it. One iteration (`MuxLoop.step`), phase by phase:
  receive         new requests
  plan            poll the in-flight prefill's completion events (never block on them; a finished
                  prefill is processed and merged into the running decode batch), Snapshot ->
                  policy.plan, one Decision for every TP rank (tp_consensus) -> preemption / new
                  prefill batch (SGLang's own batch formation); then the partition switch: new
                  streams wait on the old ones' events
  (fused)         a fused plan instead runs SGLang's own mixed iteration on the whole GPU
                  (`loop_fused.FusedStreak`); the first other plan ends the streak and is made again
  launch_decode   one decode iteration (a CUDA graph captured on this partition's decode stream)
  launch_prefill  N_PL prefill layers on the prefill stream (`loop_layerwise.LayerwisePrefill`; at
                  most two chunks in flight, so a preemption or partition change takes effect
                  within about one decode iteration)
  finish          wait for the decode (its tokens are needed), process it, feed the measured
                  latency to the estimator, the metrics and the timeline
Each token's gap goes to the host-time budgets (`loop_budgets.TokenGaps`), each phase's host time
into the timeline row of its decode iteration (``host_ms``, loop_clock.py). Decisions live in
`sglang_mux.policy`, numbers in `sglang_mux.estimator`, the loop's records in loop_state.py; these
modules alone call the Scheduler and CUDA (torch and sglang are imported where used, so the loop
can be built and tested on the CPU with stand-ins).
"""

from __future__ import annotations

import logging
import os
import time
from typing import TYPE_CHECKING

from sglang_mux.loop_budgets import TokenGaps
from sglang_mux.loop_clock import LoopClock
from sglang_mux.loop_fused import FusedStreak
from sglang_mux.loop_layerwise import LayerwisePrefill
from sglang_mux.loop_state import (DecodeLaunch, Decision, Iteration, chunked_view, decode_contexts, decode_shape,
                                   decoding_view, guard_record, queue_note)
from sglang_mux.mux_args import MuxArgs
from sglang_mux.policy import HostBudgets, Plan, Policy, Snapshot, WaitingReq
from sglang_mux.tp_consensus import Consensus, PendingTp, SingleRank, TpConsensus, agree, before_group

if TYPE_CHECKING:
    import torch
    from sglang.srt.managers.scheduler import Scheduler

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
    """The multiplexed loop over one SGLang Scheduler (`sched`), and its state across iterations:
    the layer-wise prefill (``layerwise``), the fused streak (``fused``) and the token gaps'
    host-time budgets (``gaps``) are its components. The Scheduler attributes it uses are SGLang's;
    `build` also sets those SGLang's decode graph runner reads (stream_groups, sm_counts,
    real_sm_group_num, split_prefill_batch). Not thread-safe: the scheduler's thread only.
    """

    def __init__(self, sched: Scheduler, args: MuxArgs, parts: GreenPartitionSet, cfgs: list[PartitionConfig],
                 policy: Policy, estimator: Estimator, *, metrics: MuxMetrics | None = None,
                 timeline: TimelineWriter | None = None, budgets: HostBudgets | None = None,
                 clock: LoopClock | None = None, consensus: Consensus | None = None):
        """``cfgs``: the partitions in SGLang's stream-group order (index = stream index);
        ``budgets``: the host-time budgets kept (None: none, the policy is told 0 ms);
        ``consensus``: how TP ranks agree on each iteration (None: a single rank)."""
        self.sched = sched
        self.args = args
        self.parts = parts
        self.cfgs = cfgs
        self.cfg_index: dict[PartitionConfig, int] = {c: i for i, c in enumerate(cfgs)}
        self.policy = policy
        self.estimator = estimator
        self.metrics = metrics
        self.timeline = timeline
        self.gaps = TokenGaps(budgets if budgets is not None else HostBudgets())
        self.clock = clock if clock is not None else LoopClock(os_stats=False)
        self.consensus = consensus if consensus is not None else SingleRank()
        self.idx = 0  # the current stream group
        self.arrival: dict[str, float] = {}  # rid -> first time seen waiting (time.monotonic)
        self.queue_keys: dict[str, float] = {}  # rid -> its place in the queue (Policy.queue_key)
        self.layerwise = LayerwisePrefill(self)
        self.fused = FusedStreak(self)

    @classmethod
    def build(cls, sched: Scheduler) -> MuxLoop:
        """From the Scheduler being initialised and MuxArgs.from_env(): green-context partitions,
        their stream groups installed into SGLang, the estimator, policy, metrics and timeline.
        Raises MuxArgError / GreenContextError / TableError with what to do; a metrics problem
        only logs a warning (metrics must never stop serving)."""
        import torch
        from sglang.srt.multiplex import pdmux_context

        from sglang_mux.estimator import Estimator
        from sglang_mux.green_ctx import GreenPartitionSet, install_stream_groups
        from sglang_mux.mux_args import attention_backend
        from sglang_mux.policy import make_policy, policy_name
        from sglang_mux.probe import safe_probe
        from sglang_mux.tables import resolve_table, tables_root

        args = MuxArgs.from_env()
        backend = attention_backend(sched.server_args)
        gpu_id = getattr(sched, "gpu_id", None)
        if gpu_id is None:
            gpu_id = sched.ps.gpu_id
        parts = GreenPartitionSet(device_index=gpu_id, granularity=args.sm_granularity)
        args.check_gpu(parts.total_sms)  # the rest was checked at launch (launch_server)
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
        policy = make_policy(policy_name(args), estimator, args.slo, preemption=args.preemption,
                             fcfs=args.fcfs_prefill)
        consensus = before_group(sched)  # SGLang creates the TP group after this: run() joins it
        loop = cls(sched, args, parts, cfgs, policy, estimator, budgets=TokenGaps.for_server(args).budgets,
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
            self.fused.drain()  # its requests' tokens are still to be sent

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
            self.fused.run(it)
            return
        if not it.has_work:
            self.gaps.break_gap()
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
            self.layerwise.poll(now, retire=d.retired)
            self.clock.lap("poll")
            return d, self.snapshot(now), None
        retired = self.layerwise.poll(now)
        self.clock.lap("poll")
        snap = self.snapshot(now)
        t0 = time.perf_counter()
        plan = self.policy.plan(snap)
        decide_us = (time.perf_counter() - t0) * 1e6
        run = self.layerwise.active
        launch = run is None or sum(1 for ev in run.inflight if not ev[1].query()) < 2
        return self.consensus.share(Decision(retired, plan, launch)), snap, decide_us

    def plan(self, now: float) -> Iteration:
        """The iteration's Plan (`decide`), then its preemption or new prefill batch
        (`apply_plan`); a plain new batch may be left for after the decode launch
        (`Iteration.deferred`)."""
        sched = self.sched
        d, snap, decide_us = self.decide(now)
        overlapped = self.fused.overlaps(d.plan, snap)
        if self.fused.pending is not None and not d.plan.chunk and not overlapped:
            # The fused streak ends: its last batch's tokens and requests are needed (the running
            # batch catches up), and the plan is made again on that state.
            self.fused.drain()
            d, snap, decide_us = self.decide(now)
            overlapped = self.fused.overlaps(d.plan, snap)
        plan = d.plan
        deferred = False
        if not overlapped:  # a decode alone in overlap mode starts and preempts nothing
            decoding = sched.running_batch is not None and not sched.running_batch.is_empty()
            deferred = self.layerwise.apply(plan, now, defer_start=self.layerwise.may_defer_start(decoding))
            if self.layerwise.active is not None:
                self.layerwise.defer_failed = False
        self.clock.lap("plan")
        # in a fused streak the decoding requests are in the batch in flight, not the running batch
        has_decode = overlapped or (sched.running_batch is not None and not sched.running_batch.is_empty())
        has_prefill = self.layerwise.active is not None or deferred
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

        plan, cfg, lw = it.plan, it.cfg, self.layerwise
        if it.deferred:  # the decode is on the GPU: form the new prefill batch meanwhile
            lw.defer_failed = not lw.start(it.now, plan)
            if not lw.defer_failed:
                # Its inputs were just copied on this (non-mux) stream; the first layers follow at
                # once, where without deferring the decode launch stood in between.
                it.streams[0].wait_stream(torch.cuda.current_stream())
            self.clock.lap("prefill_start")
        run = it.prefill = lw.active
        # prefill_layers == 0 means the policy holds prefill back (overload: decode first).
        # it.launch_prefill: fewer than two chunks queued when decided (bounded preemption and
        # partition-switch latency), the leader's view on every TP rank.
        if run is not None and plan.prefill_layers > 0 and cfg.prefill_sms > 0 \
                and not run.batch.split_prefill_finished and it.launch_prefill:
            lw.launch(run, plan.prefill_layers, cfg.prefill_sms)
            if lw.launch_note is not None and it.decode is not None:  # the decode finished meanwhile?
                lw.launch_note["decode_done"] = it.decode.end.query()
            if self.timeline and it.decode is None:  # prefill-only steps are decisions too
                self.timeline.write(plan, now=it.now, decode_bs=0, decode_sms=cfg.decode_sms,
                                    prefill_sms=cfg.prefill_sms, **lw.take_launch_note(), **queue_note(it.snap))

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
            self.gaps.break_gap()  # no decode this step: the next gap is not a token's
            clock.reset()
        if d is None and it.has_prefill:
            time.sleep(0.0002)
        sched.last_batch = d.batch if d is not None else None

    # ---- plan inputs -----------------------------------------------------------------------------

    def snapshot(self, now: float) -> Snapshot:
        """The policy's input: decode batch shape, the head of the waiting queue (first-seen
        times kept in `arrival`), the active and paused prefill batches, the host-time budget."""
        sched, lw = self.sched, self.layerwise
        self.fused.unpark()
        decoding = decoding_view(sched.running_batch, self.fused.pending, getattr(sched, "chunked_req", None))
        bs, sum_reused, max_reused = decode_shape(decoding)
        if len(self.arrival) > 4 * WAITING_VIEW + len(sched.waiting_queue):
            self.forget_gone()  # requests aborted while waiting never reach a prefill batch
        self.order_queue(now)
        waiting = []
        for req in sched.waiting_queue[:WAITING_VIEW]:
            t = self.arrival.setdefault(req.rid, now)
            waiting.append(WaitingReq(rid=req.rid, arrival_s=t, n=len(req.origin_input_ids), r=0))
        act = lw.active.state if lw.active else None
        if act is not None:
            act.layers_done = lw.active.batch.split_index
        return Snapshot(
            now_s=now, decode_bs=bs, decode_sum_reused=sum_reused, decode_max_reused=max_reused,
            active_prefill=act, paused_prefill=lw.paused.state if lw.paused else None, waiting=waiting,
            decode_contexts=decode_contexts(decoding) if self.policy.wants_decode_contexts else None,
            chunked=chunked_view(getattr(sched, "chunked_req", None), now, self.arrival),
            parked=chunked_view(self.fused.parked, now, self.arrival),
            **self.gaps.budgets.view(fused_streak=self.fused.pending is not None))

    def order_queue(self, now: float) -> None:
        """SGLang's waiting queue in the policy's order (`Policy.queue_key`; stable, so ties and
        a None key keep arrival order). SGLang's fcfs batch formation keeps it, so the batch it
        forms from the chosen requests cuts the one the plan cut."""
        key, queue = self.policy.queue_key, self.sched.waiting_queue
        if len(queue) < 2 or key(now, 0) is None:
            return
        keys, arrival = self.queue_keys, self.arrival  # a request's key is fixed: computed once
        for r in queue:
            if r.rid not in keys:
                keys[r.rid] = key(arrival.setdefault(r.rid, now), len(r.origin_input_ids))
        queue.sort(key=lambda r: keys[r.rid])

    def forget_gone(self) -> None:
        """Drop the arrival times of requests neither waiting nor in a prefill batch."""
        live = {r.rid for r in self.sched.waiting_queue} | self.layerwise.live_rids()
        for r in (getattr(self.sched, "chunked_req", None), self.fused.parked):
            if r is not None:
                live.add(r.rid)
        self.arrival = {rid: t for rid, t in self.arrival.items() if rid in live}
        self.queue_keys = {rid: k for rid, k in self.queue_keys.items() if rid in live}

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

    # ---- finish ---------------------------------------------------------------------------------

    def join_running(self, batch) -> None:
        """A filtered batch's requests join SGLang's running batch (become it, if that is empty)."""
        sched = self.sched
        if batch.is_empty():
            return
        if sched.running_batch is None or sched.running_batch.is_empty():
            sched.running_batch = batch
        else:
            sched.running_batch.merge_batch(batch)

    def observe_decode(self, it: Iteration, ms: float) -> None:
        """Book one finished decode iteration of `ms` GPU time: the loop's host time since the
        last decode (to the TBT budget), the estimator's online refinement, metrics, timeline."""
        clock, est, plan, cfg, snap, run = self.clock, self.estimator, it.plan, it.cfg, it.snap, it.prefill
        done = time.perf_counter()
        host_ms = clock.take()
        self.gaps.book(plan, done, ms)
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
                                **({"guard": guard} if guard else {}), **self.layerwise.take_launch_note(),
                                **({"start_host_ms": round(snap.start_host_ms, 3)}
                                   if plan.new_prefill_rids and snap.start_host_ms is not None else {}),
                                **({"prefill_wall": round(est.prefill_wall.factor, 3)} if run is not None else {}),
                                **queue_note(snap))

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
        if self.policy.fuses_long_prompts:
            cap = self.args.layerwise_max_tokens  # 0: what memory holds
            self.policy.layerwise_max_tokens = self.consensus.min(min(lim.fits, cap) if cap else lim.fits)
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


def _model_config(sched: Scheduler) -> str:
    return os.path.join(sched.server_args.model_path, "config.json")

