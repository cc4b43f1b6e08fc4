"""SLO-aware dispatcher (MuxWise §3.4): one scheduling decision, `Snapshot` -> `Plan`.

Plain Python, no torch. Called by the scheduler loop every iteration, and by the simulator.
`MuxDispatcher.plan` applies five rules in order (docs/engine.md gives each one's reasons):
1. batch: the active prefill batch, else the paused (preempted) one, else a new batch formed FCFS
   from the queue head up to `max_prefill_tokens` / `max_prefill_bs` (the first one always taken);
2. partition (best-fit): decode gets the fewest SMs whose worst-case latency (solo x guard) meets
   the TBT SLO less the loop's host time (`Snapshot.decode_host_ms`), prefill the rest; a phase
   alone gets the whole GPU ("decode-only", "prefill-only");
3. N_PL = ceil(T_d * N_T / T_P) prefill layers per launch, clamped to [1, layers remaining];
4. preemption (switchable): a shorter new batch preempts the active one iff it would miss its
   TTFT deadline waiting and the active one still meets its own; one paused batch at most;
5. overload (no partition meets the TBT SLO): decode alone while prefill has TTFT slack, else
   prefill beside decode on the largest decode partition.
`HybridPolicy` adds a third kind of plan, the fused iteration (SGLang's mixed chunk on the whole
GPU), chosen per iteration against the dispatcher's spatial plan (its docstring is the rule).
`Plan.reason` names the rule that fired ("preempt+" prefix when the plan preempts), `Plan.kind`
the plan's kind. `BatchSizePolicy` and `FixedPolicy` share rules 1 and 3; `make_policy` builds
any policy by name, `policy_name` names the server's. Times in ms (`_s`: seconds).

CLI: ``python -m sglang_mux.dispatch plan --table DIR --decode-bs 64 --decode-reused 4096
[--decode-max-reused 32768] --prefill-new 8192 --prefill-reused 0 [--policy hybrid]`` prints the
plan as JSON.
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
import sys
from dataclasses import KW_ONLY, dataclass, replace
from typing import Mapping, Protocol, Sequence

from sglang_mux.partitions import PartitionConfig

from sglang_mux.estimator import PrefillReq, fused_iteration_ms

# Plan.reason values (the metrics label decisions by these).
IDLE = "idle"
DECODE_ONLY = "decode-only"
PREFILL_ONLY = "prefill-only"
BEST_FIT = "best-fit"
OVERLOAD_DECODE_FIRST = "overload-decode-first"
OVERLOAD_MAX_DECODE = "overload-max-decode"
FIXED = "fixed"
BATCH_SIZE = "batch-size"
PREEMPT_PREFIX = "preempt+"
FUSED = "fused"

# Plan.kind values.
KIND_DECODE = "decode"  # decode alone (or nothing)
KIND_FUSED = "fused"  # one mixed extend batch on the whole GPU: a prompt chunk and the decode rows
KIND_SPATIAL = "spatial"  # layer-wise prefill of whole prompts on its SMs (all of them when alone)
CHUNK_SIZES = (256, 512, 1024, 2048, 4096)  # fused chunk sizes the hybrid policy prices (tokens)
# Above this the hybrid prices only CHUNK_SIZES. The prefill graph's 256-token steps beyond 1,024
# would change the TBT-50 batches on which the served cells were measured level, and the
# simulator split on them: the capped conversation at TBT 50 lost 4.8 req/s, chat-1k gained.
FINE_SIZES_UP_TO = 1024
# A fused candidate's commitment (HybridPolicy.commitment) prices a cut prompt's rest in at most
# this many spans, each at the largest chunk that meets the budget there: a 100K-token rest in
# ~300-token chunks walked chunk by chunk took ~300 prices (~17 ms of a decision on the host).
COMMIT_SPANS = 4
# A host time over this share of the TBT SLO is a stall, not a cost to plan for: a TBT budget never
# books more, and a fused budget's quantile leaves such overruns out (DecodeHostTime's stall_ms).
HOST_STALL_SHARE = 0.5


class EstimatorLike(Protocol):
    num_layers: int
    total_sms: int
    decode_sms_options: list[int]

    def prefill_ms(self, prefill_sms: int, reqs: Sequence[PrefillReq]) -> float: ...
    def decode_solo_ms(self, decode_sms: int, bs: int, sum_reused: int,
                       max_reused: int | None = None) -> float: ...
    def decode_worst_ms(self, decode_sms: int, bs: int, sum_reused: int,
                        prefill_new: int, prefill_reused: int, max_reused: int | None = None) -> float: ...


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
    preempted_by_other: bool = False  # it was preempted (cannot be preempted again)
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
    # Host time the loop adds to every decode iteration (a token's gap = GPU time + this): the
    # TBT budget of a partition choice is the SLO minus it (DecodeHostTime measures it).
    decode_host_ms: float = 0.0
    # Each decoding request's context (tokens), for pricing a fused iteration's decode rows; None:
    # one row of decode_max_reused and the rest of the sum spread evenly.
    decode_contexts: Sequence[int] | None = None
    # A request part-way through a fused prefill (SGLang's chunked request; not in ``waiting``):
    # n = its prompt tokens still to run, r = those done. Only a fused plan can continue it.
    chunked: WaitingReq | None = None
    # Time a fused iteration's gap adds to its price (its own DecodeHostTime over wall time less
    # the planned price, at --mux-fused-host-quantile: forming, launching and finishing SGLang's batch
    # where the host outlasts the GPU, and the price's error; DecodeHostTime.budget_ms); None:
    # decode_host_ms (also while fewer than 3 fused iterations are seen).
    fused_host_ms: float | None = None
    # What a fused iteration's gap adds to its price at the median (its rate's time: the P99 is a
    # budget's, not a throughput's); None: fused_host_ms.
    fused_rate_host_ms: float | None = None
    # Host time a decode iteration that starts a layer-wise batch adds (its own DecodeHostTime:
    # SGLang's batch formation and the batch's first launch land in that token's gap); None: unknown.
    start_host_ms: float | None = None
    # A fused batch is in flight: a fused plan continues its streak. The first fused iteration after
    # any other kind pays SGLang's set-up of a mixed batch in its gap (served: its launch 11-18 ms
    # against 6-10 within a streak), so it is budgeted apart: ``fused_start_host_ms``, that
    # iteration's own overrun at the same quantile (None: not told apart).
    fused_streak: bool = False
    fused_start_host_ms: float | None = None


@dataclass(frozen=True)
class Plan:
    decode_sms: int
    prefill_sms: int
    t_decode_worst_ms: float  # T_d on decode_sms (0 when no decode)
    t_prefill_ms: float  # T_P: solo ms of the WHOLE prefill batch on prefill_sms (0 when none)
    prefill_layers: int  # N_PL to launch now (0 = none)
    new_prefill_rids: tuple[str, ...]  # start these (a prefix of Snapshot.waiting) as a new batch
    preempt: bool  # the new batch preempts the active one (which becomes the paused one)
    reason: str
    # Fused plans only: ((rid, prompt tokens), ...) run this iteration in one extend batch with the
    # decode rows, a prefix of Snapshot.waiting, each from where its request's prompt stands.
    chunk: tuple[tuple[str, int], ...] = ()

    @property
    def kind(self) -> str:
        """KIND_FUSED with a chunk, KIND_SPATIAL when prefill layers run on prefill SMs, else
        KIND_DECODE (decode alone, a held prefill, or idle)."""
        if self.chunk:
            return KIND_FUSED
        return KIND_SPATIAL if self.prefill_layers > 0 and self.prefill_sms > 0 else KIND_DECODE

    @property
    def config(self) -> PartitionConfig:
        return PartitionConfig(self.decode_sms, self.prefill_sms)

    def to_dict(self) -> dict:
        return {"decode_sms": self.decode_sms, "prefill_sms": self.prefill_sms,
                "t_decode_worst_ms": self.t_decode_worst_ms, "t_prefill_ms": self.t_prefill_ms,
                "prefill_layers": self.prefill_layers, "new_prefill_rids": list(self.new_prefill_rids),
                "preempt": self.preempt, "reason": self.reason, "kind": self.kind,
                "chunk": [list(c) for c in self.chunk]}


class DecodeHostTime:
    """The host time between decode iterations that a token's gap pays on top of the GPU's:
    the ``quantile`` of the last ``window`` observations (wall time between two consecutive
    decode completions minus the later one's GPU time, measured or planned as the caller
    observes it). A high quantile, as the SLO is a P99; recomputed every ``refresh``
    observations to keep the loop's cost flat. ``stall_ms``: gaps over it are stalls that no plan
    avoids (a smaller chunk does not shorten a host stall), so the quantile is taken over the rest
    while the rest is most of the window; more often than that, they are the host's pace. The
    median counts them all (they cost time). ``ready``: enough observations that the quantile is
    not the largest one seen; ``budget_ms``: what a policy books, before that too."""

    def __init__(self, window: int = 256, quantile: float = 0.9, refresh: int = 32,
                 stall_ms: float | None = None):
        if window <= 0 or refresh <= 0 or not 0.0 <= quantile <= 1.0:
            raise ValueError("window and refresh must be positive and quantile in [0, 1]")
        if stall_ms is not None and not stall_ms > 0.0:
            raise ValueError(f"stall_ms must be > 0 ms or None, got {stall_ms}")
        self.window, self.quantile, self.refresh = int(window), float(quantile), int(refresh)
        self.stall_ms = stall_ms
        self._gaps: list[float] = []
        self._seen = 0
        self.value_ms = 0.0
        self.median_ms = 0.0  # the same window's median (what an iteration adds on the median)
        self.resolved_ms = 0.0  # the quantile, or (too few seen) the highest rank with two above it

    def observe(self, wall_ms: float, gpu_ms: float) -> None:
        if not (wall_ms >= 0.0 and gpu_ms >= 0.0):
            return
        self._gaps.append(max(0.0, wall_ms - gpu_ms))
        if len(self._gaps) > self.window:
            del self._gaps[0]
        self._seen += 1
        if self._seen % self.refresh == 0 or self._seen <= self.refresh:
            g = sorted(self._gaps)
            self.median_ms = g[len(g) // 2]
            if self.stall_ms is not None:
                k = bisect.bisect_right(g, self.stall_ms)
                if k > len(g) // 2:
                    g = g[:k]
            i = int(self.quantile * len(g))
            self.value_ms = g[min(len(g) - 1, i)]
            self.resolved_ms = g[max(0, min(i, len(g) - 3))]

    @property
    def ready(self) -> bool:
        """Whether the window holds 2 / (1 - quantile) observations (200 for a P99): below that the
        quantile is the window's maximum. Served, a fused budget taken from the largest of 97
        overruns (13.6 ms at TBT 30) fitted no chunk again, so no fused iteration came to lower it."""
        return self.quantile < 1.0 and len(self._gaps) >= min(self.window, 2.0 / (1.0 - self.quantile))

    @property
    def budget_ms(self) -> float | None:
        """``value_ms`` once ``ready``; before, from 3 observations on, ``resolved_ms``: the
        quantile's rank or, where that is among the two largest, the rank below them. None with
        fewer (the policy then books the decode's host time). Neither extreme works. The largest of
        97 overruns (13.6 ms at TBT 30) fitted no chunk again. The decode's host time, 0 ms beside
        overlapped decodes, let the first 200 fused iterations fill the SLO: the simulator then
        failed code at 20 req/s, TBT 50, on P99 TBT 51.4 ms (49.9 with this rule)."""
        if self.ready:
            return self.value_ms
        return self.resolved_ms if len(self._gaps) >= 3 else None


class Policy(Protocol):
    def plan(self, snap: Snapshot) -> Plan: ...


def fused_ms(est, pieces: Sequence[PrefillReq], decode_contexts) -> float:
    """A fused iteration's GPU time (ms): ``est.fused_ms`` where the estimator has it (the decode
    contexts as a list, or summed by its ``decode_rows``), else the same price from its
    ``prefill_ms`` on the whole GPU (pieces plus one-token decode rows)."""
    f = getattr(est, "fused_ms", None)
    return f(pieces, decode_contexts) if f is not None else fused_iteration_ms(est, pieces, decode_contexts)


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


def prefill_layers_for(t_decode_ms: float, t_prefill_ms: float, num_layers: int, layers_done: int) -> int:
    """N_PL = ceil(T_d * N_T / T_P), clamped to [1, layers remaining] (0 when none remain)."""
    rem = num_layers - layers_done
    if rem <= 0:
        return 0
    if t_prefill_ms <= 0.0:
        return rem
    # The epsilon keeps an exact product (e.g. 3.0000000001 from float noise) from rounding up.
    return max(1, min(rem, math.ceil(t_decode_ms * num_layers / t_prefill_ms - 1e-9)))


def apply_plan(plan: Plan, active: PrefillBatchState | None, paused: PrefillBatchState | None,
               waiting: Sequence[WaitingReq]) -> tuple[PrefillBatchState | None, PrefillBatchState | None, int]:
    """What a scheduler loop does with a Plan's batch fields -> (active, paused, n_taken).

    n_taken = how many requests to pop from the head of `waiting` (they form the new batch).
    Preempt: the active batch becomes the paused one (marked preempted_by_other) and the new
    batch (marked is_preemptor) becomes active. No new batch, no active, a paused one and
    prefill_layers > 0: the paused batch resumes where it stopped.
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


