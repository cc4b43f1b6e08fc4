"""What every policy shares: which prefill batch a decision is about (rule 1), the full-GPU
modes, and how many prefill layers to launch (rule 3, N_PL)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from sglang_mux.partitions import PartitionConfig
from sglang_mux.policy.plan import (DECODE_ONLY, IDLE, PREEMPT_PREFIX, PREFILL_ONLY, DecodePlan, Plan,
                                    SpatialPlan)
from sglang_mux.policy.protocol import EstimatorLike
from sglang_mux.policy.slo import SLO
from sglang_mux.policy.snapshot import PrefillBatchState, Snapshot, WaitingReq


def prefill_layers_for(t_decode_ms: float, t_prefill_ms: float, num_layers: int, layers_done: int) -> int:
    """N_PL = ceil(T_d * N_T / T_P), clamped to [1, layers remaining] (0 when none remain)."""
    rem = num_layers - layers_done
    if rem <= 0:
        return 0
    if t_prefill_ms <= 0.0:
        return rem
    # The epsilon keeps an exact product (e.g. 3.0000000001 from float noise) from rounding up.
    return max(1, min(rem, math.ceil(t_decode_ms * num_layers / t_prefill_ms - 1e-9)))


@dataclass
class Batch:
    """The prefill batch a decision is about (active, resumed or about to be formed)."""
    reqs: list  # PrefillReq, or WaitingReq (both have .n and .r: all the estimator reads)
    layers_done: int
    arrival_s: float
    new_rids: tuple = ()
    preemptable: bool = False  # may still be preempted later (affects the prefill-only quantum)
    new_tokens: int = 0
    reused_tokens: int = 0
    deadline_s: float = math.inf  # TTFT deadline of the batch's tightest request


class BasePolicy:
    """Batch choice, the full-GPU modes and the N_PL rule. ``max_prefill_tokens`` /
    ``max_prefill_bs``: a new batch's budget (its first request is always taken). Subclasses give
    `_mux`, the plan when both phases have work."""

    wants_decode_contexts = False
    fuses_long_prompts = False

    def __init__(self, estimator: EstimatorLike, slo: SLO = SLO(), *, max_prefill_tokens: int = 16384,
                 max_prefill_bs: int = 64):
        if max_prefill_tokens <= 0 or max_prefill_bs <= 0:
            raise ValueError("max_prefill_tokens and max_prefill_bs must be positive")
        self.est = estimator
        self.total = int(estimator.total_sms)
        self.options = sorted(int(d) for d in estimator.decode_sms_options)
        if not self.options:
            raise ValueError("estimator.decode_sms_options is empty")
        self.layers = int(estimator.num_layers)
        self.max_prefill_tokens = int(max_prefill_tokens)
        self.max_prefill_bs = int(max_prefill_bs)
        self.slo = slo
        self.preemption = False
        self.layerwise_max_tokens: int | None = None

    def queue_key(self, arrival_s: float, prompt_tokens: int) -> float | None:
        """The prefill queue's order: where a prompt that arrived at ``arrival_s`` goes (lower
        first). None: first come, first served. Called by the server loop and the simulator for
        every waiting prompt before a plan."""
        return None

    # ---- rule 1: which batch ------------------------------------------------------------
    def _form(self, waiting: Sequence[WaitingReq]) -> list[WaitingReq]:
        """FCFS head of the queue up to the token / batch-size budget (never skips ahead)."""
        out: list[WaitingReq] = []
        tok = 0
        for w in waiting:  # stops at the budget: O(batch), not O(queue)
            if out and (len(out) >= self.max_prefill_bs or tok + w.n > self.max_prefill_tokens):
                break
            out.append(w)
            tok += w.n
        return out

    def _new_batch(self, ws: list[WaitingReq]) -> Batch:
        # One pass, and the WaitingReqs themselves as the estimator's requests (they have .n
        # and .r): at a 64-request batch this is a third of a decision's CPU time.
        k = self.slo.ttft_ms_per_token * 1e-3
        new = reused = 0
        first = math.inf
        for w in ws:
            new += w.n
            reused += w.r
            d = w.arrival_s + k * (w.n + w.r)
            if d < first:
                first = d
        return Batch(reqs=ws, layers_done=0, arrival_s=ws[0].arrival_s,
                     new_rids=tuple(w.rid for w in ws), preemptable=self.preemption,
                     new_tokens=new, reused_tokens=reused, deadline_s=self.slo.ttft_ms * 1e-3 + first)

    def _state_batch(self, s: PrefillBatchState) -> Batch:
        shortest = min((q.n + q.r for q in s.reqs), default=0)
        return Batch(reqs=s.reqs, layers_done=s.layers_done, arrival_s=s.arrival_s,
                     preemptable=self.preemption and not s.is_preemptor,
                     new_tokens=sum(q.n for q in s.reqs), reused_tokens=sum(q.r for q in s.reqs),
                     deadline_s=s.arrival_s + self.slo.ttft_ms_for(shortest) * 1e-3)

    def _pick(self, snap: Snapshot) -> Batch | None:
        if snap.active_prefill is not None:  # even when all its layers are launched: it still runs
            return self._state_batch(snap.active_prefill)
        if snap.paused_prefill is not None:  # it arrived before anything still waiting
            return self._state_batch(snap.paused_prefill)
        ws = self._form(snap.waiting)
        return self._new_batch(ws) if ws else None

    # ---- shared plans -------------------------------------------------------------------
    def _n_pl(self, t_d: float, t_p: float, b: Batch) -> int:
        return prefill_layers_for(t_d, t_p, self.layers, b.layers_done)

    def _spatial(self, d: int, t_d: float, b: Batch, reason: str, preempt: bool = False) -> SpatialPlan:
        """Decode on ``d`` SMs (worst case ``t_d``), ``b`` on the rest, N_PL layers."""
        p = self.total - d
        t_p = self.est.prefill_ms(p, b.reqs)
        return SpatialPlan(partition=PartitionConfig(d, p), t_decode_worst_ms=t_d, t_prefill_ms=t_p,
                           prefill_layers=self._n_pl(t_d, t_p, b), new_prefill_rids=b.new_rids, preempt=preempt,
                           reason=reason)

    def _decode_only(self, snap: Snapshot, reason: str = DECODE_ONLY) -> DecodePlan:
        t = self.est.decode_worst_ms(self.total, snap.decode_bs, snap.decode_sum_reused, 0, 0,
                                     max_reused=snap.decode_max_reused)
        return DecodePlan(partition=PartitionConfig(self.total, 0), t_decode_worst_ms=t, reason=reason)

    def _prefill_only(self, b: Batch, preempt: bool = False) -> SpatialPlan:
        t_p = self.est.prefill_ms(self.total, b.reqs)
        rem = self.layers - b.layers_done
        # Preemptable: launch a TBT-long quantum so a short arrival is considered soon.
        n = self._n_pl(self.slo.tbt_ms, t_p, b) if b.preemptable else rem
        return SpatialPlan(partition=PartitionConfig(0, self.total), t_decode_worst_ms=0.0, t_prefill_ms=t_p,
                           prefill_layers=n, new_prefill_rids=b.new_rids, preempt=preempt,
                           reason=PREEMPT_PREFIX + PREFILL_ONLY if preempt else PREFILL_ONLY)

    def _mux(self, snap: Snapshot, b: Batch) -> Plan:  # both phases have work
        raise NotImplementedError

    def plan(self, snap: Snapshot) -> Plan:
        b = self._pick(snap)
        if b is None:
            if snap.decode_bs <= 0:
                return DecodePlan(partition=PartitionConfig(self.total, 0), reason=IDLE)
            return self._decode_only(snap)
        if snap.decode_bs <= 0:
            return self._prefill_only(b)
        return self._mux(snap, b)
