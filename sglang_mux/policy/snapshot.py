"""What a policy sees (`Snapshot`) and what a caller does with its plan's batch fields (`apply_plan`).

The scheduler loop builds a Snapshot from SGLang's queues every iteration; the simulator builds
it from its replayed state. Token counts are tokens, times ms unless named ``_s`` (seconds).
"""

from __future__ import annotations

import itertools
from dataclasses import KW_ONLY, dataclass
from typing import Sequence

from sglang_mux.latency_model.terms import PrefillReq
from sglang_mux.policy.plan import Plan


@dataclass(frozen=True)
class WaitingReq:
    rid: str
    arrival_s: float
    n: int  # new tokens
    r: int  # reused (cached) tokens


@dataclass
class PrefillBatchState:
    rids: list[str]
    reqs: list[PrefillReq]
    layers_done: int
    arrival_s: float  # earliest arrival in the batch
    preempted_by_other: bool = False  # it was preempted (its pause is not its rate)
    is_preemptor: bool = False  # it preempted another (cannot be preempted)

    @classmethod
    def from_waiting(cls, ws: Sequence[WaitingReq], *, is_preemptor: bool = False) -> "PrefillBatchState":
        return cls(rids=[w.rid for w in ws], reqs=[PrefillReq(w.n, w.r) for w in ws], layers_done=0,
                   arrival_s=min(w.arrival_s for w in ws), is_preemptor=is_preemptor)


@dataclass(frozen=True)
class Snapshot:
    now_s: float
    decode_bs: int
    decode_sum_reused: int  # sum over the decode batch of each request's context length
    _: KW_ONLY  # the fields below by name only (a positional call would shift them silently)
    decode_max_reused: int | None = None  # longest context in the decode batch (None: sum / bs)
    active_prefill: PrefillBatchState | None = None
    paused_prefill: PrefillBatchState | None = None  # preempted batch waiting to resume
    waiting: Sequence[WaitingReq] = ()  # in arrival order
    # Each decoding request's context (tokens), for pricing a fused iteration's decode rows; None:
    # one row of decode_max_reused and the rest of the sum spread evenly.
    decode_contexts: Sequence[int] | None = None
    # A request part-way through a fused prefill (SGLang's chunked request; not in ``waiting``):
    # n = its prompt tokens still to run, r = those done. Only a fused plan can continue it.
    chunked: WaitingReq | None = None
    # A chunked request parked (`FusedPlan.parks`) while another is chunked in its place: SGLang's
    # chunked request again once that one is done.
    parked: WaitingReq | None = None
    # The host time a token's gap pays beyond the GPU's, as `HostBudgets.view` fills it:
    # a decode iteration's (the TBT budget of a partition is the SLO less it);
    decode_host_ms: float = 0.0
    # a fused iteration's overrun of its price at the budget's quantile (None: decode_host_ms),
    # and at the median (its rate's time; None: fused_host_ms);
    fused_host_ms: float | None = None
    fused_rate_host_ms: float | None = None
    # a decode iteration that starts a layer-wise batch (SGLang's batch formation and the first
    # launch land in that token's gap; None: not told apart);
    start_host_ms: float | None = None
    # whether a fused batch is in flight (a fused plan continues its streak), and the first fused
    # iteration of a streak's own overrun (SGLang sets up a mixed batch then; None: not told apart).
    fused_streak: bool = False
    fused_start_host_ms: float | None = None


def decode_contexts(snap: Snapshot) -> list[int]:
    """The decode batch's contexts: ``snap.decode_contexts``, else one row of the longest
    (``decode_max_reused``) and the rest of ``decode_sum_reused`` spread evenly."""
    if snap.decode_contexts is not None:
        return [int(c) for c in snap.decode_contexts]
    bs, total = snap.decode_bs, snap.decode_sum_reused
    if bs <= 0:
        return []
    top = total // bs if snap.decode_max_reused is None else min(int(snap.decode_max_reused), total)
    rest, k = total - top, bs - 1
    return [top] + [rest // k + (1 if i < rest % k else 0) for i in range(k)] if k else [top]


def apply_plan(plan: Plan, active: PrefillBatchState | None, paused: PrefillBatchState | None,
               waiting: Sequence[WaitingReq]) -> tuple[PrefillBatchState | None, PrefillBatchState | None, int]:
    """What a caller does with a plan's batch fields -> (active, paused, n_taken).

    n_taken = how many requests to pop from the head of `waiting` (they form the new batch).
    Preempt: the active batch becomes the paused one (marked preempted_by_other) and the new
    batch (marked is_preemptor) becomes active. No new batch, no active, a paused one and
    prefill_layers > 0: the paused batch resumes where it stopped. Raises ValueError for a plan
    not made from this state.
    """
    k = len(plan.new_prefill_rids)
    if k:
        head = list(itertools.islice(waiting, k))
        if tuple(w.rid for w in head) != plan.new_prefill_rids:
            raise ValueError("Plan.new_prefill_rids is not the head of the waiting queue it was made from")
        new = PrefillBatchState.from_waiting(head, is_preemptor=plan.preempt)
        if plan.preempt:
            if active is None or paused is not None:
                raise ValueError("preempting plan needs an active batch and no paused one")
            active.preempted_by_other = True
            return new, active, k
        return new, paused, k
    if active is None and paused is not None and plan.prefill_layers > 0:
        return paused, None, 0
    return active, paused, 0