@dataclass
class _Batch:
    """The prefill batch a decision is about (active, resumed or about to be formed)."""
    reqs: list  # PrefillReq, or WaitingReq (both have .n and .r: all the estimator reads)
    layers_done: int
    arrival_s: float
    new_rids: tuple = ()
    preemptable: bool = False  # may still be preempted later (affects the prefill-only quantum)
    new_tokens: int = 0
    reused_tokens: int = 0
    deadline_s: float = math.inf  # TTFT deadline of the batch's tightest request


class _BasePolicy:
    """Batch choice, the full-GPU modes and the N_PL rule, shared by all policies."""

    def __init__(self, estimator: EstimatorLike, *, max_prefill_tokens: int = 16384,
                 max_prefill_bs: int = 64, tbt_slo_ms: float = 50.0, ttft_slo_ms: float = 5000.0,
                 ttft_ms_per_token: float = 0.0):
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
        self.tbt_slo_ms = float(tbt_slo_ms)
        self.ttft_slo_ms = float(ttft_slo_ms)
        self.ttft_ms_per_token = float(ttft_ms_per_token)
        self.preemption = False

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

    def ttft_slo_ms_for(self, prompt_tokens: int) -> float:
        return self.ttft_slo_ms + self.ttft_ms_per_token * prompt_tokens

    def _new_batch(self, ws: list[WaitingReq]) -> _Batch:
        # One pass, and the WaitingReqs themselves as the estimator's requests (they have .n
        # and .r): at a 64-request batch this is a third of a decision's CPU time.
        k = self.ttft_ms_per_token * 1e-3
        new = reused = 0
        first = math.inf
        for w in ws:
            new += w.n
            reused += w.r
            d = w.arrival_s + k * (w.n + w.r)
            if d < first:
                first = d
        return _Batch(reqs=ws, layers_done=0, arrival_s=ws[0].arrival_s,
                      new_rids=tuple(w.rid for w in ws), preemptable=self.preemption,
                      new_tokens=new, reused_tokens=reused, deadline_s=self.ttft_slo_ms * 1e-3 + first)

    def _state_batch(self, s: PrefillBatchState) -> _Batch:
        shortest = min((q.n + q.r for q in s.reqs), default=0)
        return _Batch(reqs=s.reqs, layers_done=s.layers_done, arrival_s=s.arrival_s,
                      preemptable=self.preemption and not (s.is_preemptor or s.preempted_by_other),
                      new_tokens=sum(q.n for q in s.reqs), reused_tokens=sum(q.r for q in s.reqs),
                      deadline_s=s.arrival_s + self.ttft_slo_ms_for(shortest) * 1e-3)

    def _pick(self, snap: Snapshot) -> _Batch | None:
        if snap.active_prefill is not None:  # even when all its layers are launched: it still runs
            return self._state_batch(snap.active_prefill)
        if snap.paused_prefill is not None:  # it arrived before anything still waiting
            return self._state_batch(snap.paused_prefill)
        ws = self._form(snap.waiting)
        return self._new_batch(ws) if ws else None

    # ---- shared plans -------------------------------------------------------------------
    def _n_pl(self, t_d: float, t_p: float, b: _Batch) -> int:
        return prefill_layers_for(t_d, t_p, self.layers, b.layers_done)

    def _plan(self, d: int, t_d: float, b: _Batch, reason: str, preempt: bool = False) -> Plan:
        p = self.total - d
        t_p = self.est.prefill_ms(p, b.reqs)
        return Plan(d, p, t_d, t_p, self._n_pl(t_d, t_p, b), b.new_rids, preempt, reason)

    def _decode_only(self, snap: Snapshot, reason: str = DECODE_ONLY) -> Plan:
        t = self.est.decode_worst_ms(self.total, snap.decode_bs, snap.decode_sum_reused, 0, 0,
                                     max_reused=snap.decode_max_reused)
        return Plan(self.total, 0, t, 0.0, 0, (), False, reason)

    def _prefill_only(self, b: _Batch, preempt: bool = False) -> Plan:
        t_p = self.est.prefill_ms(self.total, b.reqs)
        rem = self.layers - b.layers_done
        # Preemptable: launch a TBT-long quantum so a short arrival is considered soon.
        n = self._n_pl(self.tbt_slo_ms, t_p, b) if b.preemptable else rem
        reason = PREEMPT_PREFIX + PREFILL_ONLY if preempt else PREFILL_ONLY
        return Plan(0, self.total, 0.0, t_p, n, b.new_rids, preempt, reason)

    def _mux(self, snap: Snapshot, b: _Batch) -> Plan:  # both phases have work
        raise NotImplementedError

    def plan(self, snap: Snapshot) -> Plan:
        b = self._pick(snap)
        if b is None:
            if snap.decode_bs <= 0:
                return Plan(self.total, 0, 0.0, 0.0, 0, (), False, IDLE)
            return self._decode_only(snap)
        if snap.decode_bs <= 0:
            return self._prefill_only(b)
        return self._mux(snap, b)


