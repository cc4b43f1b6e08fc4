"""Discrete-event simulator: replay a trace with the estimator playing the GPU.

    python -m sglang_mux.sim --table NAME|DIR [--trace conversation|synthetic|FILE]
        [--policy dispatcher|batch-size|fixed:<decode SMs>|all|a,b,...] [--rate R | --time-scale S]
        [--limit N] [--input-cap T] [--tbt-slo-ms 50] [--ttft-slo-ms 5000] [--json] ...

:func:`simulate` replays requests (``traces.load_trace``) under one policy: each decision is a
round lasting one decode iteration (or, without decode, the launched prefill layers); decode
runs at the table's solo time x a co-run slowdown in [1, guard] (``--slowdown``), prefill at its
solo speed per layer (x ``--prefill-slowdown`` beside decode). Host time (``--host-ms`` or
``--host-from``), measured decode jitter and an online guard are optional calibrations. No
KV-capacity limit, no admission limit. Every policy sees the same requests, reuse and draws.

Metrics (``SimResult.summary``): TTFT (s) = first token - arrival; TBT (ms) = gap between a
request's consecutive tokens; SLO attainment = share of requests with TTFT within its SLO
(``--ttft-slo-ms`` + ``--ttft-ms-per-token`` x prompt tokens) and every TBT within
``--tbt-slo-ms``; throughput over first arrival -> last finish; partition time shares; the
drift tests (``sglang_mux.drift``). docs/sim.md gives each modelling choice and its reasons.

Bad arguments or a malformed trace: one ``error:`` line and exit status 2 (``sglang_mux.cli``);
``simulate`` itself raises ValueError on bad options.
"""

from __future__ import annotations

import argparse
import copy
import heapq
import json
import math
import random
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from sglang_mux import cli
from sglang_mux.dispatch import (HOST_STALL_SHARE, DecodeHostTime, Snapshot, WaitingReq, apply_plan,
                                 check_policy_name, fused_ms, make_policy)
from sglang_mux.drift import drift, queue_drift
from sglang_mux.estimator import PrefillReq, fused_batch
from sglang_mux.fused_price import (HYBRID_GRAPH_MAX_TOKENS, SIZE_MIN_OBS, FusedPrice, hybrid_batch_size,
                                     sglang_graph_tokens)
from sglang_mux.mux_args import FUSED_HOST_QUANTILE, MuxArgs
from sglang_mux.traces import BLOCK, BUNDLED, TraceError, TraceReq, load_trace, trace_path  # noqa: F401 (API)

# ---- simulation -----------------------------------------------------------------------------

@dataclass
class SimResult:
    policy: str
    summary: dict
    ttft_s: np.ndarray = field(repr=False)
    finish_s: np.ndarray = field(repr=False)


