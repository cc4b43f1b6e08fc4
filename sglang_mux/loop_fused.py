"""The scheduler loop's fused streaks: a fused plan runs SGLang's own mixed iteration on the whole
GPU (a prompt chunk and every decode row in one extend batch), launched before the last one's
result is processed, as SGLang's overlap loop runs its batches; a decode alone with no prefill
anywhere runs the same way and keeps the streak going.

`FusedStreak` keeps the fused iteration in flight of a `MuxLoop`; torch and sglang are imported
where used, so that it is built and tested on the CPU with stand-ins.
"""

from __future__ import annotations

import contextlib
import time

from sglang_mux.loop_layerwise import only_waiting
from sglang_mux.loop_state import FusedLaunch, Iteration, Loop, fused_rows, queue_note
from sglang_mux.policy import FusedPlan, Plan, Snapshot


@contextlib.contextmanager
def chunked_sits_out(sched, on: bool, parks: "FusedStreak | None" = None):
    """A yield (``on``): SGLang's new prefill batch is formed without its chunked request, which
    keeps its KV, its cached prefix and its rest for a later chunk. Only ``get_new_batch_prefill``
    runs without it: before that, ``get_next_batch_to_run`` caches its last chunk and keeps it out
    of the running batch as usual. A prompt of the batch cut into a second chunked request would
    break SGLang's one-at-a-time invariant (the caller's budget holds every prompt whole):
    RuntimeError. A park (``parks``, the streak that keeps it): the prompt the batch cuts becomes
    SGLang's chunked request and the old one waits in ``parks.parked`` (`FusedStreak.unpark` gives
    it back); if the batch cuts nobody after all (the head fit, or no KV for it) it stays SGLang's."""
    if not on:
        yield
        return
    held, form = sched.chunked_req, sched.get_new_batch_prefill

    def without_chunked(running_batch):
        sched.chunked_req = None
        try:
            out = form(running_batch)
        except BaseException:
            sched.chunked_req = held
            raise
        cut, sched.chunked_req = sched.chunked_req, held
        if cut is not None:
            if parks is None:
                raise RuntimeError(f"a yield cut {cut.rid} while {held.rid} is mid-prefill")
            sched.chunked_req, parks.parked = cut, held
        return out

    sched.get_new_batch_prefill = without_chunked  # this call only: the instance attribute goes after
    try:
        yield
    finally:
        del sched.get_new_batch_prefill