class MuxDispatcher(_BasePolicy):
    """MuxWise's SLO-aware dispatching policy (see the module docstring for the rules)."""

    def __init__(self, estimator: EstimatorLike, tbt_slo_ms: float = 50.0, ttft_slo_ms: float = 5000.0,
                 preemption: bool = True, max_prefill_tokens: int = 16384, max_prefill_bs: int = 64,
                 ttft_ms_per_token: float = 0.0, budget_starts: bool = False):
        """``budget_starts``: a plan that starts a batch beside a decode budgets the decode for the
        SLO less ``snap.start_host_ms`` where that is the larger host time (the batch's formation
        and first launch land in that token's gap)."""
        super().__init__(estimator, max_prefill_tokens=max_prefill_tokens, max_prefill_bs=max_prefill_bs,
                         tbt_slo_ms=tbt_slo_ms, ttft_slo_ms=ttft_slo_ms, ttft_ms_per_token=ttft_ms_per_token)
        if tbt_slo_ms <= 0 or ttft_slo_ms <= 0 or ttft_ms_per_token < 0:
            raise ValueError("SLOs must be positive")
        self.preemption = bool(preemption)
        self.budget_starts = bool(budget_starts)

    def _mux(self, snap: Snapshot, b: _Batch, preempt: bool = False) -> Plan:
        bs, sr, mr = snap.decode_bs, snap.decode_sum_reused, snap.decode_max_reused
        worst = self.est.decode_worst_ms
        starts = self.budget_starts and b.new_rids and snap.start_host_ms is not None
        budget = self.tbt_budget_ms(snap, max(snap.decode_host_ms, snap.start_host_ms) if starts else None)
        t = 0.0
        for d in self.options:  # ascending: the first that meets the SLO is the best fit
            t = worst(d, bs, sr, b.new_tokens, b.reused_tokens, max_reused=mr)
            if t <= budget:
                return self._plan(d, t, b, PREEMPT_PREFIX + BEST_FIT if preempt else BEST_FIT, preempt)
        # Overload: t is the worst case on the largest multiplexed decode partition.
        d = self.options[-1]
        t_p = self.est.prefill_ms(self.total - d, b.reqs)
        rem_ms = t_p * (self.layers - b.layers_done) / self.layers
        slack_ms = (b.deadline_s - snap.now_s) * 1e3 - rem_ms
        if slack_ms > self.tbt_slo_ms and not preempt:
            return self._decode_only(snap, OVERLOAD_DECODE_FIRST)  # new batch not started: no rids
        reason = PREEMPT_PREFIX + OVERLOAD_MAX_DECODE if preempt else OVERLOAD_MAX_DECODE
        return Plan(d, self.total - d, t, t_p, self._n_pl(t, t_p, b), b.new_rids, preempt, reason)

    def tbt_budget_ms(self, snap: Snapshot, host_ms: float | None = None) -> float:
        """GPU time a decode iteration may take: the TBT SLO less the loop's host time
        (``host_ms``, default ``snap.decode_host_ms``), which never takes more than
        HOST_STALL_SHARE of it."""
        host = snap.decode_host_ms if host_ms is None else host_ms
        return self.tbt_slo_ms - min(max(host, 0.0), HOST_STALL_SHARE * self.tbt_slo_ms)

    def plan(self, snap: Snapshot) -> Plan:
        plan = super().plan(snap)
        if (self.preemption and plan.prefill_layers > 0 and not plan.new_prefill_rids
                and snap.active_prefill is not None and snap.paused_prefill is None
                and not snap.active_prefill.is_preemptor and not snap.active_prefill.preempted_by_other):
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


