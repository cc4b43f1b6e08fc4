"""The multiplexed scheduler loop: SGLang's Scheduler methods, driven by our policy.

One iteration:
  1. receive requests; poll the in-flight prefill's completion event (never block on it);
     a finished prefill is processed and merged into the running decode batch;
  2. form a new prefill batch with SGLang's own batch formation when the policy asks;
  3. ask the policy for a Plan (partition, N_PL prefill layers, preemption);
  4. switch partition if needed: the new streams wait on the old ones' events (no host sync);
  5. launch one decode iteration (a CUDA graph captured on this partition's decode stream);
  6. launch N_PL prefill layers on the prefill stream (at most two chunks in flight, so a
     preemption or partition change takes effect within about one decode iteration);
  7. wait for the decode iteration (its tokens are needed), process it, feed the measured
     latency back to the estimator.
Each phase's host time goes into the timeline row of its decode iteration (``host_ms``): a
token's gap is the decode's GPU time plus the host's between two decode results.
The glue is kept thin: the decisions live in dispatch.py, the numbers in estimator.py.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field

from sglang_mux.mux_args import MuxArgs

logger = logging.getLogger(__name__)
WAITING_VIEW = 64  # the policy looks at the head of the queue only (decision cost is bounded)


@dataclass
class _PrefillRun:
    batch: object  # ScheduleBatch in SPLIT_PREFILL mode
    state: object  # dispatch.PrefillBatchState
    inflight: list = field(default_factory=list)  # [(start_event, end_event, layers, prefill_sms)]
    result: object = None
    needs_reinit: bool = False  # resumed after preemption: attention metadata must be rebuilt
    last_end: object = None  # end event of the last retired chunk (None: first chunk, or resumed)


@dataclass
class MuxState:
    args: MuxArgs
    parts: object
    cfgs: list
    cfg_index: dict
    policy: object
    estimator: object
    metrics: object = None
    timeline: object = None
    idx: int = 0
    active: _PrefillRun | None = None
    paused: _PrefillRun | None = None
    arrival: dict = field(default_factory=dict)
    idle_unmeasurable: bool = False  # elapsed_time across prefill streams failed once: stop trying
    host_time: object = None  # dispatch.DecodeHostTime, None with --no-mux-tbt-host-budget
    last_decode_done: float | None = None  # perf_counter after the last decode's result (None: gap broken)
    clock: object = None  # loop_clock.LoopClock: host time per phase, into the timeline
    defer_failed: bool = False  # the last new prefill batch formed after a decode launch could not start


def _build_policy(args: MuxArgs, estimator):
    from sglang_mux import dispatch

    if args.policy == "fixed":
        return dispatch.FixedPolicy(estimator, args.fixed_decode_sms)
    if args.policy == "batch-size":
        return dispatch.BatchSizePolicy(estimator)
    return dispatch.MuxDispatcher(
        estimator, tbt_slo_ms=args.tbt_slo_ms, ttft_slo_ms=args.ttft_slo_ms, preemption=args.preemption,
        ttft_ms_per_token=args.ttft_ms_per_token,
    )


def init_mux(self):
    """Replaces SchedulerMultiplexMixin.init_pdmux (which reads a missing self.gpu_id)."""
    import torch
    from sglang.srt.multiplex import pdmux_context

    from sglang_mux.dispatch import DecodeHostTime
    from sglang_mux.estimator import Estimator
    from sglang_mux.green_ctx import GreenPartitionSet
    from sglang_mux.loop_clock import LoopClock
    from sglang_mux.mux_args import attention_backend
    from sglang_mux.patches import install_stream_groups
    from sglang_mux.probe import safe_probe
    from sglang_mux.tables import tables_root

    args = MuxArgs.from_env()
    backend = attention_backend(self.server_args)
    gpu_id = getattr(self, "gpu_id", None)
    if gpu_id is None:
        gpu_id = self.ps.gpu_id
    parts = GreenPartitionSet(device_index=gpu_id, granularity=args.sm_granularity)
    args.validate(parts.total_sms)
    cfgs = install_stream_groups(parts, self.server_args)
    self.stream_groups = pdmux_context.STREAM_GROUPS
    self.sm_counts = pdmux_context.SM_COUNTS
    self.real_sm_group_num = len(cfgs)
    self.split_prefill_batch = None

    model_config = _model_config(self)
    tables = None if args.contention_table == "auto" else args.contention_table
    estimator = Estimator.for_model(
        model_config,
        gpu_name=torch.cuda.get_device_name(gpu_id),
        total_sms=parts.total_sms,
        tables_root=tables_root(),
        attention_backend=backend,
        table_dir=tables,
        granularity=args.sm_granularity,
        probe=lambda: safe_probe(parts),
    )
    self._mux = MuxState(
        args=args, parts=parts, cfgs=cfgs, cfg_index={c: i for i, c in enumerate(cfgs)},
        policy=_build_policy(args, estimator), estimator=estimator,
        host_time=DecodeHostTime(quantile=args.tbt_host_quantile) if args.tbt_host_budget else None,
        clock=LoopClock(os_stats=bool(args.timeline)),
    )
    try:
        from sglang_mux import mux_metrics

        self._mux.metrics = mux_metrics.MuxMetrics()
        if args.timeline:
            self._mux.timeline = mux_metrics.TimelineWriter(args.timeline,
                                                            max_bytes=int(args.timeline_max_mb * 2**20))
    except Exception as e:  # metrics must never stop serving
        logger.warning("sglang_mux metrics disabled: %s", e)
    logger.info(
        "sglang_mux: %d partitions on %d SMs, attention backend %s, policy=%s, TBT SLO %.0f ms, TTFT SLO %.0f ms, "
        "estimator: %s", len(cfgs), parts.total_sms, backend, args.policy,
        args.tbt_slo_ms, args.ttft_slo_ms, estimator.source,
    )


def _model_config(self) -> str:
    return os.path.join(self.server_args.model_path, "config.json")


def _decode_shape(batch) -> tuple[int, int, int | None]:
    """(bs, Σ reused, longest reused) of the decode batch; the longest is None when the
    batch has no per-request list (the estimator then assumes a uniform batch)."""
    if batch is None or batch.is_empty():
        return 0, 0, None
    bs = batch.batch_size()
    s = getattr(batch, "seq_lens_sum", None)
    reqs = getattr(batch, "reqs", None)
    lens = [len(r.origin_input_ids) + len(r.output_ids) for r in reqs] if reqs else None
    if s is None:
        s = sum(lens) if lens is not None else 0
    # seq_lens count the token being decoded; the tables' sum_reused is the KV before it.
    mx = max(0, max(lens) - 1) if lens else None
    return bs, max(0, int(s) - bs), mx


def _prefill_state(batch, now: float, arrival: dict):
    from sglang_mux.dispatch import PrefillBatchState
    from sglang_mux.estimator import PrefillReq

    reqs, rids = [], []
    for r in batch.reqs:
        n_total = len(r.fill_ids) if getattr(r, "fill_ids", None) is not None else len(r.origin_input_ids)
        cached = len(r.prefix_indices) if getattr(r, "prefix_indices", None) is not None else 0
        reqs.append(PrefillReq(n=max(1, n_total - cached), r=cached))
        rids.append(r.rid)
    first = min((arrival.get(rid, now) for rid in rids), default=now)
    return PrefillBatchState(rids=rids, reqs=reqs, layers_done=0, arrival_s=first)


def _snapshot(self, now: float):
    from sglang_mux.dispatch import Snapshot, WaitingReq

    m = self._mux
    bs, sum_reused, max_reused = _decode_shape(self.running_batch)
    if len(m.arrival) > 4 * WAITING_VIEW + len(self.waiting_queue):
        _forget_gone(self)  # requests aborted while waiting never reach a prefill batch
    waiting = []
    for req in self.waiting_queue[:WAITING_VIEW]:
        t = m.arrival.setdefault(req.rid, now)
        waiting.append(WaitingReq(rid=req.rid, arrival_s=t, n=len(req.origin_input_ids), r=0))
    act = m.active.state if m.active else None
    if act is not None:
        act.layers_done = m.active.batch.split_index
    return Snapshot(
        now_s=now, decode_bs=bs, decode_sum_reused=sum_reused, decode_max_reused=max_reused, active_prefill=act,
        paused_prefill=m.paused.state if m.paused else None, waiting=waiting,
        decode_host_ms=m.host_time.value_ms if m.host_time is not None else 0.0,
    )


def _forget_gone(self) -> None:
    m = self._mux
    live = {r.rid for r in self.waiting_queue}
    for run in (m.active, m.paused):
        if run is not None:
            live.update(run.state.rids)
    m.arrival = {rid: t for rid, t in m.arrival.items() if rid in live}


def _switch(self, cfg) -> None:
    """Make `cfg` current. New streams wait on the old ones' last work (GPU-side ordering, no
    host sync); SGLang's graph runner then replays the graph set captured for this partition."""
    import torch
    from sglang.srt.multiplex import pdmux_context

    m = self._mux
    new = m.cfg_index[cfg]
    if new == m.idx:
        return
    old_p, old_d = self.stream_groups[m.idx]
    new_p, new_d = self.stream_groups[new]
    for old, nw in ((old_p, new_p), (old_d, new_d)):
        if old is not nw:
            ev = torch.cuda.Event()
            ev.record(old)
            nw.wait_event(ev)
    # Prefill and decode results are exchanged across the two roles too (merge, radix hits).
    ev = torch.cuda.Event()
    ev.record(old_d)
    new_p.wait_event(ev)
    m.idx = new
    pdmux_context.set_current_stream_idx(new)
    self.tp_worker.model_runner.update_decode_attn_backend(new)
    if m.metrics:
        m.metrics.on_partition(cfg.decode_sms, cfg.prefill_sms)