class FusedStreak:
    """``pending``: a fused iteration launched whose result is not processed yet (None: no streak);
    ``parked``: SGLang's chunked request parked for another (`chunked_sits_out`; None: none)."""

    def __init__(self, loop: Loop):
        self.loop = loop
        self.pending: FusedLaunch | None = None
        self.parked = None

    def unpark(self) -> None:
        """The parked request becomes SGLang's chunked request again once the one cut in its place
        is done (SGLang has no chunked request left): before the plan that sees it, so that its
        next chunk is the next fused batch's first piece."""
        sched = self.loop.sched
        if self.parked is not None and getattr(sched, "chunked_req", None) is None:
            sched.chunked_req, self.parked = self.parked, None

    def overlaps(self, plan: Plan, snap: Snapshot) -> bool:
        """Whether ``plan``, a decode alone, runs as SGLang's overlap loop runs a decode
        (`run` with no chunk: the whole GPU, its result processed after the next launch):
        ``--mux-overlap-decode`` with the hybrid, requests decoding (``snap``'s; in a fused streak
        they are the batch in flight's, SGLang's running batch is empty) and no prefill anywhere
        (none to start, active, paused, or chunked by SGLang), as every TP rank sees alike."""
        loop = self.loop
        return bool(loop.args.overlap_decode and loop.args.policy == "hybrid") and not plan.chunk \
            and not plan.new_prefill_rids and loop.layerwise.active is None and loop.layerwise.paused is None \
            and getattr(loop.sched, "chunked_req", None) is None and self.parked is None and snap.decode_bs > 0

    def run(self, it: Iteration) -> None:
        """A fused plan (or an overlapped decode alone): form SGLang's batch (`form`; the last fused
        batch joins the running batch), launch it on SGLang's forward stream between two timing
        events, and only then process the last fused iteration's result (`finish`), so that
        forming, launching and processing overlap the GPU's work instead of adding to it. This one
        stays ``pending`` until the next is launched or the streak ends (`drain`). Its time is a
        token's gap: it goes to the TBT host budget, the estimator's served fused price and the
        timeline like a decode's."""
        import torch
        from sglang.srt.distributed.parallel_state import set_pdmux_status

        loop = self.loop
        sched, clock, prev = loop.sched, loop.clock, self.pending
        it.cfg = loop.parts.full_decode
        it.streams = loop.switch(it.cfg)  # a decode alone in the streak replays the full GPU's graph
        fwd = sched.forward_stream
        if prev is None:  # a streak starts: after what the partitions' streams have queued
            for s in dict.fromkeys(it.streams):
                fwd.wait_stream(s)
        clock.lap("switch")
        set_pdmux_status(False)
        batch = self.form(it.plan, prev, it.snap.decode_bs)
        clock.lap("fused_form")
        if batch is None:  # nothing could be formed (no KV for the chunk): try again next step
            self.drain()
            loop.gaps.break_gap()
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
        # an eager batch's launches, or a sync, would outlast its GPU time.
        note = {"graph": getattr(result, "can_run_cuda_graph", None), "waited": end.query()} \
            if loop.timeline else None
        # SGLang's record of what is in flight: its result is processed against the batch as launched
        sched.result_queue.append((batch.copy(), result))
        self.pending = FusedLaunch(batch, start, end, rows, it, note=note)
        sched.last_batch = batch
        if prev is not None:
            self.finish(prev)

    def form(self, plan: Plan, prev: FusedLaunch | None, decode_bs: int):
        """SGLang's next batch (``get_next_batch_to_run``: the last fused batch ``prev`` merged into
        the running batch, the chunked request's last chunk cached, a pending abort carried out, a
        new extend batch mixed with the running decodes) with its chunk budget set to the plan's
        chunk plus the ``decode_bs`` decode rows (the plan's Snapshot's; SGLang counts both) and
        mixing on, for this call only; waiting requests outside the chunk are not looked at.
        Returns the batch to run (the running batch itself when no chunk could be formed) or None."""
        sched = self.loop.sched
        running = sched.running_batch
        chunked = getattr(sched, "chunked_req", None)
        tokens = sum(t for _, t in plan.chunk)
        rids = [rid for rid, _ in plan.chunk if chunked is None or rid != chunked.rid]
        yields = isinstance(plan, FusedPlan) and plan.yields and chunked is not None
        parks = isinstance(plan, FusedPlan) and plan.parks and chunked is not None and self.parked is None
        if yields:  # whole prompts: a budget of their whole length, so SGLang cuts none of them
            chosen = set(rids)
            tokens = sum(len(r.origin_input_ids) for r in sched.waiting_queue if r.rid in chosen)
        saved = sched.chunked_prefill_size, sched.is_mixed_chunk
        sched.chunked_prefill_size, sched.is_mixed_chunk = tokens + decode_bs, True
        try:
            with only_waiting(sched, rids), chunked_sits_out(sched, yields or parks, self if parks else None):
                nxt = sched.get_next_batch_to_run(running, prev.live if prev is not None else None)
        finally:
            sched.chunked_prefill_size, sched.is_mixed_chunk = saved
        if prev is not None:
            prev.merged = True
        sched.running_batch = nxt.running_batch
        batch = nxt.batch_to_run
        return batch if batch is not None and not batch.is_empty() else None

    def finish(self, f: FusedLaunch) -> None:
        """Process a fused iteration's result (SGLang waits for its tokens' copy) and book it;
        the prompts it finished leave the loop's ``arrival``."""
        loop = self.loop
        sched = loop.sched
        batch, result = sched.result_queue.popleft()
        sched.process_batch_result(batch, result)
        chunked = getattr(sched, "chunked_req", None)
        for r in batch.reqs:
            if r is not chunked:
                loop.arrival.pop(r.rid, None)
        loop.clock.lap("result")
        self.observe(f.it, f.rows, f.start.elapsed_time(f.end), note=f.note)

    def drain(self) -> None:
        """End a fused streak: process the last fused iteration's result, merge what goes on
        decoding into the running batch (as SGLang's next formation would), leave overlap mode,
        and order the partitions' streams after the forward stream. No-op without one."""
        f, self.pending = self.pending, None
        if f is None:
            return
        self.finish(f)
        if f.rows is not None and not f.merged:
            self.merge(f.live)
        self.set_overlap(False)
        sched = self.loop.sched
        for s in dict.fromkeys(sched.stream_groups[self.loop.idx]):
            s.wait_stream(sched.forward_stream)

    def set_overlap(self, on: bool) -> None:
        """SGLang's overlap mode on or off where 0.5.16 reads it at run time: ``run_batch`` (forward
        stream, future map) and the result processor (a row that finished one batch earlier is
        skipped); a batch takes it from ``get_new_batch_prefill`` (a mixed batch's decode rows'
        prefix lengths). pdmux starts SGLang with it off, so the buffers it keeps then are made
        here."""
        sched = self.loop.sched
        if getattr(sched, "result_queue", None) is None:
            import collections

            sched.result_queue = collections.deque()
        if bool(sched.enable_overlap) == on:
            return
        sched.enable_overlap = on
        # A frozen dataclass in 0.5.16, read at each result: set in place so every holder sees it.
        object.__setattr__(sched.batch_result_processor, "enable_overlap", on)
        if on and getattr(sched, "batch_record_buf", None) is None:
            sched.batch_record_buf, sched.batch_record_ct = [None] * 2, 0

    def merge(self, batch) -> None:
        """After a fused streak's last result: its requests still decoding join the running batch,
        all but the chunked request (whose next chunk is still to run), as SGLang merges its last
        batch at the start of the next iteration."""
        sched = self.loop.sched
        chunked = getattr(sched, "chunked_req", None)
        n = batch.batch_size()
        batch.filter_batch(chunked_req_to_exclude=[chunked] if chunked is not None else [])
        if batch.batch_size() < n and sched.running_batch is not None:
            sched.running_batch.batch_is_full = False
        self.loop.join_running(batch)

    def observe(self, it: Iteration, rows, ms: float, note: dict | None = None) -> None:
        """Book a fused iteration of ``ms`` GPU time (``rows``: its extend rows, `fused_rows`; None
        for a decode alone): the token's gap (a fused iteration's own budget; the first of a
        streak, no fused batch in flight when it was planned, to its own; a decode alone to none,
        its host work overlapped), the estimator's served fused price, metrics, timeline (with
        ``note``: its launch); a decode alone also teaches the estimator its fixed cost."""
        loop = self.loop
        done = time.perf_counter()
        host_ms = loop.clock.take()
        fused = rows is not None
        if fused:
            loop.gaps.book(it.plan, done, ms, fused=True, starts_streak=not it.snap.fused_streak)
        else:  # a decode alone: its host work overlapped the GPU's, unlike a synchronous decode's
            loop.gaps.mark(done)
        est, snap = loop.estimator, it.snap
        dec = est.decode_rows(rows.contexts) if fused else None
        ratio = est.observe_fused(rows.pieces, ms, dec) if fused else None
        if not fused and snap.decode_bs > 0 and not est.learn_decode:
            # A table's serving fixed cost (at TP, the decode's all-reduces) is learned from decodes
            # alone on the whole GPU, and the hybrid runs every such decode here. A cold start keeps
            # learning its per-partition correction from the partitions' decodes only: one learned on
            # the whole GPU would set the unseen partitions' (`decode_correction`).
            est.observe_decode(it.cfg.decode_sms, snap.decode_bs, snap.decode_sum_reused, 0, 0, ms,
                               max_reused=snap.decode_max_reused)
        if loop.metrics:
            loop.metrics.on_decode(it.plan, ms, count_decision=False,
                                   fixed_cost_ms=None if fused else est.decode_offset_ms)
        if loop.timeline:
            loop.timeline.write(it.plan, now=it.now, decode_bs=snap.decode_bs, measured_decode_ms=ms,
                                **({} if fused else {"decode_offset_ms": round(est.decode_offset_ms, 4)}),
                                extend_tokens=rows.tokens if fused else 0,
                                fused_ratio=round(ratio, 4) if ratio is not None else None,
                                fused_price=est.fused_price.to_dict(est.fused_tokens(rows.pieces, dec) if fused else None),
                                decode_sms=it.cfg.decode_sms, prefill_sms=0, decode_host_ms=snap.decode_host_ms,
                                fused_host_ms=snap.fused_host_ms, fused_streak=snap.fused_streak,
                                fused_start_host_ms=snap.fused_start_host_ms, host_ms=host_ms,
                                os_ms=loop.clock.last_os,
                                **({"launch": note} if note else {}), **queue_note(snap))