class HybridPolicy(MuxDispatcher):
    """Per iteration the plan that advances prefill most while decode meets its TBT SLO: decode
    alone, a fused mixed chunk on the whole GPU, or the dispatcher's spatial partition.

    Rules, in order (inputs: the Snapshot; times ms; rates prompt tokens per ms):
    0. A request part-way through a fused prefill (``snap.chunked``): fused, its rest first, then
       the waiting requests as rule 3's fused candidate takes them (the last one may be cut), the
       largest chunk that fits (none fits: its rest alone, up to the smallest size; it holds KV and
       must move on). Filled only with prompts that fit whole, the chunk after a long prompt's
       last piece ran part-empty, and the simulator had the hybrid behind chunked 1024 on the
       capped conversation (4.4 against 4.8 req/s, TBT 50). A cut commits to fusing the prompt's
       rest, so rule 3 prices it as this rule runs it (`commitment`).
    1. A prefill batch in flight (active or paused): the dispatcher's plan. A layer-wise prefill
       is finished where it started, never dropped or turned into chunks (preemption as rule 4).
    2. Nothing waiting: the dispatcher's plan (decode alone, or idle).
    3. Else two candidates, both priced by the estimator:
       fused: for each size c (`sizes`), the chunk is the waiting requests' remaining
         prompt tokens first come, first served (the last one cut, at most ``max_prefill_bs``
         requests; while ``est.fused_price.learned`` is false, cut only if its rest fits one
         more such chunk), up to c less the decode rows (``decode_bs``; none if they fill it: the
         batch is c tokens, as SGLang counts a mixed chunk's budget, a size its prefill graph
         captured); its iteration t_f = ``fused_ms(est, chunk, decode contexts)``. The
         largest chunk with t_f <= ``tbt_budget_ms`` (the TBT SLO less a fused iteration's
         overrun, ``snap.fused_host_ms``, else ``decode_host_ms``; for a streak's first, ``not
         snap.fused_streak``, the larger of that and ``snap.fused_start_host_ms``) is the
         candidate, rate = chunk tokens / (t_f less the price's tail allowance, `fused_tail_ms`,
         + the median overrun, ``snap.fused_rate_host_ms``, else the budget's) (a
         fused iteration's prefill stops while the host works; a spatial one's runs on) over what
         it commits to (`commitment`: the rest of a prompt it cuts, which rule 0 will finish
         fused, in chunks that shrink to meet the same budget as its prefix grows). None fits: no
         fused candidate. Priced at the candidate's size throughout, the rest of a long prompt
         beside long decode contexts looked cheaper than it ran: on Mooncake's synthetic trace at
         TBT 30 the simulator had the hybrid fuse its 20-56K prompts in ~500-token chunks, at 0.45
         req/s where the dispatcher's partitions pass 0.8 (priced as run: 0.8).
       spatial: the dispatcher's plan for a new batch, rate = its new tokens / (T_P x s x w), T_P
         its estimated time on its prefill SMs, s = ``prefill_slowdown`` beside a decode (1
         alone), w = ``est.prefill_wall.factor`` (served batches' wall time over their planned
         T_P; 1 where the estimator has none); 0 when it holds prefill back
         (overload-decode-first). Its decode is budgeted for the SLO less ``snap.start_host_ms``
         (``budget_starts``): the first iteration forms the batch and launches its first layers
         in a token's gap (served at TBT 30, a quarter of such iterations' tokens waited over 30
         ms). Where that fits no partition, the dispatcher holds the start while its deadline
         allows, and the fused candidate runs meanwhile.
       The higher rate wins; ties go to spatial. A streak's first fused iteration is sized for its
       own budget (``fused_start_host_ms``) but weighed at the rate of the streak it starts (the
       candidate within the streak's budget): weighed alone, its small chunk lost to spatial
       plans, whose decodes missed TBT 30 (replayed on served overruns).
       A queue head of more new tokens than ``layerwise_max_tokens`` (what one layer-wise
       prefill's activations can hold in the memory left after the KV pool,
       `sglang_mux.prefill_memory`; None: no limit) has no spatial candidate: it is fused, cut
       into chunks (rule 3's largest that fits, else the smallest; rule 0 runs its rest), and
       it preempts nothing. The dispatcher alone must refuse such a prompt.
    A fused Plan: decode_sms = total_sms, prefill_sms = 0, t_decode_worst_ms = t_prefill_ms = t_f,
    prefill_layers = 0, no new batch, ``chunk`` = ((rid, tokens), ...), a prefix of ``waiting``
    (the last entry may be part of its request's tokens), reason "fused". No chunk budget to tune:
    the TBT SLO sets the size. ``prefill_slowdown`` (>= 1, or {decode SMs: factor}, the nearest
    partition's used): how much slower prefill runs beside decode than T_P says; 1 in the server,
    whose estimator's online prefill correction is in T_P already; the simulator passes its own.
    Raises ValueError at construction for empty or non-positive sizes or a slowdown below 1.
    """

    wants_decode_contexts = True  # a simulator passes Snapshot.decode_contexts (the server has them)

    def __init__(self, estimator: EstimatorLike, tbt_slo_ms: float = 50.0, ttft_slo_ms: float = 5000.0,
                 preemption: bool = True, max_prefill_tokens: int = 16384, max_prefill_bs: int = 64,
                 ttft_ms_per_token: float = 0.0, chunk_sizes: Sequence[int] = CHUNK_SIZES,
                 prefill_slowdown: float | Mapping[int, float] = 1.0, layerwise_max_tokens: int | None = None):
        super().__init__(estimator, tbt_slo_ms, ttft_slo_ms, preemption=preemption,
                         max_prefill_tokens=max_prefill_tokens, max_prefill_bs=max_prefill_bs,
                         ttft_ms_per_token=ttft_ms_per_token, budget_starts=True)
        if layerwise_max_tokens is not None and layerwise_max_tokens < max_prefill_tokens:
            raise ValueError(f"layerwise_max_tokens ({layerwise_max_tokens}) must hold a batch of "
                             f"max_prefill_tokens ({max_prefill_tokens})")
        self.layerwise_max_tokens = layerwise_max_tokens
        sizes = sorted({int(c) for c in chunk_sizes})
        if not sizes or sizes[0] <= 0:
            raise ValueError(f"chunk_sizes must be positive token counts, got {list(chunk_sizes)}")
        self.chunk_sizes = tuple(sizes)
        slow = dict(prefill_slowdown) if isinstance(prefill_slowdown, Mapping) else {0: float(prefill_slowdown)}
        if not slow or not all(float(v) >= 1.0 for v in slow.values()):
            raise ValueError(f"prefill_slowdown must be >= 1, got {prefill_slowdown}")
        self.prefill_slowdown = {int(d): float(v) for d, v in slow.items()}

    def corun_slowdown(self, decode_sms: int) -> float:
        """``prefill_slowdown`` for a partition of ``decode_sms`` (nearest; ties the smaller)."""
        sl = self.prefill_slowdown
        return sl.get(decode_sms) or sl[min(sl, key=lambda k: (abs(k - decode_sms), k))]

    def sizes(self) -> tuple[int, ...]:
        """The chunk sizes priced: ``chunk_sizes``, and between its smallest and FINE_SIZES_UP_TO
        every size SGLang's prefill CUDA graph captured (``est.graph_tokens``: 32-token steps to
        512, 64 to 1024) but those a larger one beats (``est.graph_cliffs``: cuBLAS's slow token
        counts, by the table's GEMM curve; their prices are then not monotone in the size, which
        the bisection needs). The batch fills a captured size either way; the finer steps let a
        tight TBT budget take the largest chunk that fits, not the power of two below it (served
        at TBT 30, 1,024 did not fit code's budget and its 512-token batches ran 15 ms of the 30)."""
        lo = self.chunk_sizes[0]
        slow = getattr(self.est, "graph_cliffs", {})
        fine = {c for c in getattr(self.est, "graph_tokens", ()) if lo <= c <= FINE_SIZES_UP_TO and c not in slow}
        return tuple(sorted(fine.union(self.chunk_sizes)))

    def _chunks(self, snap: Snapshot, rest_chunks: int | None = None) -> list[tuple[int, list[tuple[WaitingReq, int]]]]:
        """The distinct FCFS chunks of the sizes, ascending, each with its prompt room (the size
        less the decode rows, as SGLang counts a mixed chunk's budget: the batch then fills a
        captured graph size), the chunked request's rest first (reads the queue only that far).
        ``rest_chunks``: a waiting request is cut only if what it leaves fits that many more
        chunks of the room (None: any), else it ends the chunk."""
        head = (snap.chunked,) if snap.chunked is not None else ()
        out: list[tuple[int, list[tuple[WaitingReq, int]]]] = []
        for c in self.sizes():
            size = c - max(snap.decode_bs, 0)
            ch, room = [], size
            for i, w in enumerate(itertools.chain(head, snap.waiting)):
                if room <= 0 or len(ch) >= self.max_prefill_bs or (
                        rest_chunks is not None and i >= len(head) and w.n - room > rest_chunks * size):
                    break
                take = min(room, w.n)
                ch.append((w, take))
                room -= take
            if not ch:
                continue  # no room beside the decode rows, or the head leaves too much: a larger size may do
            if out and sum(t for _, t in ch) == sum(t for _, t in out[-1][1]):
                break  # the whole queue head fits a smaller size already
            out.append((size, ch))
        return out

    def fused_tail_ms(self) -> float:
        """What the fused price adds for its tail (``est.fused_price.margin``, the P90 of served
        residuals): the budget holds it, a rate does not, as with the host's overruns (a rate's time
        is the median's, the budget the tail's); a spatial rate's T_P is a mean. Weighed at the
        tail, the Llama-3.1-70B shape's fused chunks at TP 2 (margin 9.4 ms on ~86 ms) lost to
        partitions that ran 5.2-5.8 prompt tokens a ms where they ran ~7, and the hybrid failed
        0.6 req/s where chunked 512 passed 0.8 (bench/results/h200x4_s51_2026-11-28/)."""
        return max(getattr(getattr(self.est, "fused_price", None), "margin", 0.0), 0.0)

    def too_long(self, w: WaitingReq) -> bool:
        """Whether one layer-wise prefill cannot hold ``w``'s new tokens (``layerwise_max_tokens``)."""
        return self.layerwise_max_tokens is not None and w.n > self.layerwise_max_tokens

    def fused_candidate(self, snap: Snapshot, force: bool = False) -> tuple[Plan, float] | None:
        """The largest fused chunk that meets the TBT budget and its rate over what it commits to
        (`commitment`); None if none does. ``force`` (rule 0, or a queue head too long for a
        layer-wise prefill): the smallest chunk if none fits, rated alone."""
        host = max(snap.decode_host_ms if snap.fused_host_ms is None else snap.fused_host_ms, 0.0)
        if not snap.fused_streak and snap.fused_start_host_ms is not None:  # a streak's first: never less
            host = max(host, snap.fused_start_host_ms)
        budget = self.tbt_budget_ms(snap, host)
        if snap.fused_rate_host_ms is not None:  # the rate's time is the median's, the budget the tail's
            host = max(snap.fused_rate_host_ms, 0.0)
        host -= self.fused_tail_ms()  # and each chunk's GPU time the price less its tail (`fused_tail_ms`)
        ctx = decode_contexts(snap)
        if hasattr(self.est, "decode_rows"):  # summed once for the dozen prices below
            ctx = self.est.decode_rows(ctx)
        # On an unlearned price (the prior: the solo price) a cut commits to one more chunk at most:
        # cutting a long prompt on it held the loop fused for its every chunk once the true price
        # was known.
        learned = getattr(getattr(self.est, "fused_price", None), "learned", True)
        head_too_long = snap.chunked is None and bool(snap.waiting) and self.too_long(snap.waiting[0])
        chunks = self._chunks(snap, rest_chunks=None if learned or head_too_long else 1)
        if force and snap.chunked is not None:  # at worst the chunked request's rest alone, nobody cut anew
            w = snap.chunked
            chunks = [(0, [(w, min(w.n, self.chunk_sizes[0]))])] + chunks
        if not chunks:
            return None
        price = [None] * len(chunks)

        def t_f(i: int) -> float:
            if price[i] is None:
                price[i] = fused_ms(self.est, [PrefillReq(take, w.r) for w, take in chunks[i][1]], ctx)
            return price[i]

        # The price grows with the chunk: the largest that fits, by bisection (dozens of sizes).
        lo, hi = 0, len(chunks) - 1
        if t_f(0) > budget and not force:
            return None
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if t_f(mid) <= budget else (lo, mid - 1)
        room, ch = chunks[lo]
        plan = Plan(self.total, 0, t_f(lo), t_f(lo), 0, (), False, FUSED, chunk=tuple((w.rid, take) for w, take in ch))
        if force:  # rule 0: no choice to rate
            return plan, sum(t for _, t in ch) / (t_f(lo) + host)
        tokens, ms = self.commitment(ch, room, t_f(lo), ctx, host, budget, snap.decode_bs)
        return plan, tokens / ms

    def commitment(self, ch, size: int, t_f: float, ctx, host: float, budget: float,
                   rows: int = 0) -> tuple[float, float]:
        """(prompt tokens, ms) that fusing ``ch`` commits to: the chunk and, when it cuts its last
        request, that request's rest as rule 0 will run it: chunks of the largest room (a size
        less the ``rows`` decode rows) that still meets ``budget``, each over a longer prefix, the
        last one priced full (its room goes on to the queue). They go in spans of
        ceil(k / COMMIT_SPANS) chunks (k: the rest's chunks at ``size``); a span takes the largest
        room, from the last span's down, that fits at its last chunk (none does: rule 0's
        smallest, ``chunk_sizes[0]``), its prices read at its first and last chunk and taken as
        linear between (attention over the prefix grows linearly). A chunk of a long prompt is
        cheap at its start and dear at its end, and the start alone would choose it; where the
        budget shrinks the chunks (a long prompt beside long decode contexts), the candidate's size
        throughout would miss that (rule 3 says what it cost). Where ``size`` fits to the end this
        is the rest in chunks of ``size`` priced at the first and last prefix, as before. ``host``:
        what each chunk adds to its price in the ms (the median host overrun less the price's
        tail, `fused_tail_ms`)."""
        w, take = ch[-1]
        tokens, ms = float(sum(t for _, t in ch)), t_f + host
        rest = left = w.n - take
        r = w.r + take
        if rest <= 0:
            return tokens, ms
        rooms = [self.chunk_sizes[0]] + [c - rows for c in self.sizes() if c > rows]  # as rule 0 bisects them
        i = max((k for k, c in enumerate(rooms) if k and c <= size), default=0)  # rooms[0]: the fallback
        price = lambda n, x: fused_ms(self.est, [PrefillReq(n, x)], ctx)  # noqa: E731
        stride = math.ceil(math.ceil(left / size) / COMMIT_SPANS)
        while left > 0:
            while True:  # the largest room, from the last span's down, whose last chunk here fits
                s = rooms[i]
                n = min(stride, math.ceil(left / s))
                last = price(min(s, rest), r + (n - 1) * s)
                if last <= budget or i == 0:
                    break
                i -= 1
            first = price(min(s, rest), r) if n > 1 else last
            ms += n * ((first + last) / 2 + host)
            tokens += min(n * s, left)
            left, r = left - n * s, r + n * s
        return tokens, ms

    def spatial_rate(self, plan: Plan, snap: Snapshot) -> float:
        """Prompt tokens per ms of a spatial plan that starts a new batch (0: prefill held)."""
        if plan.kind != KIND_SPATIAL or plan.t_prefill_ms <= 0.0:
            return 0.0
        k = len(plan.new_prefill_rids)
        slow = self.corun_slowdown(plan.decode_sms) if snap.decode_bs > 0 and plan.decode_sms > 0 else 1.0
        wall = getattr(getattr(self.est, "prefill_wall", None), "factor", 1.0)
        return sum(w.n for w in itertools.islice(snap.waiting, k)) / (plan.t_prefill_ms * slow * wall)

    def plan(self, snap: Snapshot) -> Plan:
        if snap.chunked is not None:  # rule 0
            if snap.active_prefill is not None or snap.paused_prefill is not None:
                raise ValueError("a fused prefill and a layer-wise one cannot both be in flight")
            return self.fused_candidate(snap, force=True)[0]
        spatial = super().plan(snap)
        if snap.active_prefill is not None or snap.paused_prefill is not None or not snap.waiting:
            return spatial  # rules 1 and 2
        if self.too_long(snap.waiting[0]):  # fused in chunks whatever the rates
            forced = self.fused_candidate(snap, force=True)
            return forced[0] if forced is not None else self._decode_only(snap)  # no room beside the decode rows
        fused = self.fused_candidate(snap)
        if fused is None:
            return spatial
        rate = fused[1]
        if not snap.fused_streak and snap.fused_start_host_ms is not None:
            # A streak pays its first iteration's set-up once: weighed at the rate it goes on at
            steady = self.fused_candidate(replace(snap, fused_streak=True))
            rate = steady[1] if steady is not None else rate
        return fused[0] if rate > self.spatial_rate(spatial, snap) else spatial

    def _preempting_plan(self, snap: Snapshot, cur: Plan) -> Plan | None:
        head = next(iter(snap.waiting), None)
        return None if head is not None and self.too_long(head) else super()._preempting_plan(snap, cur)


