"""MuxWise's SLO-aware dispatcher (§3.4): spatial partitions only.

`MuxDispatcher.plan` applies five rules in order (docs/engine.md gives each one's reasons):
1. batch: the active prefill batch, else the paused (preempted) one, else a new batch formed FCFS
   from the queue head up to ``max_prefill_tokens`` / ``max_prefill_bs`` (`BasePolicy`);
2. partition (best-fit): decode gets the fewest SMs whose worst-case latency (solo x guard) meets
   the TBT SLO less the loop's host time (`Snapshot.decode_host_ms`), prefill the rest; a phase
   alone gets the whole GPU ("decode-only", "prefill-only");
3. N_PL = ceil(T_d * N_T / T_P) prefill layers per launch, clamped to [1, layers remaining];
4. preemption (switchable): a shorter new batch preempts the active one iff it would miss its
   TTFT deadline waiting and the active one still meets its own; one paused batch at most;
5. overload (no partition meets the TBT SLO): decode alone while prefill has TTFT slack, else
   prefill beside decode on the largest decode partition.
`Plan.reason` names the rule that fired ("preempt+" prefix when the plan preempts).
"""

from __future__ import annotations

from sglang_mux.partitions import PartitionConfig
from sglang_mux.policy.base import Batch, BasePolicy
from sglang_mux.policy.plan import (BEST_FIT, OVERLOAD_DECODE_FIRST, OVERLOAD_MAX_DECODE, PREEMPT_PREFIX, Plan,
                                    SpatialPlan)
from sglang_mux.policy.protocol import EstimatorLike
from sglang_mux.policy.slo import HOST_STALL_SHARE, SLO
from sglang_mux.policy.snapshot import Snapshot


class MuxDispatcher(BasePolicy):
    """The rules above. ``budget_starts``: a plan that starts a batch beside a decode budgets the
    decode for the SLO less ``snap.start_host_ms`` where that is the larger host time (the batch's
    formation and first launch land in that token's gap)."""

    def __init__(self, estimator: EstimatorLike, slo: SLO = SLO(), *, preemption: bool = True,
                 max_prefill_tokens: int = 16384, max_prefill_bs: int = 64, budget_starts: bool = False,
                 fcfs: bool = False):
        super().__init__(estimator, slo, max_prefill_tokens=max_prefill_tokens, max_prefill_bs=max_prefill_bs)
        self.preemption = bool(preemption)
        self.budget_starts = bool(budget_starts)
        self.fcfs = bool(fcfs)

    def queue_key(self, arrival_s: float, prompt_tokens: int) -> float | None:
        """Earliest TTFT deadline first (``fcfs``: None, arrival order): a short prompt goes
        ahead of long ones that have not started, whose deadlines (longer by the SLO's per-token
        term) come in their turn, so none waits forever; ties keep arrival order."""
        return None if self.fcfs else arrival_s + self.slo.ttft_ms_for(prompt_tokens) * 1e-3

    def _mux(self, snap: Snapshot, b: Batch, preempt: bool = False) -> Plan:
        bs, sr, mr = snap.decode_bs, snap.decode_sum_reused, snap.decode_max_reused
        worst = self.est.decode_worst_ms
        starts = self.budget_starts and b.new_rids and snap.start_host_ms is not None
        budget = self.tbt_budget_ms(snap, max(snap.decode_host_ms, snap.start_host_ms) if starts else None)
        t = 0.0
        for d in self.options:  # ascending: the first that meets the SLO is the best fit
            t = worst(d, bs, sr, b.new_tokens, b.reused_tokens, max_reused=mr)
            if t <= budget:
                return self._spatial(d, t, b, PREEMPT_PREFIX + BEST_FIT if preempt else BEST_FIT, preempt)
        # Overload: t is the worst case on the largest multiplexed decode partition.
        d = self.options[-1]
        t_p = self.est.prefill_ms(self.total - d, b.reqs)
        rem_ms = t_p * (self.layers - b.layers_done) / self.layers
        slack_ms = (b.deadline_s - snap.now_s) * 1e3 - rem_ms
        if slack_ms > self.slo.tbt_ms and not preempt:
            return self._decode_only(snap, OVERLOAD_DECODE_FIRST)  # new batch not started: no rids
        return SpatialPlan(partition=PartitionConfig(d, self.total - d), t_decode_worst_ms=t, t_prefill_ms=t_p,
                           prefill_layers=self._n_pl(t, t_p, b), new_prefill_rids=b.new_rids, preempt=preempt,
                           reason=PREEMPT_PREFIX + OVERLOAD_MAX_DECODE if preempt else OVERLOAD_MAX_DECODE)

    def tbt_budget_ms(self, snap: Snapshot, host_ms: float | None = None) -> float:
        """GPU time a decode iteration may take: the TBT SLO less the loop's host time
        (``host_ms``, default ``snap.decode_host_ms``), which never takes more than
        HOST_STALL_SHARE of it."""
        host = snap.decode_host_ms if host_ms is None else host_ms
        return self.slo.tbt_ms - min(max(host, 0.0), HOST_STALL_SHARE * self.slo.tbt_ms)

    def plan(self, snap: Snapshot) -> Plan:
        plan = super().plan(snap)
        if (self.preemption and plan.prefill_layers > 0 and not plan.new_prefill_rids
                and snap.active_prefill is not None and snap.paused_prefill is None
                and not snap.active_prefill.is_preemptor):
            alt = self._preempting_plan(snap, plan)
            if alt is not None:
                return alt
        return plan

    def _preempting_plan(self, snap: Snapshot, cur: Plan) -> Plan | None:
        ws = self._form(snap.waiting)
        if not ws:
            return None
        short = self._new_batch(ws)
        short.preemptable = False  # a preemptor cannot be preempted
        long = self._state_batch(snap.active_prefill)
        rem_long = cur.t_prefill_ms * (self.layers - long.layers_done) / self.layers
        t_short = self.est.prefill_ms(cur.prefill_sms, short.reqs)  # on the current prefill SMs
        if t_short >= rem_long:
            return None  # not a short batch: waiting is faster for everyone
        both_done_s = snap.now_s + (rem_long + t_short) * 1e-3
        if both_done_s <= short.deadline_s:
            return None  # the short batch meets its TTFT waiting
        if both_done_s > long.deadline_s:
            return None  # the long batch would miss its TTFT because of the delay
        if snap.decode_bs <= 0:
            return self._prefill_only(short, preempt=True)
        return self._mux(snap, short, preempt=True)
