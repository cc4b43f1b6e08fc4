"""The scheduler loop's records and the pure functions on them (no torch, no sglang at run time).

`PrefillRun`: one layer-wise prefill batch in flight (its chunks' CUDA events, its result);
`DecodeLaunch`: one launched decode iteration; `FusedLaunch`: a fused iteration launched, its result
not yet processed; `Decision`: what every TP rank does this iteration (tp_consensus); `Iteration`:
what one loop iteration decided and launched, handed from phase to phase (scheduler_loop.MuxLoop).
`decoding_view`, `decode_shape`, `decode_contexts`, `prefill_state`, `chunked_view` and
`fused_rows` turn SGLang's batches and requests into the policy's and estimator's inputs;
`guard_record` is the timeline's view of the contention guard. Token counts are tokens, times ms
unless named `_s`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from sglang_mux.latency_model.terms import PrefillReq
from sglang_mux.policy import Plan, PrefillBatchState, Snapshot, WaitingReq

if TYPE_CHECKING:
    import torch
    from sglang.srt.managers.schedule_batch import Req, ScheduleBatch
    from sglang.srt.managers.utils import GenerationBatchResult

    from sglang_mux.estimator import Estimator
    from sglang_mux.partitions import PartitionConfig


class Loop(Protocol):
    """What a loop component (`loop_layerwise.LayerwisePrefill`, `loop_fused.FusedStreak`) reads
    of the `scheduler_loop.MuxLoop` that owns it."""
    sched: Any  # SGLang's Scheduler
    args: Any  # MuxArgs
    estimator: Estimator
    metrics: Any  # MuxMetrics or None
    timeline: Any  # TimelineWriter or None
    clock: Any  # LoopClock
    gaps: Any  # loop_budgets.TokenGaps
    layerwise: Any  # loop_layerwise.LayerwisePrefill
    parts: Any  # GreenPartitionSet
    idx: int  # the current stream group
    arrival: dict[str, float]  # rid -> first time seen waiting

    def switch(self, cfg: PartitionConfig) -> tuple: ...

    def join_running(self, batch) -> None: ...


class Chunk(NamedTuple):
    """Layers of one prefill batch launched together, between two timing events."""
    start: torch.cuda.Event
    end: torch.cuda.Event
    layers: int
    prefill_sms: int  # the prefill partition it ran on


@dataclass
class PrefillRun:
    """A prefill batch in SGLang's SPLIT_PREFILL mode, run a few layers at a time."""
    batch: ScheduleBatch
    state: PrefillBatchState  # what the policy sees of it
    inflight: list[Chunk] = field(default_factory=list)  # launched, not yet retired (oldest first)
    result: GenerationBatchResult | None = None  # the last layer's launch result
    needs_reinit: bool = False  # resumed after preemption: attention metadata must be rebuilt
    last_end: torch.cuda.Event | None = None  # end of the last retired chunk (None: first chunk, or resumed)
    started_s: float | None = None  # the loop's clock when the batch was formed
    planned_ms: float = 0.0  # the policy's T_P for it then (its partition at formation)


@dataclass
class DecodeLaunch:
    """One decode iteration on the GPU: its batch, SGLang's result handle, its timing events."""
    batch: ScheduleBatch
    result: GenerationBatchResult
    start: torch.cuda.Event
    end: torch.cuda.Event


@dataclass
class FusedLaunch:
    """A fused iteration on the GPU whose result is processed once the next one is launched (as
    SGLang's overlap loop runs its batches). The batch as launched and its result wait in SGLang's
    ``result_queue``."""
    live: ScheduleBatch  # the batch SGLang goes on with: merged into the running batch by the next formation
    start: torch.cuda.Event
    end: torch.cuda.Event
    rows: FusedRows | None  # its extend rows; None: the decode batch alone
    it: Iteration
    merged: bool = False  # a later formation has merged ``live`` into the running batch
    note: dict | None = None  # its launch, for the timeline (graph replayed, host waited)


class ReqsView(NamedTuple):
    """Requests seen as a decode batch (``decode_shape`` / ``decode_contexts`` read no more)."""
    reqs: list

    def batch_size(self) -> int:
        return len(self.reqs)

    def is_empty(self) -> bool:
        return not self.reqs


class Decision(NamedTuple):
    """What every TP rank does this iteration, as the leader decided it (tp_consensus)."""
    retired: int  # the active prefill's chunks retired before planning
    plan: Plan
    launch_prefill: bool  # fewer than two chunks queued: the plan's prefill layers may launch


@dataclass
class Iteration:
    """One loop iteration, from the plan phase on: its decision and what was launched."""
    now: float  # time.monotonic() at the iteration's start (arrival times, timeline rows)
    snap: Snapshot  # what the policy was shown
    plan: Plan
    deferred: bool  # a new prefill batch is to be formed after the decode launch
    has_decode: bool
    has_prefill: bool
    cfg: PartitionConfig | None = None  # the partition run (None: nothing to run)
    streams: tuple[torch.cuda.Stream, torch.cuda.Stream] | None = None  # cfg's (prefill, decode)
    decode: DecodeLaunch | None = None  # None: no decode this iteration
    prefill: PrefillRun | None = None  # the active prefill once the prefill launch phase ran
    launch_prefill: bool = True  # Decision.launch_prefill
    overlapped: bool = False  # a decode alone run as SGLang's overlap loop runs one (MuxLoop.overlaps)

    @property
    def has_work(self) -> bool:
        return self.has_decode or self.has_prefill