class FixedPolicy(_BasePolicy):
    """One fixed partition whenever both phases have work (a static-split baseline).

    With `full_gpu_when_alone` (default) a phase that runs alone gets the whole GPU, as in the
    other policies, so that the comparison isolates the choice of partition.
    """

    def __init__(self, estimator: EstimatorLike, decode_sms: int = 64, *, full_gpu_when_alone: bool = True,
                 max_prefill_tokens: int = 16384, max_prefill_bs: int = 64):
        super().__init__(estimator, max_prefill_tokens=max_prefill_tokens, max_prefill_bs=max_prefill_bs)
        if not 0 < decode_sms < self.total:
            raise ValueError(f"fixed decode_sms {decode_sms} must be in (0, {self.total})")
        self.decode_sms = int(decode_sms)
        self.full_gpu_when_alone = full_gpu_when_alone

    def plan(self, snap: Snapshot) -> Plan:
        plan = super().plan(snap)
        if self.full_gpu_when_alone or plan.reason == IDLE or (plan.decode_sms and plan.prefill_sms):
            return plan
        d, b = self.decode_sms, self._pick(snap)
        if plan.reason == DECODE_ONLY:
            t = self.est.decode_worst_ms(d, snap.decode_bs, snap.decode_sum_reused, 0, 0,
                                         max_reused=snap.decode_max_reused)
            return Plan(d, self.total - d, t, 0.0, 0, (), False, FIXED)
        t_p = self.est.prefill_ms(self.total - d, b.reqs)
        return Plan(d, self.total - d, 0.0, t_p, self.layers - b.layers_done, b.new_rids, False, FIXED)

    def _mux(self, snap: Snapshot, b: _Batch) -> Plan:
        d = self.decode_sms
        t = self.est.decode_worst_ms(d, snap.decode_bs, snap.decode_sum_reused, b.new_tokens, b.reused_tokens,
                                     max_reused=snap.decode_max_reused)
        return self._plan(d, t, b, FIXED)