def _start_prefill(self, now: float, rids=()) -> bool:
    """Start the batch the policy chose. SGLang's own batch formation (prefix match, memory
    checks) does the work, restricted to the chosen requests so its ordering cannot override ours."""
    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    others = None
    if rids:
        chosen = set(rids)
        others = [r for r in self.waiting_queue if r.rid not in chosen]
        self.waiting_queue = [r for r in self.waiting_queue if r.rid in chosen]
    try:
        plan = self.get_new_batch_prefill(self.running_batch)
    finally:
        if others is not None:  # leftovers of the chosen (e.g. no memory) keep their place first
            self.waiting_queue = self.waiting_queue + others
    self.running_batch = plan.running_batch
    batch = plan.batch_to_run
    if not batch or batch.is_empty():
        return False
    batch.forward_mode = ForwardMode.SPLIT_PREFILL
    batch.split_index = 0
    batch.split_prefill_finished = False
    self._mux.active = _PrefillRun(batch=batch, state=_prefill_state(batch, now, self._mux.arrival))
    return True


def _launch_prefill_layers(self, run: _PrefillRun, layers: int, prefill_sms: int) -> None:
    import torch
    from sglang.srt.distributed.parallel_state import set_pdmux_status

    batch = run.batch
    n_layers = self.model_config.num_hidden_layers
    layers = max(1, min(layers, n_layers - batch.split_index))
    stream = self.stream_groups[self._mux.idx][0]
    with torch.cuda.stream(stream):
        set_pdmux_status(True)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record(stream)
        batch.split_forward_count = layers
        if run.needs_reinit and batch.split_index > 0:
            # Another batch's prefill replaced the attention metadata while this one was paused.
            self.tp_worker.model_runner.attn_backend.init_forward_metadata(batch.split_forward_batch)
            run.needs_reinit = False
        next_index = batch.split_index + layers
        t0 = time.perf_counter()
        result = self.run_batch(batch)
        end.record(stream)
        # The host's launch time: what a short prefill really waits for (estimator docstring).
        host_ms = (time.perf_counter() - t0) * 1e3
        self._mux.estimator.observe_prefill_launch(layers, host_ms)
        if self._mux.metrics:
            self._mux.metrics.on_prefill_launch(host_ms)
        batch.split_index = next_index
        if next_index >= n_layers:
            batch.split_prefill_finished = True
            run.result = result
        run.inflight.append((start, end, layers, prefill_sms))
        set_pdmux_status(False)


