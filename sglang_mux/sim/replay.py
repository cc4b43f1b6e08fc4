"""The replay of a trace under one policy, with an estimator playing the GPU (`simulate`).

Each decision is a round that lasts one decode iteration, or a fused one, or (no decode) the
launched prefill layers. Decode runs at the truth's solo time x a co-run slowdown (`Calibration`),
a fused iteration at the truth's price, prefill at its solo speed per layer (x the calibration's
slowdown beside decode); the host adds its time to a token's gap, and the policy is told it as a
server measures it (`HostBudgets`). No KV-capacity limit, no admission limit. Every policy sees
the same requests, reuse and draws (one seeded random stream).
"""

from __future__ import annotations

import heapq
import math
import random
from collections import defaultdict, deque
from typing import Mapping, Sequence

import numpy as np

from sglang_mux.latency_model.terms import PrefillReq, fused_batch
from sglang_mux.policy import SLO, EstimatorLike, HostBudgets, Policy, Snapshot, WaitingReq, apply_plan
from sglang_mux.sim.calibration import Calibration
from sglang_mux.sim.summary import SimResult, drift_tests, weighted_percentile
from sglang_mux.traces import TraceReq


def simulate(reqs: Sequence[TraceReq], estimator: EstimatorLike, policy: Policy, calib: Calibration = Calibration(),
             *, slo: SLO = SLO(), name: str = "policy", seed: int = 0, planner: EstimatorLike | None = None,
             timeline=None, max_rounds: int = 10_000_000) -> SimResult:
    """Replay ``reqs`` under ``policy``; ``estimator`` is the ground truth (docs/sim.md: the model),
    ``slo`` what the result is judged by. ``planner``: the estimator ``policy`` plans with, refined
    online by every co-run decode and fused iteration (None: the policy plans with the truth, and
    nothing is refined). ``timeline``: a `TimelineWriter` every decision is written to. Raises
    ValueError for a planner that is the truth, RuntimeError for a policy that stalls."""
    return _Replay(reqs, estimator, policy, calib, slo, name, seed, planner, timeline, max_rounds).run()