class BatchSizePolicy(_BasePolicy):
    """Interim rule of SGLang's PD-multiplexing demo: decode share grows with decode batch size.

    Option index = clamp(bs * k // decode_bs_divisor, 1, k) - 1 over the k multiplexed
    partitions (SGLang: stream group = clamp(bs*(G-2)//36, 1, G-2)); prefill layers per launch
    = split_forward_token_budget // new tokens (SGLang's split-forward budget), at least 1.
    """

    def __init__(self, estimator: EstimatorLike, decode_bs_divisor: int = 36,
                 split_forward_token_budget: int = 65536, *, max_prefill_tokens: int = 16384,
                 max_prefill_bs: int = 64):
        super().__init__(estimator, max_prefill_tokens=max_prefill_tokens, max_prefill_bs=max_prefill_bs)
        self.divisor = max(1, int(decode_bs_divisor))
        self.budget = max(1, int(split_forward_token_budget))

    def decode_sms_for(self, bs: int) -> int:
        k = len(self.options)
        return self.options[max(1, min(k, bs * k // self.divisor)) - 1]

    def _mux(self, snap: Snapshot, b: _Batch) -> Plan:
        d = self.decode_sms_for(snap.decode_bs)
        t = self.est.decode_worst_ms(d, snap.decode_bs, snap.decode_sum_reused, b.new_tokens, b.reused_tokens,
                                     max_reused=snap.decode_max_reused)
        p = self.total - d
        t_p = self.est.prefill_ms(p, b.reqs)
        n = max(1, min(self.layers - b.layers_done, self.budget // max(1, b.new_tokens)))
        return Plan(d, p, t, t_p, n, b.new_rids, False, BATCH_SIZE)


def make_policy(name: str, estimator: EstimatorLike, *, tbt_slo_ms: float = 50.0, ttft_slo_ms: float = 5000.0,
                preemption: bool = True, ttft_ms_per_token: float = 0.0, **kw) -> Policy:
    """The one policy factory (simulator, CLI and server): 'dispatcher' | 'hybrid' | 'batch-size' |
    'fixed:<decode SMs>' (bare 'fixed' = 64 decode SMs). The SLO settings go to the dispatcher
    and the hybrid only; ``kw`` to the policy's constructor. Raises ValueError for an unknown
    name."""
    if name == "dispatcher":
        return MuxDispatcher(estimator, tbt_slo_ms, ttft_slo_ms, preemption=preemption,
                             ttft_ms_per_token=ttft_ms_per_token, **kw)
    if name == "hybrid":
        return HybridPolicy(estimator, tbt_slo_ms, ttft_slo_ms, preemption=preemption,
                            ttft_ms_per_token=ttft_ms_per_token, **kw)
    if name == "batch-size":
        return BatchSizePolicy(estimator, **kw)
    if name == "fixed" or name.startswith("fixed:"):
        return FixedPolicy(estimator, int(name.partition(":")[2] or 64), **kw)
    raise ValueError(f"unknown policy {name!r}: use dispatcher, batch-size, hybrid or fixed:<decode SMs>")


def policy_name(args) -> str:
    """make_policy's name for a server's settings (mux_args.MuxArgs: ``policy`` and
    ``fixed_decode_sms``): 'fixed' becomes 'fixed:<fixed_decode_sms>', the others stay."""
    return f"fixed:{args.fixed_decode_sms}" if args.policy == "fixed" else args.policy


# ---- CLI ------------------------------------------------------------------------------------

def check_policy_name(name: str, estimator: EstimatorLike) -> None:
    """A ``--policy`` name that ``make_policy`` can build on this estimator's partitions, else a
    ``cli.UsageError`` saying which names and decode partitions there are."""
    from sglang_mux.cli import UsageError

    opts = list(estimator.decode_sms_options)
    if name in ("dispatcher", "hybrid", "batch-size"):
        return
    if name == "fixed" or name.startswith("fixed:"):
        d = name.partition(":")[2] or "64"
        if d.isdigit() and int(d) in opts:
            return
        raise UsageError(f"--policy {name}: {d} SMs is not a decode partition of this table; its partitions are "
                         f"{', '.join(map(str, opts))} (e.g. fixed:{opts[len(opts) // 2]})")
    raise UsageError(f"--policy {name!r} is not a policy; use dispatcher, batch-size, hybrid or fixed:<decode SMs> "
                     f"(decode partitions: {', '.join(map(str, opts))})")


def main(argv: Sequence[str] | None = None, estimator: EstimatorLike | None = None) -> int:
    from sglang_mux import cli
    from sglang_mux.mux_args import MuxArgs

    pos, nonneg = cli.positive, lambda kind: cli.positive(kind, allow_zero=True)
    ap = cli.ArgumentParser(prog="python -m sglang_mux.dispatch", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("plan", help="one decision for a described state; prints the Plan as JSON",
                       description="One decision for a described state; prints the Plan as JSON.")
    p.add_argument("--table", help="a shipped table's name (e.g. llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3) or a "
                   "contention_tables/<model>__<gpu>__<backend>/ dir")
    p.add_argument("--policy", default=MuxArgs.policy, help="hybrid | dispatcher | batch-size | fixed:<decode SMs> "
                   "(default: the server's)")
    p.add_argument("--tbt-slo-ms", type=pos(float), default=50.0, help="time-between-tokens SLO (ms)")
    p.add_argument("--ttft-slo-ms", type=pos(float), default=5000.0, help="time-to-first-token SLO (ms)")
    p.add_argument("--ttft-ms-per-token", type=nonneg(float), default=0.0, help="TTFT SLO += this x prompt tokens")
    p.add_argument("--decode-bs", type=nonneg(int), default=0, help="requests in the decode batch (0 = none)")
    p.add_argument("--decode-reused", type=nonneg(int), default=0, help="context tokens per decode request")
    p.add_argument("--decode-max-reused", type=nonneg(int), default=None,
                   help="longest context in the decode batch (default: --decode-reused, a uniform batch)")
    p.add_argument("--prefill-new", type=nonneg(int), default=0, help="new tokens of the prefill (0 = none)")
    p.add_argument("--prefill-reused", type=nonneg(int), default=0, help="reused (cached) tokens of the prefill")
    p.add_argument("--prefill-layers-done", type=nonneg(int), default=0, help=">0: an active batch this far along")
    p.add_argument("--prefill-age-ms", type=nonneg(float), default=0.0, help="how long the prefill has waited")
    p.add_argument("--waiting-new", type=nonneg(int), default=0,
                   help="with --prefill-layers-done: a waiting request of this many new tokens (may preempt)")
    p.add_argument("--waiting-reused", type=nonneg(int), default=0)
    p.add_argument("--waiting-age-ms", type=nonneg(float), default=0.0)
    p.add_argument("--no-preemption", action="store_true")
    a = ap.parse_args(argv)
    if a.decode_max_reused is not None and a.decode_max_reused < a.decode_reused:
        p.error("--decode-max-reused is the longest context: it cannot be below --decode-reused")
    est = estimator
    if est is None:
        if not a.table:
            p.error("the following arguments are required: --table (a shipped table's name or a table dir)")
        from sglang_mux.estimator import from_table_arg

        est = from_table_arg(p, a.table)
    try:
        check_policy_name(a.policy, est)
    except cli.UsageError as e:
        p.error(str(e))
    if a.prefill_layers_done >= est.num_layers:
        p.error(f"--prefill-layers-done {a.prefill_layers_done}: the model has {est.num_layers} layers; "
                f"give 0 (a waiting batch) to {est.num_layers - 1}")
    pol = make_policy(a.policy, est, tbt_slo_ms=a.tbt_slo_ms, ttft_slo_ms=a.ttft_slo_ms,
                      preemption=not a.no_preemption, ttft_ms_per_token=a.ttft_ms_per_token)
    now = 1000.0
    active, waiting = None, ()
    if a.prefill_new > 0:
        arr = now - a.prefill_age_ms / 1e3
        if a.prefill_layers_done > 0:
            active = PrefillBatchState(["prefill"], [PrefillReq(a.prefill_new, a.prefill_reused)],
                                       a.prefill_layers_done, arr)
        else:
            waiting = (WaitingReq("prefill", arr, a.prefill_new, a.prefill_reused),)
    if a.waiting_new > 0 and active is not None:
        waiting = (WaitingReq("waiting", now - a.waiting_age_ms / 1e3, a.waiting_new, a.waiting_reused),)
    snap = Snapshot(now, a.decode_bs, a.decode_bs * a.decode_reused,
                    decode_max_reused=a.decode_reused if a.decode_max_reused is None else a.decode_max_reused,
                    active_prefill=active, waiting=waiting)
    out = pol.plan(snap).to_dict()
    out["num_layers"] = est.num_layers
    json.dump(out, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    from sglang_mux import cli

    cli.run(main)