def _poll_prefill(self, now: float) -> None:
    """Query-based sync: retire finished chunks; merge a finished batch into decode."""
    m = self._mux
    run = m.active
    if run is None:
        return
    n_layers = self.model_config.num_hidden_layers
    while run.inflight and run.inflight[0][1].query():
        start, end, layers, psms = run.inflight.pop(0)
        ms = start.elapsed_time(end)
        ratio = None
        if psms and layers:
            ratio = m.estimator.observe_prefill(psms, run.state.reqs, ms * n_layers / layers)
        if m.metrics:
            # Prefill-stream idle time between two chunks of one batch: a bubble (or a hold
            # by the policy); a preempted batch's pause is not counted (last_end reset).
            idle = None
            if run.last_end is not None and not m.idle_unmeasurable:
                try:  # metrics must never stop serving (e.g. events of two streams not comparable)
                    idle = max(0.0, run.last_end.elapsed_time(start))
                except Exception as e:  # noqa: BLE001
                    logger.warning("sglang_mux: prefill idle time not measurable (%s); not counted", e)
                    m.idle_unmeasurable = True
            m.metrics.on_prefill_chunk(ms, idle, ratio)
            if psms:
                m.metrics.on_prefill_correction(psms, m.estimator.prefill_correction(psms))
        run.last_end = end
    if run.batch.split_prefill_finished and not run.inflight:
        batch = run.batch
        self.process_batch_result(batch, run.result)
        for r in batch.reqs:
            m.arrival.pop(r.rid, None)
        # It joins the decode batch before this iteration's decode: the gap to its second token
        # stays one iteration (joining after the decode doubled it, 37 -> 67 ms median:
        # bench/results/host_phases_h100_s18).
        batch.filter_batch()
        if not batch.is_empty():
            if self.running_batch is None or self.running_batch.is_empty():
                self.running_batch = batch
            else:
                self.running_batch.merge_batch(batch)
        m.active = None
        if m.paused is not None:  # resume the preempted batch where it stopped, KV kept
            m.active, m.paused = m.paused, None
            m.active.needs_reinit = True
            m.active.last_end = None  # its pause is the policy's choice, not a bubble