def decoding_view(running: ScheduleBatch | None, pending: FusedLaunch | None, chunked: Req | None):
    """The requests that decode next. While a fused batch is in flight (``pending``) SGLang has
    mixed the running batch into it, so they are its rows but the chunked request's and those
    already finished (a row finishing in it is known only when its result is processed)."""
    if pending is None or pending.rows is None or pending.merged:
        return running
    reqs = [r for r in pending.live.reqs if r is not chunked and not _finished(r)]
    if running is not None and not running.is_empty() and running is not pending.live:
        reqs = list(running.reqs) + reqs
    return ReqsView(reqs)


def _finished(req) -> bool:
    f = getattr(req, "finished", None)
    return bool(f()) if callable(f) else False


def decode_shape(batch: ScheduleBatch | None) -> tuple[int, int, int | None]:
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


def decode_contexts(batch: ScheduleBatch | None) -> list[int]:
    """Each decoding request's KV context before its next token (a fused iteration's decode rows)."""
    if batch is None or batch.is_empty():
        return []
    return [max(0, len(r.origin_input_ids) + len(r.output_ids) - 1) for r in batch.reqs]


def chunked_view(req: Req | None, now: float, arrival: dict[str, float]) -> WaitingReq | None:
    """The policy's view of SGLang's chunked request (a prompt part-way through fused chunks):
    n = prompt tokens not yet run, r = those run (``extend_range.end``: through its last chunk)."""
    if req is None:
        return None
    rng = getattr(req, "extend_range", None)
    done = int(rng.end) if rng is not None else len(req.prefix_indices)
    total = len(req.origin_input_ids)
    return WaitingReq(rid=req.rid, arrival_s=arrival.get(req.rid, now), n=max(1, total - done), r=done)


class FusedRows(NamedTuple):
    """A fused batch's extend rows as the estimator prices them: its prompt pieces, and the
    contexts of its one-token rows (the decode rows; a one-token piece is priced as one), summed
    by ``Estimator.decode_rows`` rather than made into hundreds of ``PrefillReq``."""
    pieces: list
    contexts: list

    @property
    def tokens(self) -> int:
        return sum(p.n for p in self.pieces) + len(self.contexts)


def fused_rows(batch: ScheduleBatch) -> FusedRows:
    """An extend batch's rows (new tokens, cached context) per row, the decode rows of a mixed
    batch included (SGLang's ``extend_lens`` / ``prefix_lens``)."""
    pieces, contexts = [], []
    for n, r in zip(batch.extend_lens, batch.prefix_lens):
        if n == 1:
            contexts.append(int(r))
        else:
            pieces.append(PrefillReq(int(n), int(r)))
    return FusedRows(pieces, contexts)


def prefill_state(batch: ScheduleBatch, now: float, arrival: dict[str, float]) -> PrefillBatchState:
    """The policy's view of a new prefill batch: new and cached tokens per request, and the
    earliest arrival among them (`now` for a request never seen waiting)."""
    reqs, rids = [], []
    for r in batch.reqs:
        n_total = len(r.fill_ids) if getattr(r, "fill_ids", None) is not None else len(r.origin_input_ids)
        cached = len(r.prefix_indices) if getattr(r, "prefix_indices", None) is not None else 0
        reqs.append(PrefillReq(n=max(1, n_total - cached), r=cached))
        rids.append(r.rid)
    first = min((arrival.get(rid, now) for rid in rids), default=now)
    return PrefillBatchState(rids=rids, reqs=reqs, layers_done=0, arrival_s=first)


def queue_note(snap: Snapshot) -> dict:
    """What the policy saw waiting, for the iteration's timeline row: how many requests it was
    shown, the head's [prompt tokens, ms waited] and the chunked and parked requests' [tokens
    left, ms since it arrived] (each left out when absent), so that a prompt that waited past its
    TTFT deadline can be told apart from one the policy never saw."""
    note: dict = {}
    if snap.waiting:
        head = snap.waiting[0]
        note["waiting"] = len(snap.waiting)
        note["head"] = [head.n, round((snap.now_s - head.arrival_s) * 1e3, 1)]
    for name, req in (("chunked", snap.chunked), ("parked", snap.parked)):
        if req is not None:
            note[name] = [req.n, round((snap.now_s - req.arrival_s) * 1e3, 1)]
    return note


def guard_record(estimator: Estimator, decode_sms: int, bs: int, sum_reused: int, p_new: int,
                 p_reused: int) -> dict[str, float]:
    """A co-run decode iteration's contention guard as planned and as the table has it (the
    timeline's ``guard``): their ratio is what online refinement has made of the table's."""
    q = (decode_sms, bs, sum_reused, p_new, p_reused)
    return {"in_use": round(estimator.guard_slowdown(*q), 4),
            "table": round(estimator.guard_slowdown(*q, profiled=True), 4)}