class _Replay:
    def __init__(self, reqs, est, policy, calib: Calibration, slo: SLO, name, seed, planner, timeline, max_rounds):
        if planner is est:
            raise ValueError("planner must be a copy of the estimator: refining the truth would change the GPU")
        if planner is None:
            est.fused_price.known = True  # the policy plans with the truth: its price is no prior
        self.est, self.policy, self.calib, self.slo = est, policy, calib, slo
        self.name, self.planner, self.timeline, self.max_rounds = name, planner, timeline, max_rounds
        self.rng = random.Random(seed)
        c = calib
        self.jit = None if c.jitter is None else list(c.jitter)
        self.fjit = c.fused_jitter_draws
        self.hosts = None if c.host_draws is None else [list(h) for h in c.host_draws]
        self.starts = None if c.start_host_ms is None else [float(x) for x in c.start_host_ms]
        self.fused_draws = c.fused_draws
        self.fused_starts = None if c.fused_start_host_ms is None else [float(x) for x in c.fused_start_host_ms]
        self.fused_host_ms = c.fused_host_ms if self.fused_draws is None else None
        self.pslow = dict(c.prefill_slowdown) if isinstance(c.prefill_slowdown, Mapping) else None
        self.budgets = HostBudgets.measured(
            slo.stall_ms if c.fused_stalls_apart else None, fused_quantile=c.fused_host_quantile,
            decode=self.hosts is not None, start=self.starts is not None,
            fused=self.hosts is not None or self.fused_draws is not None, fused_start=self.fused_starts is not None,
            decode_ms=c.host_ms, fused_ms=self.fused_host_ms)
        self.wants_ctx = policy.wants_decode_contexts
        self.reqs = reqs = sorted(reqs, key=lambda q: q.arrival_s)
        n = self.n = len(reqs)
        self.idx = {q.rid: i for i, q in enumerate(reqs)}
        self.n_in = np.array([q.n_input for q in reqs], dtype=np.int64)
        self.out_len = np.array([q.output_len for q in reqs], dtype=np.int64)
        self.arrival = np.array([q.arrival_s for q in reqs])
        self.first_tok = np.full(n, np.nan)
        self.finish = np.full(n, np.nan)
        self.first_round = np.full(n, -1, dtype=np.int64)
        self.first_gap = np.full(n, np.nan)
        self.waiting: deque = deque()
        self.chunked: WaitingReq | None = None  # part-way through a fused prefill (not in waiting), as SGLang's
        self.parked: WaitingReq | None = None  # a chunked request parked (FusedPlan.parks) until chunked is done
        self.active = self.paused = None
        self.progress: dict[int, list] = {}  # id(batch) -> [layers done (fractional), layers launched]
        self.started: dict[int, tuple[float, float]] = {}  # id(batch) -> (formed at, its plan's T_P)
        self.dec_bs = self.dec_ctx = 0
        # Longest decode context: request i's context in decode round k is key_i + k with
        # key_i = n_in[i] + 1 - first_round[i]; a max-heap of keys, finished requests popped lazily.
        self.ctx_heap: list[tuple[int, int]] = []
        self.in_decode = np.zeros(n, dtype=bool)
        self.finish_at: dict[int, list] = defaultdict(list)  # decode round -> requests finishing then
        self.pending_join: list[int] = []
        self.taus: list[float] = []  # per decode round: its gap (ms) and how many tokens had a regular gap
        self.regular: list[int] = []
        self.share: dict[str, float] = defaultdict(float)
        self.reasons: dict[str, int] = defaultdict(int)
        self.t, self.nxt, self.done, self.rounds, self.decisions, self.preemptions, self.idle_s = 0.0, 0, 0, 0, 0, 0, 0.0
        self.prefill_busy_ms = 0.0
        self.streak = False  # the last iteration was fused: a fused plan continues its streak

    def decode_contexts(self) -> list[int]:
        """Each decoding request's context this round: n_in[i] + 1 + round - first_round[i]."""
        live = np.flatnonzero(self.in_decode)
        return (self.n_in[live] + 1 + self.rounds - self.first_round[live]).tolist()

    def run(self) -> SimResult:
        while self.done < self.n:
            joined = self.admit()
            if self.chunked is None and self.parked is not None:  # the one chunked in its place is done
                self.chunked, self.parked = self.parked, None
            if self.dec_bs == 0 and self.active is None and self.paused is None and not self.waiting \
                    and self.chunked is None:
                if self.nxt >= self.n:
                    raise RuntimeError("simulator lost track of requests")  # pragma: no cover
                self.wait_for_arrival()
                continue
            self.round(joined)
            if self.decisions > self.max_rounds:
                raise RuntimeError("simulation exceeded max_rounds")
        return self.result()

    def enqueue(self, w: WaitingReq) -> None:
        """``w`` joins the queue where the policy orders it (`Policy.queue_key`), as the server
        loop sorts SGLang's queue: behind every prompt of a key no later (arrival order on ties)."""
        key = self.policy.queue_key
        k = key(w.arrival_s, w.n + w.r)
        i = len(self.waiting)
        if k is not None:
            while i > 0 and key(self.waiting[i - 1].arrival_s, self.waiting[i - 1].n + self.waiting[i - 1].r) > k:
                i -= 1
        self.waiting.insert(i, w)

    def admit(self) -> list[int]:
        """Arrivals up to now join the queue; prompts finished last round join this round's
        decode. Returns those that joined."""
        reqs, n = self.reqs, self.n
        while self.nxt < n and reqs[self.nxt].arrival_s <= self.t + 1e-12:
            q = reqs[self.nxt]
            self.enqueue(WaitingReq(q.rid, q.arrival_s, q.n_input - q.reused, q.reused))
            self.nxt += 1
        joined, self.pending_join = self.pending_join, []
        for i in joined:
            n_in = int(self.n_in[i])
            self.dec_bs += 1
            self.dec_ctx += n_in + 1
            self.first_round[i] = self.rounds
            self.in_decode[i] = True
            heapq.heappush(self.ctx_heap, (-(n_in + 1 - self.rounds), i))
            self.finish_at[self.rounds + int(self.out_len[i]) - 2].append(i)
        return joined

    def wait_for_arrival(self) -> None:
        nxt = self.reqs[self.nxt].arrival_s
        self.idle_s += nxt - self.t
        self.t = nxt

    def decide(self):
        """The policy's plan on this round's snapshot, carried out on the batch state. Returns
        (plan, decode batch size before the round, the contexts told the policy, the longest)."""
        heap = self.ctx_heap
        while heap and not self.in_decode[heap[0][1]]:
            heapq.heappop(heap)
        dec_max = -heap[0][0] + self.rounds if heap else 0
        ctxs = self.decode_contexts() if self.wants_ctx else None
        plan = self.policy.plan(Snapshot(self.t, self.dec_bs, self.dec_ctx, decode_max_reused=dec_max,
                                         active_prefill=self.active, paused_prefill=self.paused,
                                         waiting=self.waiting, decode_contexts=ctxs, chunked=self.chunked,
                                         parked=self.parked,
                                         **self.budgets.view(fused_streak=self.streak)))
        self.decisions += 1
        self.reasons[plan.reason] += 1
        self.active, self.paused, k = apply_plan(plan, self.active, self.paused, self.waiting)
        for _ in range(k):
            self.waiting.popleft()
        if plan.preempt:
            self.preemptions += 1
        if self.active is not None and id(self.active) not in self.progress:
            self.progress[id(self.active)] = [float(self.active.layers_done), self.active.layers_done]
            self.started[id(self.active)] = (self.t, plan.t_prefill_ms)  # as the server books it (PrefillWall)
        return plan, ctxs, dec_max

    def round(self, joined: list[int]) -> None:
        bs0 = self.dec_bs
        plan, ctxs, dec_max = self.decide()
        active, dec_bs = self.active, self.dec_bs
        # A decode alone with no prefill anywhere, under a fusing policy: SGLang's overlap loop runs
        # it (MuxLoop.overlaps), its host time hidden and the fused streak going on.
        overlapped = self.calib.overlap_decode and self.wants_ctx and not plan.chunk and dec_bs > 0 \
            and active is None and self.paused is None and self.chunked is None
        starts_streak, self.streak = not self.streak, bool(plan.chunk) or overlapped
        runs_prefill = active is not None and plan.prefill_layers > 0 and plan.prefill_sms > 0
        runs_decode = dec_bs > 0 and plan.decode_sms > 0
        if dec_bs > 0 and not runs_decode:
            raise RuntimeError(f"policy gave no SMs to a decode batch of {dec_bs}: {plan}")
        first_rids: Sequence[str] = active.rids if active is not None else ()
        if runs_prefill:
            layer_ms, target, avail_ms = self.prefill_window(plan, runs_decode)
        if plan.chunk:  # fused: the chunk and one token per decoding request in one extend batch
            if runs_prefill:
                raise RuntimeError(f"policy fused a chunk beside a layer-wise prefill: {plan}")
            tau, first_rids = self.fused_round(plan, ctxs, starts_streak)
        elif runs_decode:
            tau = self.decode_round(plan, dec_max, runs_prefill, overlapped)
        elif runs_prefill:
            tau = avail_ms
        else:  # nothing can run now (e.g. nothing has arrived that the policy would start)
            if self.nxt >= self.n:
                raise RuntimeError(f"policy made no progress with work left: {plan}")
            self.wait_for_arrival()
            return
        completed_at = None
        t = self.t
        if runs_prefill:
            completed_at = self.advance_prefill(layer_ms, target, avail_ms, tau)
        elif plan.chunk and first_rids:  # fused: a request whose last piece ran has its first token
            completed_at = t + tau / 1e3
        self.share["fused" if plan.chunk else f"D{plan.decode_sms}/P{plan.prefill_sms}"] += tau / 1e3
        t_end = t + tau / 1e3
        if runs_decode:
            self.decode_tokens(tau, joined, t_end)
        if completed_at is not None:
            self.first_tokens(plan, first_rids, completed_at)
        if self.timeline is not None:
            self.timeline.write(plan, now=t, policy=self.name, decode_bs=bs0,
                                measured_decode_ms=tau if runs_decode else None, waiting=len(self.waiting))
        self.t = t_end

    def prefill_window(self, plan, runs_decode: bool) -> tuple[float, int, float]:
        """(ms per layer, layers launched after this round, ms of prefill work queued) for the
        active batch: N_PL layers queued beyond the one executing; launched layers stay launched."""
        layer_ms = self.est.prefill_ms(plan.prefill_sms, self.active.reqs) / self.est.num_layers
        if runs_decode:
            layer_ms *= self.calib.prefill_slowdown if self.pslow is None else _nearest(self.pslow, plan.decode_sms)
        prog, launched = self.progress[id(self.active)]
        target = max(launched, min(self.est.num_layers, math.ceil(prog - 1e-9) + plan.prefill_layers))
        return layer_ms, target, max(0.0, target - prog) * layer_ms

    def fused_round(self, plan, ctxs, starts_streak: bool) -> tuple[float, list[str]]:
        """A fused iteration: its gap (ms) and the requests whose prompt it completed."""
        est, rng = self.est, self.rng
        if plan.parks:
            if self.parked is not None:  # the server parks one at a time: a second would be lost
                raise ValueError(f"Plan {plan.chunk} parks {self.chunked and self.chunked.rid} while "
                                 f"{self.parked.rid} is parked")
            self.parked, self.chunked = self.chunked, None
        pieces, first_rids, self.chunked = _take_chunk(plan.chunk, self.chunked, self.waiting, plan.yields)
        fctx = ctxs if ctxs is not None else self.decode_contexts()
        gpu = est.fused_ms(pieces, fctx)
        if self.fjit is not None:
            size = est.fused_tokens(pieces, est.decode_rows(fctx)) if self.fjit.by_size else None
            gpu *= self.fjit.draw(rng, size)
        if self.planner is not None:
            self.planner.observe_fused(fused_batch(pieces, fctx), gpu)
        first = self.fused_starts is not None and starts_streak
        if first:
            h = rng.choice(self.fused_starts)
        elif self.fused_draws is not None:
            h = rng.choice(self.fused_draws)
        elif self.fused_host_ms is not None:
            h = self.fused_host_ms
        else:
            h = self.calib.host_ms if self.hosts is None else rng.choice(self.hosts[0])
        tau = max(gpu + h, 0.5 * gpu)  # a served gap below half its price is not a host time
        self.budgets.book_fused(tau, planned_ms=plan.t_decode_worst_ms, gpu_ms=gpu, starts_streak=first)
        self.prefill_busy_ms += gpu
        return tau, first_rids

    def decode_round(self, plan, dec_max: int, runs_prefill: bool, overlapped: bool) -> float:
        """A decode iteration (beside a layer-wise prefill where ``runs_prefill``): its gap (ms)."""
        est, rng, d, bs, ctx = self.est, self.rng, plan.decode_sms, self.dec_bs, self.dec_ctx
        tau = est.decode_solo_ms(d, bs, ctx, max_reused=dec_max)
        co_run = runs_prefill and d < est.total_sms
        if co_run:
            pn = sum(r.n for r in self.active.reqs)
            pr = sum(r.r for r in self.active.reqs)
            if self.jit is not None:
                tau = est.decode_worst_ms(d, bs, ctx, pn, pr, max_reused=dec_max) * rng.choice(self.jit)
            elif self.calib.slowdown != "none":
                g = max(1.0, est.decode_worst_ms(d, bs, ctx, pn, pr, max_reused=dec_max) / tau)
                tau *= g if self.calib.slowdown == "worst" else rng.uniform(1.0, g)
            if self.planner is not None:
                self.planner.observe_decode(d, bs, ctx, pn, pr, tau, max_reused=dec_max)
        if overlapped:
            return tau
        starts = self.starts is not None and bool(plan.new_prefill_rids)
        if starts:
            h = rng.choice(self.starts)
        else:
            h = self.calib.host_ms if self.hosts is None else rng.choice(self.hosts[0] if co_run else self.hosts[1])
        self.budgets.book_decode(tau + h, tau, starts_batch=starts)
        return tau + h  # a token's gap: the GPU's time, then the loop's

    def advance_prefill(self, layer_ms: float, target: int, avail_ms: float, tau: float) -> float | None:
        """The active batch's layers over a round of ``tau`` ms; its first token's time if it
        completes (noticed, as its event is polled, at the round's end)."""
        active, L = self.active, self.est.num_layers
        prog = self.progress[id(active)][0]
        self.prefill_busy_ms += min(avail_ms, tau)
        completed_at = None
        if avail_ms <= tau + 1e-9:
            prog = float(target)
            if target >= L:
                completed_at = self.t + tau / 1e3
        else:
            prog += tau / layer_ms
        self.progress[id(active)] = [prog, target]
        active.layers_done = min(L, int(prog + 1e-9))
        return completed_at

    def decode_tokens(self, tau: float, joined: list[int], t_end: float) -> None:
        """Every decoding request has a token at ``t_end``; those done leave the batch."""
        self.taus.append(tau)
        self.regular.append(self.dec_bs - len(joined))
        for i in joined:
            self.first_gap[i] = t_end - self.first_tok[i]
        self.dec_ctx += self.dec_bs
        for i in self.finish_at.pop(self.rounds, ()):
            self.finish[i] = t_end
            self.in_decode[i] = False
            self.dec_bs -= 1
            self.dec_ctx -= int(self.n_in[i] + self.out_len[i])
            self.done += 1
        self.rounds += 1

    def first_tokens(self, plan, rids: Sequence[str], at: float) -> None:
        """The prompts ``rids`` completed at ``at``: their first token; a layer-wise batch ends."""
        for rid in rids:
            i = self.idx[rid]
            self.first_tok[i] = at
            if self.out_len[i] <= 1:
                self.finish[i] = at
                self.done += 1
            else:
                self.pending_join.append(i)
        if not plan.chunk:
            active = self.active
            del self.progress[id(active)]
            t0, planned = self.started.pop(id(active))
            if self.planner is not None and not active.preempted_by_other:
                self.planner.prefill_wall.observe(planned, (at - t0) * 1e3)
            self.active = None

    def result(self) -> SimResult:
        n, out_len, slo = self.n, self.out_len, self.slo
        ttft = self.first_tok - self.arrival
        tau_a = np.asarray(self.taus)
        reg_w = np.asarray(self.regular, dtype=float)
        fg = self.first_gap[~np.isnan(self.first_gap)]
        tbt_v = np.concatenate([tau_a, fg * 1e3])
        tbt_w = np.concatenate([reg_w, np.ones(len(fg))])
        max_tbt = np.zeros(n)
        for i in range(n):
            m = int(out_len[i]) - 1
            if m >= 1 and self.first_round[i] >= 0:
                fr = int(self.first_round[i])
                seg = tau_a[fr + 1: fr + m]
                max_tbt[i] = max(self.first_gap[i] * 1e3, seg.max() if len(seg) else 0.0)
        ttft_ok = ttft * 1e3 <= slo.ttft_ms + slo.ttft_ms_per_token * self.n_in
        ok = ttft_ok & (max_tbt <= slo.tbt_ms)
        makespan = float(np.nanmax(self.finish) - self.arrival.min())
        busy = sum(self.share.values())
        summary = {
            "policy": self.name, "requests": n,
            "ttft_p50_s": float(np.percentile(ttft, 50)), "ttft_p99_s": float(np.percentile(ttft, 99)),
            "tbt_p50_ms": weighted_percentile(tbt_v, tbt_w, 50), "tbt_p99_ms": weighted_percentile(tbt_v, tbt_w, 99),
            "ttft_attainment": float(np.mean(ttft_ok)),
            "tbt_attainment": float(tbt_w[tbt_v <= slo.tbt_ms].sum() / tbt_w.sum()) if tbt_w.sum() else 1.0,
            "slo_attainment": float(ok.mean()),
            "throughput_tok_s": float(out_len.sum() / makespan) if makespan > 0 else float("nan"),
            "throughput_req_s": float(n / makespan) if makespan > 0 else float("nan"),
            "makespan_s": makespan, "preemptions": self.preemptions, "decisions": self.decisions,
            "decode_iterations": self.rounds, "reasons": dict(self.reasons),
            "partition_share": {k: v / busy for k, v in sorted(self.share.items(), key=lambda kv: -kv[1])}
            if busy else {},
            "idle_s": self.idle_s, "prefill_busy_s": self.prefill_busy_ms / 1e3,
            **drift_tests(ttft, self.reqs),
        }
        return SimResult(self.name, summary, ttft, self.finish)