def _apply_plan(self, plan, now: float, defer_start: bool = False) -> bool:
    """Carry out the plan's preemption or new prefill batch. ``defer_start``: a plain start (no
    preemption) is left to the caller, who forms the batch once the decode iteration is launched
    so that SGLang's batch formation overlaps the decode's GPU time; returns whether it did so."""
    m = self._mux
    if plan.preempt and m.active is not None and m.paused is None:
        # Its launched layers must finish first: the prefill attention backend's metadata
        # buffers are shared, and the new batch is about to rewrite them.
        for _, end, _, _ in m.active.inflight:
            end.synchronize()
        _poll_prefill(self, now)
        if m.active is not None and not m.active.batch.split_prefill_finished:
            # The preempted batch keeps its KV and hidden state (ForwardBatch) and resumes later.
            m.paused, m.active = m.active, None
            m.paused.state.preempted_by_other = True
            if _start_prefill(self, now, plan.new_prefill_rids):
                m.active.state.is_preemptor = True
                if m.metrics:
                    m.metrics.on_preemption()
            else:  # nothing could be scheduled after all: resume at once
                m.active, m.paused = m.paused, None
        elif m.active is None and m.paused is None:
            _start_prefill(self, now, plan.new_prefill_rids)
    elif plan.new_prefill_rids and m.active is None:
        if defer_start:
            return True
        _start_prefill(self, now, plan.new_prefill_rids)
    return False


