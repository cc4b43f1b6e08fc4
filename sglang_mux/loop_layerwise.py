"""The scheduler loop's layer-wise prefill: a batch formed by SGLang, run a few layers at a time on
the prefill partition's stream, polled (never waited on), preempted and resumed.

`LayerwisePrefill` keeps the active batch and the paused (preempted) one of a `MuxLoop`; torch and
sglang are imported where used, so that it is built and tested on the CPU with stand-ins.
"""

from __future__ import annotations

import contextlib
import logging
import time

from sglang_mux.loop_state import Chunk, Loop, PrefillRun, prefill_state
from sglang_mux.policy import Plan

logger = logging.getLogger(__name__)


class LayerwisePrefill:
    """``active``: the batch whose layers are launched; ``paused``: a preempted batch, its KV and
    hidden state kept (at most one); ``defer_failed``: the last batch formed after a decode launch
    could not start; ``launch_note``: the last launch, for this iteration's timeline row."""

    def __init__(self, loop: Loop):
        self.loop = loop
        self.active: PrefillRun | None = None
        self.paused: PrefillRun | None = None
        self.defer_failed = False
        self.idle_unmeasurable = False  # elapsed_time across prefill streams failed once: stop trying
        self.launch_note: dict | None = None

    def poll(self, now: float, retire: int | None = None) -> int:
        """Query-based sync: retire the active batch's finished chunks (their GPU time to the
        estimator and metrics); a finished batch is processed by SGLang and joins the decode
        batch, and a paused batch resumes. ``retire``: that many chunks, waiting for any not
        finished yet (a TP follower applying the leader's count; all of them after a preemption's
        sync); None: as many as have finished (never blocks). Returns the chunks retired."""
        loop = self.loop
        sched, est, metrics = loop.sched, loop.estimator, loop.metrics
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
                ratio = est.observe_prefill(psms, run.state.reqs, ms * n_layers / layers)
            if metrics:
                # Prefill-stream idle time between two chunks of one batch: a bubble (or a hold
                # by the policy); a preempted batch's pause is not counted (last_end reset).
                idle = None
                if run.last_end is not None and not self.idle_unmeasurable:
                    try:  # metrics must never stop serving (e.g. events of two streams not comparable)
                        idle = max(0.0, run.last_end.elapsed_time(start))
                    except Exception as e:  # noqa: BLE001
                        logger.warning("sglang_mux: prefill idle time not measurable (%s); not counted", e)
                        self.idle_unmeasurable = True
                metrics.on_prefill_chunk(ms, idle, ratio)
                if psms:
                    metrics.on_prefill_correction(psms, est.prefill_correction(psms))
            run.last_end = end
        if run.batch.split_prefill_finished and not run.inflight:
            batch = run.batch
            if run.started_s is not None and not run.state.preempted_by_other:  # a pause is not its rate
                est.prefill_wall.observe(run.planned_ms, (now - run.started_s) * 1e3)
            sched.process_batch_result(batch, run.result)
            for r in batch.reqs:
                loop.arrival.pop(r.rid, None)
            # It joins the decode batch before this iteration's decode: the gap to its second token
            # stays one iteration (joining after the decode would double it).
            batch.filter_batch()
            loop.join_running(batch)
            self.active = None
            if self.paused is not None:  # resume the preempted batch where it stopped, KV kept
                self.active, self.paused = self.paused, None
                self.active.needs_reinit = True
                self.active.last_end = None  # its pause is the policy's choice, not a bubble
        return retire

    def apply(self, plan: Plan, now: float, defer_start: bool = False) -> bool:
        """Carry out the plan's preemption or new prefill batch. ``defer_start``: a plain start (no
        preemption) is left to the caller, who forms the batch once the decode iteration is launched
        so that SGLang's batch formation overlaps the decode's GPU time; returns whether it did so."""
        if plan.preempt and self.active is not None and self.paused is None:
            # Its launched layers must finish first: the prefill attention backend's metadata
            # buffers are shared, and the new batch is about to rewrite them.
            for _, end, _, _ in self.active.inflight:
                end.synchronize()
            self.poll(now)
            if self.active is not None and not self.active.batch.split_prefill_finished:
                # The preempted batch keeps its KV and hidden state (ForwardBatch) and resumes later.
                self.paused, self.active = self.active, None
                self.paused.state.preempted_by_other = True
                if self.start(now, plan):
                    self.active.state.is_preemptor = True
                    if self.loop.metrics:
                        self.loop.metrics.on_preemption()
                else:  # nothing could be scheduled after all: resume at once
                    self.active, self.paused = self.paused, None
            elif self.active is None and self.paused is None:
                self.start(now, plan)
        elif plan.new_prefill_rids and self.active is None:
            if defer_start:
                return True
            self.start(now, plan)
        return False

    def start(self, now: float, plan: Plan) -> bool:
        """Start the batch the policy chose (``plan.new_prefill_rids``; it becomes `active`, its
        planned time ``plan.t_prefill_ms``); False if SGLang formed none. SGLang's own batch
        formation (prefix match, memory checks) does the work, restricted to the chosen requests
        so that its ordering cannot override ours."""
        from sglang.srt.model_executor.forward_batch_info import ForwardMode

        sched = self.loop.sched
        with only_waiting(sched, plan.new_prefill_rids or None):
            formed = sched.get_new_batch_prefill(sched.running_batch)
        sched.running_batch = formed.running_batch
        batch = formed.batch_to_run
        if not batch or batch.is_empty():
            return False
        batch.forward_mode = ForwardMode.SPLIT_PREFILL
        batch.split_index = 0
        batch.split_prefill_finished = False
        self.active = PrefillRun(batch=batch, state=prefill_state(batch, now, self.loop.arrival), started_s=now,
                                 planned_ms=plan.t_prefill_ms)
        return True

    def may_defer_start(self, decoding: bool) -> bool:
        """Whether a new prefill batch may be formed after this iteration's decode launch: the flag is
        on, a decode runs (its GPU time is what the formation overlaps), and the last deferred start did
        not fail. The decode's partition was planned for a prefill that then could not start (no KV for
        the chosen requests), so until a start succeeds the batch is formed first again and decode gets
        the whole GPU while prefill waits, as without the flag."""
        return bool(self.loop.args.defer_prefill_start) and decoding and not self.defer_failed

    def launch(self, run: PrefillRun, layers: int, prefill_sms: int) -> None:
        """Launch `layers` more layers of `run` (at least one, at most what remains) on the current
        prefill stream between two timing events (a new `Chunk`); the host's launch time goes to
        the estimator (what a short prefill really waits for) and the metrics."""
        import torch
        from sglang.srt.distributed.parallel_state import set_pdmux_status

        loop = self.loop
        sched = loop.sched
        batch = run.batch
        n_layers = sched.model_config.num_hidden_layers
        layers = max(1, min(layers, n_layers - batch.split_index))
        stream = sched.stream_groups[loop.idx][0]
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
            allocs = _device_allocs() if loop.timeline and first else None
            t0 = time.perf_counter()
            result = sched.run_batch(batch)
            end.record(stream)
            host_ms = (time.perf_counter() - t0) * 1e3
            if loop.timeline:
                self.launch_note = launch_note(layers, host_ms, first, end.query(), allocs)
            loop.estimator.observe_prefill_launch(layers, host_ms)
            if loop.metrics:
                loop.metrics.on_prefill_launch(host_ms)
            batch.split_index = next_index
            if next_index >= n_layers:
                batch.split_prefill_finished = True
                run.result = result
            run.inflight.append(Chunk(start, end, layers, prefill_sms))
            set_pdmux_status(False)

    def take_launch_note(self) -> dict:
        """``{"launch": note}`` for the timeline row of the iteration that launched layers, once."""
        note, self.launch_note = self.launch_note, None
        return {"launch": note} if note else {}

    def live_rids(self) -> set[str]:
        """The requests of the active and the paused batch."""
        return {rid for run in (self.active, self.paused) if run is not None for rid in run.state.rids}


@contextlib.contextmanager
def only_waiting(sched, rids):
    """SGLang's batch formation sees only the chosen waiting requests (``rids``; None: all), in
    the plan's order, so that its ordering cannot override ours: a fused chunk's cut falls on the
    request the plan cut on every TP rank, whatever order a rank's own queue is in. Leftovers of
    the chosen (e.g. no memory) keep their place at the head afterwards."""
    if rids is None:
        yield
        return
    pos = {rid: i for i, rid in enumerate(rids)}
    others = [r for r in sched.waiting_queue if r.rid not in pos]
    sched.waiting_queue = sorted((r for r in sched.waiting_queue if r.rid in pos), key=lambda r: pos[r.rid])
    try:
        yield
    finally:
        sched.waiting_queue = sched.waiting_queue + others


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