def _nearest(by_sms: Mapping[int, float], d: int) -> float:
    """The value of the partition nearest to `d` SMs (ties: the smaller)."""
    return by_sms.get(d) or by_sms[min(by_sms, key=lambda k: (abs(k - d), k))]


def _take_chunk(chunk, chunked: WaitingReq | None, waiting: deque,
                yields: bool = False) -> tuple[list, list[str], WaitingReq | None]:
    """Run a fused plan's chunk from the ``chunked`` request's rest and the head of `waiting`
    (``yields``, the plan's: from the head of `waiting` alone, the chunked request staying as it
    is): each piece is priced with the tokens before it as reused context.
    -> (pieces, rids whose prompt is now complete, the request cut short with its rest or None).
    ValueError if the chunk does not start there, or a yield cuts a prompt."""
    pieces, complete, rest = [], [], None
    held = None
    if yields and chunked is not None:
        held, chunked = chunked, None
    for rid, take in chunk:
        if chunked is not None:
            w, chunked = chunked, None
        else:
            w = waiting.popleft() if waiting else None
        if w is None or w.rid != rid or not 0 < take <= w.n or rest is not None:
            raise ValueError(f"Plan.chunk {chunk} is not a prefix of the waiting queue it was made from")
        pieces.append(PrefillReq(take, w.r))
        if take < w.n:
            rest = WaitingReq(rid, w.arrival_s, w.n - take, w.r + take)
        else:
            complete.append(rid)
    if held is not None:
        if rest is not None:
            raise ValueError(f"Plan.chunk {chunk} cuts a prompt while {held.rid} yields (one request mid-prefill)")
        rest = held
    return pieces, complete, rest