def _limit_prompts(self, free_bytes: int, total_bytes: int) -> None:
    """Refuse prompts too long for one prefill's activations (prefill_memory.py) rather than run
    out of memory mid-prefill, which kills every request in flight. Called once the KV pool and the
    decode graphs are allocated: what is free then is what prefills have."""
    from sglang_mux import prefill_memory

    per_token = prefill_memory.bytes_per_token_of(_model_config(self))
    lim = prefill_memory.prompt_limit(
        free_bytes=free_bytes, total_bytes=total_bytes, per_token=per_token,
        max_input_len=self.max_req_input_len, max_prefill_tokens=self.max_prefill_tokens,
        mem_fraction=self.server_args.mem_fraction_static)
    if lim.message:
        logger.warning(lim.message)
    else:
        logger.info("sglang_mux: %.1f GiB free for prefill activations: one prefill holds %d prompt tokens, "
                    "the server accepts %d", free_bytes / prefill_memory.GIB, lim.fits, lim.max_input_len)
    self.max_req_input_len = lim.max_input_len


def _may_defer_start(m: MuxState, decoding: bool) -> bool:
    """Whether a new prefill batch may be formed after this iteration's decode launch: the flag is
    on, a decode runs (its GPU time is what the formation overlaps), and the last deferred start did
    not fail. The decode's partition was planned for a prefill that then could not start (no KV for
    the chosen requests), so until a start succeeds the batch is formed first again and decode gets
    the whole GPU while prefill waits, as without the flag."""
    return bool(m.args.defer_prefill_start) and decoding and not m.defer_failed


def _config_for(m: MuxState, plan, has_decode: bool, has_prefill: bool):
    """The partition to run now: the plan's, or a full mode when only one phase has work."""
    if has_decode and has_prefill:
        cfg = plan.config
        if cfg.is_multiplexed and cfg in m.cfg_index:
            return cfg
        # (total, 0): decode alone while prefill is held; (0, total) cannot happen with a decode.
        return m.parts.full_decode if plan.prefill_layers == 0 else m.parts.configs[-1]
    return m.parts.full_decode if has_decode else m.parts.full_prefill


def guard_record(estimator, decode_sms: int, bs: int, sum_reused: int, p_new: int, p_reused: int) -> dict:
    """A co-run decode iteration's contention guard as planned and as the table has it (the
    timeline's ``guard``): their ratio is what online refinement has made of the table's."""
    q = (decode_sms, bs, sum_reused, p_new, p_reused)
    return {"in_use": round(estimator.guard_slowdown(*q), 4),
            "table": round(estimator.guard_slowdown(*q, profiled=True), 4)}