def _wpct(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """Weighted nearest-rank percentile."""
    if len(values) == 0 or weights.sum() <= 0:
        return float("nan")
    o = np.argsort(values, kind="stable")
    v, c = values[o], np.cumsum(weights[o])
    return float(v[min(len(v) - 1, int(np.searchsorted(c, q / 100.0 * c[-1])))])


def _nearest(by_sms: Mapping[int, float], d: int) -> float:
    """The value of the partition nearest to `d` SMs (ties: the smaller)."""
    return by_sms.get(d) or by_sms[min(by_sms, key=lambda k: (abs(k - d), k))]


def decode_jitter(timeline_path) -> np.ndarray:
    """Measured / planned worst-case decode of a served timeline's co-run iterations."""
    from sglang_mux.mux_metrics import load_timeline

    t = load_timeline(timeline_path)
    need = {"measured_decode_ms", "t_decode_worst_ms", "prefill_sms", "decode_bs"}
    if t.empty or not need <= set(t.columns):
        raise ValueError(f"{timeline_path}: no measured decode iterations (a server's --mux-timeline has them)")
    co = t[t["measured_decode_ms"].notna() & (t["prefill_sms"] > 0) & (t["decode_bs"] > 0)
           & (t["t_decode_worst_ms"] > 0)]
    if co.empty:
        raise ValueError(f"{timeline_path}: no co-run decode iterations to draw jitter from")
    return (co["measured_decode_ms"] / co["t_decode_worst_ms"]).to_numpy(dtype=float)


def fused_jitter(timeline_path) -> np.ndarray:
    """Measured / base price of a served hybrid timeline's fused iterations (`mux_metrics.fused_rows`),
    the server's warm-up batches among them."""
    return _fused_ratios(timeline_path)[0]


def fused_jitter_by_size(timeline_path) -> "FusedJitter":
    """`fused_jitter`'s ratios, and apart for each padded size (the prefill graph's captured size
    of a row's ``extend_tokens``) with SIZE_MIN_OBS of them: served on a lone H100 at TBT 30,
    batches padded to 512 tokens ran 0.99 x their base price and 576-704 ran 1.10-1.13 x
    (bench/results/cap30_lone_h100_s46_2026-11-28/fused_sizes.md); pooled, every size drew ~1.05."""
    ratio, sizes = _fused_ratios(timeline_path)
    by: dict[int, list[float]] = defaultdict(list)
    for r, z in zip(ratio, sizes):
        if z is not None:
            by[z].append(float(r))
    return FusedJitter(ratio, {z: np.asarray(v) for z, v in by.items() if len(v) >= SIZE_MIN_OBS})


def _fused_ratios(timeline_path) -> tuple[np.ndarray, list[int | None]]:
    from sglang_mux.mux_metrics import fused_rows, load_timeline

    try:
        f = fused_rows(load_timeline(timeline_path))
    except ValueError as e:
        raise ValueError(f"{timeline_path}: {e}") from None
    ratio = f["measured_decode_ms"].to_numpy(dtype=float) / f["base_ms"].to_numpy(dtype=float)
    tokens = f["extend_tokens"] if "extend_tokens" in f else [None] * len(f)
    sizes = [hybrid_batch_size(n) for n in tokens]
    keep = np.isfinite(ratio) & (ratio > 0)
    if not keep.any():
        raise ValueError(f"{timeline_path}: no fused iteration whose base price can be recovered")
    return ratio[keep], [z for z, k in zip(sizes, keep) if k]


@dataclass(frozen=True)
class FusedJitter:
    """Served fused measured / base ratios: ``pooled``, and ``by_size`` (padded size -> those of
    that size). `draw` takes a size's own where it has them, else the pooled."""
    pooled: np.ndarray
    by_size: Mapping[int, np.ndarray]

    def draw(self, rng: random.Random, size: int | None) -> float:
        own = self.by_size.get(size) if size is not None else None
        return float(rng.choice(own if own is not None else self.pooled))


def served_host_ms(timeline_path) -> tuple[np.ndarray, np.ndarray]:
    """The loop's host time (>= 0 ms) of a served timeline's decode iterations: (co-run, alone)."""
    from sglang_mux.mux_metrics import host_ms_per_decode, load_timeline

    t = load_timeline(timeline_path)
    h = host_ms_per_decode(t).clip(lower=0.0)
    co = t.loc[h.index, "prefill_sms"].fillna(0) > 0 if "prefill_sms" in t else None
    if co is None or not co.any() or co.all():
        raise ValueError(f"{timeline_path}: needs decode iterations with host_ms laps both beside a prefill and "
                         "alone (a server's --mux-timeline over a benchmark point has both)")
    return h[co].to_numpy(dtype=float), h[~co].to_numpy(dtype=float)


def cell_prefill_solo_ms(estimator, cell: Mapping, prefill_sms: int) -> float:
    """The solo fit's time, on `prefill_sms` SMs, for the layers one prefill launch of a
    ``tables.corun_cells`` cell ran (its launch time is the co-run one to compare with)."""
    return estimator.prefill_ms(prefill_sms, [PrefillReq(cell["n"], cell["r"])]) \
        * cell["layers_per_launch"] / estimator.num_layers


def table_prefill_slowdown(table_dir, estimator) -> dict[int, float]:
    """Per decode partition, the median over the table's co-run cells of the prefill's layer
    launches beside looping decode graphs over the solo fit's time for those layers
    (``tables.corun_cells``: what ``profiling.run`` measured; the fit itself ignores them)."""
    from statistics import median

    from sglang_mux.tables import TableError, corun_cells

    try:
        cells = corun_cells(table_dir)
    except TableError as e:
        raise ValueError(str(e)) from None
    ratios: dict[int, list[float]] = defaultdict(list)
    for c in cells:
        solo = cell_prefill_solo_ms(estimator, c, c["prefill_sms"])
        if solo > 0:
            ratios[int(c["decode_sms"])].append(c["prefill_launch_ms"] / solo)
    return {d: max(1.0, median(v)) for d, v in sorted(ratios.items())}


def simulate(reqs: Sequence[TraceReq], estimator, policy, *, name: str = "policy",
             tbt_slo_ms: float = 50.0, ttft_slo_ms: float = 5000.0, ttft_ms_per_token: float = 0.0,
             slowdown: str = "uniform", seed: int = 0, timeline=None,
             max_rounds: int = 10_000_000, host_ms: float = 0.0, jitter: Sequence[float] | None = None,
             planner=None, prefill_slowdown: float | Mapping[int, float] = 1.0,
             host_draws: tuple[Sequence[float], Sequence[float]] | None = None,
             fused_host_ms: float | Sequence[float] | None = None,
             start_host_ms: Sequence[float] | None = None,
             fused_host_quantile: float = FUSED_HOST_QUANTILE, fused_stalls_apart: bool = True,
             fused_start_host_ms: Sequence[float] | None = None, overlap_decode: bool = True,
             fused_jitter: "Sequence[float] | FusedJitter | None" = None) -> SimResult:
    """Replay `reqs` under `policy`; `estimator` is the ground truth (docs/sim.md: the model).
    ``host_ms``: the loop's host time per decode iteration (decode waits, prefill runs on);
    ``host_draws``: instead, (co-run, decode-alone) host times that each iteration of that kind
    draws from, budgeted as served. ``fused_host_ms``: a fused iteration's host time (None: as a
    co-run decode iteration's, ``host_ms`` or a co-run draw); the policy is told it, or with
    ``host_draws`` budgets it apart from the decode's, as served (``Snapshot.fused_host_ms``). A
    sequence instead: each fused iteration's gap exceeds its GPU time by a draw from it (a served
    timeline's gaps less their planned price, which can be negative), budgeted as served; with
    ``fused_jitter``, draws of the gap less the measured time instead (the jitter carries the rest).
    ``start_host_ms``: host times that a decode iteration starting a layer-wise batch draws from
    instead (SGLang's batch formation and the first launch: a served timeline's), booked to the
    decode's budget and to the starts' own, told the policy as the server does
    (``Snapshot.start_host_ms``; None: starts are not told apart). ``fused_host_quantile``: the
    quantile of the fused overruns that budget books (the server's FUSED_HOST_QUANTILE; a what-if
    may try others); ``fused_stalls_apart``: that quantile leaves out overruns over
    HOST_STALL_SHARE of the SLO, as the server's does (False: books them too, for a what-if).
    ``fused_start_host_ms``: overruns that the first fused iteration of a streak
    (after any other kind) draws from instead, booked to its own budget and told the policy as
    the server does (``Snapshot.fused_start_host_ms``; None: streak starts are not told apart).
    ``overlap_decode``: under a fusing policy (``wants_decode_contexts``), a decode alone with no
    prefill anywhere has no host time in its gap and keeps the fused streak going, as the server's
    ``--mux-overlap-decode`` runs it. ``jitter``: co-run decode takes the truth's worst case times
    a draw from it. ``fused_jitter``: a fused iteration takes the truth's price times a draw from it
    (`fused_jitter` reads a served timeline's; a `FusedJitter`, `fused_jitter_by_size`, draws from
    the iteration's padded size's own where it has them; None: the price exactly, and a learned
    price's margin stays near 0 where served ones held 4-11 ms). ``planner``: the estimator `policy`
    plans with, refined online by every co-run decode and fused iteration (None: nothing is)."""
    fused_draws = None
    if fused_host_ms is not None and not isinstance(fused_host_ms, (int, float)):
        fused_draws, fused_host_ms = [float(x) for x in fused_host_ms], None
        if not fused_draws:
            raise ValueError("fused_host_ms: an empty list of draws (give a number, or served overruns)")
    if host_ms < 0 or (fused_host_ms is not None and fused_host_ms < 0):
        raise ValueError(f"host_ms and fused_host_ms must be >= 0, got {host_ms}, {fused_host_ms}")
    if slowdown not in ("uniform", "worst", "none"):
        raise ValueError(f"slowdown must be uniform, worst or none, got {slowdown!r}")
    pslow = dict(prefill_slowdown) if isinstance(prefill_slowdown, Mapping) else None
    if not all(x >= 1.0 for x in (pslow.values() if pslow is not None else [prefill_slowdown])):
        raise ValueError(f"prefill_slowdown must be >= 1 (co-running never speeds prefill up), got {prefill_slowdown}")
    if planner is estimator:
        raise ValueError("planner must be a copy of the estimator: refining the truth would change the GPU")
    if planner is None and getattr(estimator, "fused_price", None) is not None:
        estimator.fused_price.known = True  # the policy plans with the truth: its price is no prior
    rng = random.Random(seed)
    jit = None if jitter is None else list(jitter)
    fjit = fused_jitter if isinstance(fused_jitter, FusedJitter) or fused_jitter is None else \
        FusedJitter(np.asarray([float(x) for x in fused_jitter]), {})
    if fjit is not None and (not len(fjit.pooled) or min(fjit.pooled) <= 0):
        raise ValueError("fused_jitter: measured / price ratios > 0, at least one")
    hosts = None if host_draws is None else [list(h) for h in host_draws]
    if hosts is not None and (len(hosts) != 2 or not all(h and min(h) >= 0 for h in hosts)):
        raise ValueError("host_draws must be (co-run, decode-alone) lists of host times >= 0 ms, neither empty")
    host_budget = DecodeHostTime() if hosts is not None else None
    starts = None if start_host_ms is None else [float(x) for x in start_host_ms]
    if starts is not None and (not starts or min(starts) < 0):
        raise ValueError("start_host_ms: host times >= 0 ms, at least one")
    start_budget = DecodeHostTime() if starts is not None else None  # P90, as the server books starts
    stall_ms = HOST_STALL_SHARE * tbt_slo_ms if fused_stalls_apart else None
    fused_budget = DecodeHostTime(quantile=fused_host_quantile, stall_ms=stall_ms) \
        if hosts is not None or fused_draws is not None else None  # as served
    fused_starts = None if fused_start_host_ms is None else [float(x) for x in fused_start_host_ms]
    if fused_starts is not None and (not fused_starts or fused_budget is None):
        raise ValueError("fused_start_host_ms: at least one overrun, beside fused_host_ms draws or host_draws")
    fused_start_budget = DecodeHostTime(quantile=fused_host_quantile, stall_ms=stall_ms) \
        if fused_starts is not None else None
    streak = False  # the last iteration was fused: a fused plan continues its streak
    est, L, total = estimator, estimator.num_layers, estimator.total_sms
    wants_ctx = bool(getattr(policy, "wants_decode_contexts", False))
    reqs = sorted(reqs, key=lambda q: q.arrival_s)
    n = len(reqs)
    idx = {q.rid: i for i, q in enumerate(reqs)}
    n_in = np.array([q.n_input for q in reqs], dtype=np.int64)
    out_len = np.array([q.output_len for q in reqs], dtype=np.int64)
    arrival = np.array([q.arrival_s for q in reqs])
    first_tok = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    first_round = np.full(n, -1, dtype=np.int64)
    first_gap = np.full(n, np.nan)

    waiting: deque = deque()
    chunked: WaitingReq | None = None  # part-way through a fused prefill (not in waiting), as SGLang's
    active = paused = None
    progress: dict[int, list] = {}  # id(batch) -> [layers done (fractional), layers launched]
    started: dict[int, tuple[float, float]] = {}  # id(batch) -> (formed at, its plan's T_P)
    dec_bs = dec_ctx = 0
    # Longest decode context: request i's context in decode round k is key_i + k with
    # key_i = n_in[i] + 1 - first_round[i]; a max-heap of keys, finished requests popped lazily.
    ctx_heap: list[tuple[int, int]] = []
    in_decode = np.zeros(n, dtype=bool)
    finish_at: dict[int, list] = defaultdict(list)  # decode round -> requests finishing then
    pending_join: list[int] = []
    taus: list[float] = []  # per decode round: duration (ms) and regular-gap token count
    regular: list[int] = []
    share: dict[str, float] = defaultdict(float)
    reasons: dict[str, int] = defaultdict(int)
    t, nxt, done, rounds, decisions, preemptions, idle_s = 0.0, 0, 0, 0, 0, 0, 0.0
    prefill_busy_ms = 0.0

    def decode_contexts() -> list[int]:
        """Each decoding request's context this round: n_in[i] + 1 + round - first_round[i]."""
        live = np.flatnonzero(in_decode)
        return (n_in[live] + 1 + rounds - first_round[live]).tolist()

    while done < n:
        while nxt < n and reqs[nxt].arrival_s <= t + 1e-12:
            q = reqs[nxt]
            waiting.append(WaitingReq(q.rid, q.arrival_s, q.n_input - q.reused, q.reused))
            nxt += 1
        joined = pending_join
        pending_join = []
        for i in joined:  # prefill finished last round: joins this round's decode
            dec_bs += 1
            dec_ctx += int(n_in[i]) + 1
            first_round[i] = rounds
            in_decode[i] = True
            heapq.heappush(ctx_heap, (-(int(n_in[i]) + 1 - rounds), i))
            finish_at[rounds + int(out_len[i]) - 2].append(i)
        if dec_bs == 0 and active is None and paused is None and not waiting and chunked is None:
            if nxt >= n:
                raise RuntimeError("simulator lost track of requests")  # pragma: no cover
            idle_s += reqs[nxt].arrival_s - t
            t = reqs[nxt].arrival_s
            continue

        bs0 = dec_bs
        while ctx_heap and not in_decode[ctx_heap[0][1]]:
            heapq.heappop(ctx_heap)
        dec_max = -ctx_heap[0][0] + rounds if ctx_heap else 0
        ctxs = decode_contexts() if wants_ctx else None
        plan = policy.plan(Snapshot(t, dec_bs, dec_ctx, decode_max_reused=dec_max, active_prefill=active,
                                    paused_prefill=paused, waiting=waiting,
                                    decode_host_ms=host_ms if host_budget is None else host_budget.value_ms,
                                    decode_contexts=ctxs, chunked=chunked,
                                    fused_host_ms=fused_host_ms if fused_budget is None else fused_budget.budget_ms,
                                    fused_rate_host_ms=None if fused_budget is None else fused_budget.median_ms,
                                    start_host_ms=None if start_budget is None else start_budget.value_ms,
                                    fused_streak=streak,
                                    fused_start_host_ms=None if fused_start_budget is None
                                    else fused_start_budget.value_ms))
        decisions += 1
        reasons[plan.reason] += 1
        active, paused, k = apply_plan(plan, active, paused, waiting)
        for _ in range(k):
            waiting.popleft()
        # A decode alone with no prefill anywhere, under a fusing policy: SGLang's overlap loop
        # runs it (MuxLoop.overlaps), its host time hidden and the fused streak going on.
        overlapped = overlap_decode and wants_ctx and not plan.chunk and dec_bs > 0 \
            and active is None and paused is None and chunked is None
        starts_streak, streak = not streak, bool(plan.chunk) or overlapped
        if plan.preempt:
            preemptions += 1
        if active is not None and id(active) not in progress:
            progress[id(active)] = [float(active.layers_done), active.layers_done]
            started[id(active)] = (t, plan.t_prefill_ms)  # as the server books it (PrefillWall)

        runs_prefill = active is not None and plan.prefill_layers > 0 and plan.prefill_sms > 0
        runs_decode = dec_bs > 0 and plan.decode_sms > 0
        if dec_bs > 0 and not runs_decode:
            raise RuntimeError(f"policy gave no SMs to a decode batch of {dec_bs}: {plan}")
        first_rids: Sequence[str] = active.rids if active is not None else ()
        if runs_prefill:
            layer_ms = est.prefill_ms(plan.prefill_sms, active.reqs) / L
            if runs_decode:
                layer_ms *= prefill_slowdown if pslow is None else _nearest(pslow, plan.decode_sms)
            prog, launched = progress[id(active)]
            # Keep N_PL layers queued beyond the one executing; launched layers stay launched.
            target = max(launched, min(L, math.ceil(prog - 1e-9) + plan.prefill_layers))
            avail_ms = max(0.0, target - prog) * layer_ms
        if plan.chunk:  # fused: the chunk and one token per decoding request in one extend batch
            if runs_prefill:
                raise RuntimeError(f"policy fused a chunk beside a layer-wise prefill: {plan}")
            pieces, first_rids, chunked = _take_chunk(plan.chunk, chunked, waiting)
            fctx = ctxs if ctxs is not None else decode_contexts()
            gpu = fused_ms(est, pieces, fctx)
            if fjit is not None:
                size = est.fused_tokens(pieces, est.decode_rows(fctx)) if fjit.by_size else None
                gpu *= fjit.draw(rng, size)
            if planner is not None and hasattr(planner, "observe_fused"):
                planner.observe_fused(fused_batch(pieces, fctx), gpu)
            first = fused_starts is not None and starts_streak
            if first:
                h = rng.choice(fused_starts)
            elif fused_draws is not None:
                h = rng.choice(fused_draws)
            else:
                h = fused_host_ms if fused_host_ms is not None else host_ms if hosts is None else rng.choice(hosts[0])
            tau = max(gpu + h, 0.5 * gpu)  # a served gap below half its price is not a host time
            if fused_budget is not None:  # as served: the gap against the planned price
                (fused_start_budget if first else fused_budget).observe(tau, plan.t_decode_worst_ms)
            prefill_busy_ms += gpu
        elif runs_decode:
            d = plan.decode_sms
            tau = est.decode_solo_ms(d, dec_bs, dec_ctx, max_reused=dec_max)
            co_run = runs_prefill and d < total
            if co_run:
                pn = sum(r.n for r in active.reqs)
                pr = sum(r.r for r in active.reqs)
            if co_run and jit is not None:
                tau = est.decode_worst_ms(d, dec_bs, dec_ctx, pn, pr, max_reused=dec_max) * rng.choice(jit)
            elif co_run and slowdown != "none":
                g = max(1.0, est.decode_worst_ms(d, dec_bs, dec_ctx, pn, pr, max_reused=dec_max) / tau)
                tau *= g if slowdown == "worst" else rng.uniform(1.0, g)
            if co_run and planner is not None:
                planner.observe_decode(d, dec_bs, dec_ctx, pn, pr, tau, max_reused=dec_max)
            if overlapped:
                h = 0.0
            elif starts is not None and plan.new_prefill_rids:
                h = rng.choice(starts)
                start_budget.observe(tau + h, tau)
            else:
                h = host_ms if hosts is None else rng.choice(hosts[0] if co_run else hosts[1])
            if host_budget is not None and not overlapped:
                host_budget.observe(tau + h, tau)
            tau += h  # a token's gap: the GPU's time, then the loop's
        elif runs_prefill:
            tau = avail_ms
        else:  # nothing can run now (e.g. nothing has arrived that the policy would start)
            if nxt >= n:
                raise RuntimeError(f"policy made no progress with work left: {plan}")
            idle_s += reqs[nxt].arrival_s - t
            t = reqs[nxt].arrival_s
            continue

        completed_at = None
        if runs_prefill:
            prefill_busy_ms += min(avail_ms, tau)
            if avail_ms <= tau + 1e-9:
                prog = float(target)
                if target >= L:  # noticed (event polled) at the round's end: first token then
                    completed_at = t + tau / 1e3
            else:
                prog += tau / layer_ms
            progress[id(active)] = [prog, target]
            active.layers_done = min(L, int(prog + 1e-9))
        elif plan.chunk and first_rids:  # fused: a request whose last piece ran has its first token
            completed_at = t + tau / 1e3
        share["fused" if plan.chunk else f"D{plan.decode_sms}/P{plan.prefill_sms}"] += tau / 1e3
        t_end = t + tau / 1e3

        if runs_decode:
            taus.append(tau)
            regular.append(dec_bs - len(joined))
            for i in joined:
                first_gap[i] = t_end - first_tok[i]
            dec_ctx += dec_bs
            for i in finish_at.pop(rounds, ()):
                finish[i] = t_end
                in_decode[i] = False
                dec_bs -= 1
                dec_ctx -= int(n_in[i] + out_len[i])
                done += 1
            rounds += 1
        if completed_at is not None:
            for rid in first_rids:
                i = idx[rid]
                first_tok[i] = completed_at
                if out_len[i] <= 1:
                    finish[i] = completed_at
                    done += 1
                else:
                    pending_join.append(i)
            if not plan.chunk:
                del progress[id(active)]
                t0, planned = started.pop(id(active))
                if planner is not None and hasattr(planner, "prefill_wall") and not active.preempted_by_other:
                    planner.prefill_wall.observe(planned, (completed_at - t0) * 1e3)
                active = None
        if timeline is not None:
            timeline.write(plan, now=t, policy=name, decode_bs=bs0,
                           measured_decode_ms=tau if runs_decode else None, waiting=len(waiting))
        t = t_end
        if decisions > max_rounds:
            raise RuntimeError("simulation exceeded max_rounds")

    # ---- metrics ----
    ttft = first_tok - arrival
    tau_a = np.asarray(taus)
    reg_w = np.asarray(regular, dtype=float)
    fg = first_gap[~np.isnan(first_gap)]
    tbt_v = np.concatenate([tau_a, fg * 1e3])
    tbt_w = np.concatenate([reg_w, np.ones(len(fg))])
    max_tbt = np.zeros(n)
    for i in range(n):
        m = int(out_len[i]) - 1
        if m >= 1 and first_round[i] >= 0:
            fr = int(first_round[i])
            seg = tau_a[fr + 1: fr + m]
            max_tbt[i] = max(first_gap[i] * 1e3, seg.max() if len(seg) else 0.0)
    ttft_ok = ttft * 1e3 <= ttft_slo_ms + ttft_ms_per_token * n_in
    ok = ttft_ok & (max_tbt <= tbt_slo_ms)
    makespan = float(np.nanmax(finish) - arrival.min())
    busy = sum(share.values())
    summary = {
        "policy": name, "requests": n,
        "ttft_p50_s": float(np.percentile(ttft, 50)), "ttft_p99_s": float(np.percentile(ttft, 99)),
        "tbt_p50_ms": _wpct(tbt_v, tbt_w, 50), "tbt_p99_ms": _wpct(tbt_v, tbt_w, 99),
        "ttft_attainment": float(np.mean(ttft_ok)),
        "tbt_attainment": float(tbt_w[tbt_v <= tbt_slo_ms].sum() / tbt_w.sum()) if tbt_w.sum() else 1.0,
        "slo_attainment": float(ok.mean()),
        "throughput_tok_s": float(out_len.sum() / makespan) if makespan > 0 else float("nan"),
        "throughput_req_s": float(n / makespan) if makespan > 0 else float("nan"),
        "makespan_s": makespan, "preemptions": preemptions, "decisions": decisions,
        "decode_iterations": rounds, "reasons": dict(reasons),
        "partition_share": {k: v / busy for k, v in sorted(share.items(), key=lambda kv: -kv[1])} if busy else {},
        "idle_s": idle_s, "prefill_busy_s": prefill_busy_ms / 1e3,
        **drift_tests(ttft, reqs),
    }
    return SimResult(name, summary, ttft, finish)


def _take_chunk(chunk, chunked: WaitingReq | None, waiting: deque) -> tuple[list, list[str], WaitingReq | None]:
    """Run a fused plan's chunk from the ``chunked`` request's rest and the head of `waiting`:
    each piece is priced with the tokens before it as reused context.
    -> (pieces, rids whose prompt is now complete, the request cut short with its rest or None).
    ValueError if the chunk does not start there."""
    pieces, complete, rest = [], [], None
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
    return pieces, complete, rest


def drift_tests(ttft_s: np.ndarray, reqs: Sequence[TraceReq]) -> dict:
    """The benchmark's own drift test and its length-aware twin (sglang_mux.drift), so that a
    simulated point is judged as a served one; `reqs` in arrival order, `ttft_s` theirs."""
    ms = np.asarray(ttft_s) * 1e3
    return {"ttft_drift": drift(ms), "ttft_queue_drift": queue_drift(ms, [q.n_input - q.reused for q in reqs])}


# ---- CLI ------------------------------------------------------------------------------------

def policy_names(spec: str, estimator) -> list[str]:
    """``--policy``'s names: 'all' is every policy (each decode partition for fixed), else a comma
    list, each checked (dispatch.check_policy_name: a UsageError saying what is offered)."""
    if spec == "all":
        return ["dispatcher", "batch-size"] + [f"fixed:{d}" for d in estimator.decode_sms_options] + ["hybrid"]
    names = [s.strip() for s in spec.split(",") if s.strip()]
    if not names:
        raise cli.UsageError(f"--policy {spec!r} names no policy; give dispatcher, hybrid, batch-size, fixed:<decode SMs>, "
                             "all, or a comma list of them")
    for nm in names:
        check_policy_name(nm, estimator)
    return names


def through_prefill_graph(estimator, max_tokens: int):
    """``estimator`` as a server whose SGLang prefill CUDA graph is captured up to ``max_tokens``
    prices a fused batch: a copy padding it to the graph's sizes (``graph_tokens``); one without
    ``graph_tokens`` (a stand-in) as it is."""
    if not hasattr(estimator, "graph_tokens"):
        return estimator
    est = copy.copy(estimator)
    est.graph_tokens = sglang_graph_tokens(max_tokens)
    return est


def run_policies(reqs, estimator, spec: str = "dispatcher", *, tbt_slo_ms: float = 50.0,
                 ttft_slo_ms: float = 5000.0, ttft_ms_per_token: float = 0.0, preemption: bool = True,
                 slowdown: str = "uniform", seed: int = 0, timeline=None, host_ms: float = 0.0,
                 jitter: Sequence[float] | None = None, online_guard: bool = False,
                 prefill_slowdown: float | Mapping[int, float] = 1.0,
                 host_draws: tuple[Sequence[float], Sequence[float]] | None = None,
                 fused_host_ms: float | Sequence[float] | None = None, prefill_graph: bool = False,
                 start_host_ms: Sequence[float] | None = None,
                 fused_host_quantile: float = FUSED_HOST_QUANTILE, fused_stalls_apart: bool = True,
                 fused_start_host_ms: Sequence[float] | None = None,
                 fused_jitter: "Sequence[float] | FusedJitter | None" = None,
                 layerwise_max_tokens: int | None = None) -> list[SimResult]:
    """``online_guard``: each policy plans with its own copy of `estimator`, whose guard serving
    refines online and whose fused price starts from the server's prior and learns each fused
    iteration's true time; False: it plans with `estimator` itself. ``prefill_graph``: fused
    batches run through SGLang's prefill CUDA graph, as the server's hybrid runs them: padded to
    its captured sizes (``graph_tokens``, for the truth and the planner), and a table's price prior
    acted on in full from the start (`Estimator.fused_prior_holds`). ``layerwise_max_tokens``: the
    hybrid's (the longest prompt one layer-wise prefill holds in the served server's memory,
    `sglang_mux.prefill_memory`; a longer one is fused in chunks; None: no limit). The rest:
    ``simulate``'s."""
    out = []
    if prefill_graph:
        estimator = through_prefill_graph(estimator, HYBRID_GRAPH_MAX_TOKENS)
    for nm in policy_names(spec, estimator):
        planner = None
        if online_guard:
            planner = copy.deepcopy(estimator)
            if hasattr(planner, "fused_price"):  # as a server starts: the prior, learned from what runs
                planner.fused_price = FusedPrice(prior_holds=planner.fused_prior_holds())
        # The hybrid weighs a partition's prefill at its served speed. Learning online, it learns
        # that as the server does (the planner's prefill_wall: batches' wall time over their T_P)
        # and is told nothing; else the simulator tells it the co-run slowdown it plays.
        kw = {"prefill_slowdown": 1.0 if online_guard else prefill_slowdown,
              "layerwise_max_tokens": layerwise_max_tokens} if nm == "hybrid" else {}
        pol = make_policy(nm, planner or estimator, tbt_slo_ms=tbt_slo_ms, ttft_slo_ms=ttft_slo_ms,
                          preemption=preemption, ttft_ms_per_token=ttft_ms_per_token, **kw)
        out.append(simulate(reqs, estimator, pol, name=nm, tbt_slo_ms=tbt_slo_ms, ttft_slo_ms=ttft_slo_ms,
                            ttft_ms_per_token=ttft_ms_per_token, slowdown=slowdown, seed=seed,
                            timeline=timeline, host_ms=host_ms, jitter=jitter, planner=planner,
                            prefill_slowdown=prefill_slowdown, host_draws=host_draws, fused_host_ms=fused_host_ms,
                            start_host_ms=start_host_ms, fused_host_quantile=fused_host_quantile,
                            fused_stalls_apart=fused_stalls_apart, fused_start_host_ms=fused_start_host_ms,
                            fused_jitter=fused_jitter))
    return out


def _table(results: list[SimResult]) -> str:
    cols = [("policy", "{:<14}"), ("ttft_p50_s", "{:>9.2f}"), ("ttft_p99_s", "{:>9.2f}"),
            ("tbt_p99_ms", "{:>9.1f}"), ("slo_attainment", "{:>7.1%}"), ("ttft_attainment", "{:>7.1%}"),
            ("tbt_attainment", "{:>7.1%}"), ("throughput_tok_s", "{:>8.0f}"), ("preemptions", "{:>5d}")]
    head = ["policy", "TTFT50s", "TTFT99s", "TBT99ms", "SLO%", "TTFT%", "TBT%", "tok/s", "pre"]
    w = [14, 9, 9, 9, 7, 7, 7, 8, 5]
    lines = [" ".join(h.rjust(x) if i else h.ljust(x) for i, (h, x) in enumerate(zip(head, w)))]
    for r in results:
        s = r.summary
        lines.append(" ".join(f.format(s[c]) for c, f in cols))
    lines.append("")
    for r in results:
        top = ", ".join(f"{k} {v:.0%}" for k, v in list(r.summary["partition_share"].items())[:5])
        lines.append(f"{r.policy:<14} partitions: {top}")
    return "\n".join(lines)


def add_trace_args(ap: argparse.ArgumentParser) -> None:
    """The replayed requests, their arrivals and the SLOs (this simulator's and sim_chunked's)."""
    pos, nonneg = cli.positive, lambda kind: cli.positive(kind, allow_zero=True)
    ap.add_argument("--trace", default="conversation", help="trace file (JSON lines), or bundled: conversation | "
                    "synthetic")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--rate", type=pos(float), help="rescale arrivals to this many requests/s")
    g.add_argument("--time-scale", type=pos(float), help="multiply inter-arrival times by this")
    ap.add_argument("--arrival", choices=("trace", "poisson"), default="trace",
                    help="trace timestamps (bursty: rounded to 3 s), or Poisson at --rate "
                         "(the draws bench.run --arrival poisson uses)")
    ap.add_argument("--limit", type=pos(int), help="first N requests of the trace")
    ap.add_argument("--session-sample", type=int, default=1, metavar="K",
                    help="keep one session in K, every turn of it (as bench.run --session-sample)")
    ap.add_argument("--input-cap", type=pos(int), help="truncate prompts to this many tokens")
    ap.add_argument("--cache-tokens", type=pos(int), help="prefix cache capacity in tokens (LRU); default unbounded")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tbt-slo-ms", type=pos(float), default=50.0, help="time-between-tokens SLO (ms)")
    ap.add_argument("--ttft-slo-ms", type=pos(float), default=5000.0, help="time-to-first-token SLO (ms)")
    ap.add_argument("--table", help="a shipped table's name (e.g. llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3) or a "
                    "contention_tables/<model>__<gpu>__<backend>/ dir; the estimator plays the GPU")


def trace_from_args(ap: argparse.ArgumentParser, a: argparse.Namespace) -> list[TraceReq]:
    """``load_trace`` for the parsed arguments; a missing or malformed trace is a usage error."""
    if a.session_sample < 1:
        ap.error("--session-sample K keeps one session in K: give K >= 1 (1 keeps the whole trace)")
    try:
        return load_trace(a.trace, limit=a.limit, input_cap=a.input_cap, rate=a.rate, time_scale=a.time_scale,
                          cache_tokens=a.cache_tokens, arrival=a.arrival, seed=a.seed,
                          session_sample=a.session_sample)
    except FileNotFoundError as e:
        ap.error(f"--trace: {e.args[0] if e.args else e}")
    except ValueError as e:  # TraceError, and options load_trace refuses
        ap.error(f"--trace {a.trace}: {e}")


def estimator_from_args(ap: argparse.ArgumentParser, a: argparse.Namespace, estimator):
    """The given estimator (tests), else the ``--table``'s; neither is a usage error."""
    if estimator is not None:
        return estimator
    if not a.table:
        ap.error("the following arguments are required: --table (a shipped table's name or a table dir)")
    from sglang_mux.estimator import from_table_arg

    return from_table_arg(ap, a.table)


def main(argv: Sequence[str] | None = None, estimator=None) -> int:
    ap = cli.ArgumentParser(prog="python -m sglang_mux.sim", description=__doc__.split("\n")[0])
    add_trace_args(ap)
    ap.add_argument("--policy", default=MuxArgs.policy, help="hybrid | dispatcher | batch-size | fixed:<decode SMs> | "
                    "all | comma list")
    ap.add_argument("--ttft-ms-per-token", type=cli.positive(float, allow_zero=True), default=0.0,
                    help="length-aware TTFT SLO: += this x prompt tokens (preemption needs it > 0)")
    ap.add_argument("--no-preemption", action="store_true")
    ap.add_argument("--slowdown", choices=("uniform", "worst", "none"), default="uniform",
                    help="actual co-run decode slowdown: U(1, guard), the guard, or none")
    hg = ap.add_mutually_exclusive_group()
    hg.add_argument("--host-ms", type=cli.positive(float, allow_zero=True), default=0.0,
                    help="the loop's host time per decode iteration (ms; measure it with bench.timeline_profile); "
                         "the dispatcher budgets it as the server does")
    hg.add_argument("--host-from", metavar="TIMELINE",
                    help="draw each decode iteration's host time from a served --mux-timeline (.jsonl or .xz) "
                         "instead; the dispatcher budgets their recent P90 as the server does")
    ap.add_argument("--fused-host-ms", type=cli.positive(float, allow_zero=True), default=None,
                    help="host time of a fused iteration (--policy hybrid; default: a co-run decode iteration's, "
                         "--host-ms or a --host-from draw)")
    ap.add_argument("--fused-price", metavar="FIXED_MS,SLOPE",
                    help="a fused iteration's GPU time as served: FIXED_MS + SLOPE x its base price (the server's "
                         "learned fused_price, a --mux-timeline's fused rows; default: the solo price)")
    ap.add_argument("--decode-jitter", metavar="TIMELINE",
                    help="a served point's --mux-timeline (.jsonl or .xz): co-run decode takes the table's worst "
                         "case times a draw of its measured / worst-case ratios (overrides --slowdown there)")
    ap.add_argument("--fused-jitter", metavar="TIMELINE",
                    help="a served hybrid point's --mux-timeline: a fused iteration takes its price times a draw "
                         "of that timeline's fused measured / base ratios (default: the price exactly)")
    ap.add_argument("--prefill-slowdown", default="1", metavar="X|table",
                    help="prefill beside a decode runs X times its table estimate, or per decode partition as the "
                         "table's co-run cells measured it ('table'); 1 is the paper's model")
    ap.add_argument("--online-guard", action="store_true",
                    help="the policy plans with a guard raised online to what serving measures, and a fused price "
                         "learned from the base price up, as the server's are (default: the table's guard and the "
                         "true fused price)")
    ap.add_argument("--prefill-graph", action="store_true",
                    help="fused batches run through SGLang's prefill CUDA graph, as the server's hybrid runs them: "
                         "padded to its captured sizes, and with --online-guard the fused price's prior (the base "
                         "price) acted on in full from the start")
    ap.add_argument("--timeline", help="append every decision to this JSONL file")
    ap.add_argument("--json", action="store_true", help="print the summaries as JSON")
    a = ap.parse_args(argv)
    if a.prefill_slowdown != "table":
        try:
            a.prefill_slowdown = float(a.prefill_slowdown)
        except ValueError:
            ap.error(f"--prefill-slowdown takes a number X >= 1 or 'table', got {a.prefill_slowdown!r}")
        if not a.prefill_slowdown >= 1.0:
            ap.error(f"--prefill-slowdown X multiplies prefill beside decode: give X >= 1, got {a.prefill_slowdown}")

    def from_timeline(flag, read, path):
        try:
            return read(path) if path else None
        except (OSError, ValueError) as e:
            ap.error(f"{flag}: {e}")

    jitter = from_timeline("--decode-jitter", decode_jitter, a.decode_jitter)
    fjitter = from_timeline("--fused-jitter", fused_jitter, a.fused_jitter)
    host_draws = from_timeline("--host-from", served_host_ms, a.host_from)
    estimator = estimator_from_args(ap, a, estimator)
    if a.fused_price:
        try:
            fixed, slope = (float(x) for x in a.fused_price.split(","))
        except ValueError:
            ap.error(f"--fused-price takes FIXED_MS,SLOPE (e.g. 15.1,0.85), got {a.fused_price!r}")
        if fixed < 0 or slope <= 0:
            ap.error(f"--fused-price: FIXED_MS >= 0 and SLOPE > 0, got {a.fused_price!r}")
        estimator.fused_price.fixed, estimator.fused_price.slope = fixed, slope
    try:
        policy_names(a.policy, estimator)
    except cli.UsageError as e:
        ap.error(str(e))
    prefill_slowdown = a.prefill_slowdown
    if prefill_slowdown == "table":
        if not a.table:
            ap.error("--prefill-slowdown table needs --table")
        try:
            from sglang_mux.tables import resolve_table

            prefill_slowdown = table_prefill_slowdown(resolve_table(a.table), estimator)
        except ValueError as e:
            ap.error(f"--prefill-slowdown table: {e}")
    reqs = trace_from_args(ap, a)
    tl = None
    if a.timeline:
        from sglang_mux.mux_metrics import TimelineWriter

        tl = TimelineWriter(a.timeline)
    try:
        res = run_policies(reqs, estimator, a.policy, tbt_slo_ms=a.tbt_slo_ms, ttft_slo_ms=a.ttft_slo_ms,
                           ttft_ms_per_token=a.ttft_ms_per_token, preemption=not a.no_preemption, slowdown=a.slowdown,
                           seed=a.seed, timeline=tl, host_ms=a.host_ms, jitter=jitter, online_guard=a.online_guard,
                           prefill_slowdown=prefill_slowdown, host_draws=host_draws, fused_host_ms=a.fused_host_ms,
                           prefill_graph=a.prefill_graph, fused_jitter=fjitter)
    finally:
        if tl is not None:
            tl.close()
    setup = {"trace": a.trace, "requests": len(reqs), "rate": a.rate, "time_scale": a.time_scale,
             "arrival": a.arrival, "host_ms": a.host_ms, "host_from": a.host_from, "decode_jitter": a.decode_jitter,
             "fused_jitter": a.fused_jitter,
             "online_guard": a.online_guard, "prefill_slowdown": prefill_slowdown, "fused_host_ms": a.fused_host_ms,
             "fused_price": a.fused_price, "prefill_graph": a.prefill_graph,
             "input_cap": a.input_cap, "cache_tokens": a.cache_tokens, "tbt_slo_ms": a.tbt_slo_ms,
             "ttft_slo_ms": a.ttft_slo_ms, "ttft_ms_per_token": a.ttft_ms_per_token, "preemption": not a.no_preemption,
             "slowdown": a.slowdown, "seed": a.seed,
             "offered_req_s": (len(reqs) - 1) / reqs[-1].arrival_s if reqs[-1].arrival_s > 0 else None,
             "mean_input": float(np.mean([q.n_input for q in reqs])),
             "reused_share": float(sum(q.reused for q in reqs) / max(1, sum(q.n_input for q in reqs)))}
    if a.json:
        print(json.dumps({"setup": setup, "results": [r.summary for r in res]}, indent=1))
    else:
        print(" ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in setup.items()))
        print(_table(res))
    return 0


if __name__ == "__main__":
    cli.run(main)