def mux_event_loop(self):
    """Replaces SchedulerMultiplexMixin.event_loop_pdmux."""
    import torch
    from sglang.srt.distributed.parallel_state import set_pdmux_status

    m = self._mux
    clock = m.clock
    clock.hook_gc()
    torch.cuda.empty_cache()
    _limit_prompts(self, *torch.cuda.mem_get_info())
    with torch.inference_mode():
        while True:
            if self.gracefully_exit:
                break
            clock.lap("book")  # the last iteration's accounting (estimator, metrics, timeline)
            now = time.monotonic()
            self.process_input_requests(self.request_receiver.recv_requests())
            clock.lap("recv")
            _poll_prefill(self, now)
            clock.lap("poll")

            snap = _snapshot(self, now)
            t0 = time.perf_counter()
            plan = m.policy.plan(snap)
            decide_us = (time.perf_counter() - t0) * 1e6
            decoding = self.running_batch is not None and not self.running_batch.is_empty()
            deferred = _apply_plan(self, plan, now, defer_start=_may_defer_start(m, decoding))
            if m.active is not None:
                m.defer_failed = False
            clock.lap("plan")

            has_decode = self.running_batch is not None and not self.running_batch.is_empty()
            has_prefill = m.active is not None or deferred
            if m.metrics:
                m.metrics.on_plan(plan, decide_us)
                m.metrics.on_memory(now=now)
            if not has_decode and not has_prefill:
                m.last_decode_done = None
                clock.reset()
                self.on_idle()
                continue
            cfg = _config_for(m, plan, has_decode, has_prefill)
            _switch(self, cfg)
            prefill_stream, decode_stream = self.stream_groups[m.idx]
            clock.lap("switch")

            decode_batch, d_start, d_end = None, None, None
            if has_decode:
                with torch.cuda.stream(decode_stream):
                    set_pdmux_status(False)
                    self.running_batch = self.update_running_batch(self.running_batch)
                    if not self.running_batch.is_empty():
                        decode_batch = self.running_batch
                        d_start = torch.cuda.Event(enable_timing=True)
                        d_end = torch.cuda.Event(enable_timing=True)
                        d_start.record(decode_stream)
                        decode_result = self.run_batch(decode_batch)
                        d_end.record(decode_stream)
            clock.lap("decode_launch")
            if deferred:  # the decode is on the GPU: form the new prefill batch meanwhile
                m.defer_failed = not _start_prefill(self, now, plan.new_prefill_rids)
                if not m.defer_failed:
                    # Its inputs were just copied on this (non-mux) stream; the first layers follow at
                    # once, where without deferring the decode launch stood in between.
                    prefill_stream.wait_stream(torch.cuda.current_stream())
                clock.lap("prefill_start")

            run = m.active
            # prefill_layers == 0 means the policy holds prefill back (overload: decode first).
            if run is not None and plan.prefill_layers > 0 and cfg.prefill_sms > 0 \
                    and not run.batch.split_prefill_finished:
                busy = sum(1 for ev in run.inflight if not ev[1].query())
                if busy < 2:  # at most two chunks queued: bounded preemption/switch latency
                    _launch_prefill_layers(self, run, plan.prefill_layers, cfg.prefill_sms)
                    if m.timeline and decode_batch is None:  # prefill-only steps are decisions too
                        m.timeline.write(plan, now=now, decode_bs=0, decode_sms=cfg.decode_sms,
                                         prefill_sms=cfg.prefill_sms)
            clock.lap("prefill_launch")

            if decode_batch is not None:
                with torch.cuda.stream(decode_stream):
                    decode_stream.synchronize()
                    clock.lap("sync")
                    self.process_batch_result(decode_batch, decode_result)
                clock.lap("result")
                ms = d_start.elapsed_time(d_end)
                done = time.perf_counter()
                host_ms = clock.take()
                if m.host_time is not None and m.last_decode_done is not None:
                    m.host_time.observe((done - m.last_decode_done) * 1e3, ms)
                m.last_decode_done = done
                bs, sum_reused = snap.decode_bs, snap.decode_sum_reused
                co = run is not None and run.inflight and cfg.is_multiplexed
                p_new = sum(r.n for r in run.state.reqs) if co else 0
                p_reused = sum(r.r for r in run.state.reqs) if co else 0
                guard = guard_record(m.estimator, cfg.decode_sms, bs, sum_reused, p_new, p_reused) \
                    if m.timeline and co and bs > 0 else None
                refined = bs > 0 and m.estimator.observe_decode(cfg.decode_sms, bs, sum_reused, p_new, p_reused, ms,
                                                                max_reused=snap.decode_max_reused)
                if m.metrics:
                    m.metrics.on_decode(plan, ms, count_decision=False, fixed_cost_ms=m.estimator.decode_offset_ms)
                    if refined:
                        m.metrics.on_guard_refinement()
                if m.timeline:
                    # The estimate's inputs, so that a refitted table can be scored against
                    # served iterations (bench.timeline_profile --table).
                    m.timeline.write(plan, now=now, decode_bs=bs, measured_decode_ms=ms,
                                     decode_sum_reused=sum_reused, decode_max_reused=snap.decode_max_reused,
                                     prefill_new=p_new, prefill_reused=p_reused,
                                     decode_offset_ms=round(m.estimator.decode_offset_ms, 4),
                                     decode_sms=cfg.decode_sms, prefill_sms=cfg.prefill_sms,
                                     decode_host_ms=snap.decode_host_ms, host_ms=host_ms, os_ms=clock.last_os,
                                     **({"guard": guard} if guard else {}))
            else:
                m.last_decode_done = None  # no decode this step: the next gap is not a token's
                clock.reset()
            if decode_batch is None and has_prefill:
                # Prefill alone: nothing else to launch until its event fires or a request comes.
                time.sleep(0.0002)
            self.last_batch = decode_batch
