"""The hybrid policy: per iteration a fused mixed chunk on the whole GPU or the dispatcher's
spatial partition, whichever advances prefill most while decode meets its TBT SLO.

Rules, in order (inputs: the Snapshot; times ms; rates prompt tokens per ms):
0. A request part-way through a fused prefill (``snap.chunked``): fused, its rest first, then the
   waiting requests as rule 3's fused candidate takes them (the last one may be cut), the largest
   chunk that fits (none fits: its rest alone, up to the smallest size; it holds KV and must move
   on). A cut commits to fusing the prompt's rest, so rule 3 prices it as this rule runs it
   (`HybridPolicy.commitment`). It yields: with preemption on and more than this chunk left, the
   largest fused chunk of whole waiting prompts from the head of the queue that meets the budget
   runs instead when that delay would not make the chunked request miss its TTFT SLO (its rest
   priced as this rule runs it, `commitment`; `HybridPolicy.yielding_plan`): behind a prompt
   longer than the largest chunk size at once, behind a shorter one only if they would miss their
   own SLO behind its rest. A long prompt's rest can hold short ones for seconds, and waiting out
   their slack behind it is head-of-line blocking all the same; a chunk of them costs it one
   iteration. A shorter prompt's rest is an iteration or two: yielding to every short prompt
   there only moves the wait onto it (sharegpt at TBT 30 in the simulator: 72 req/s to 66).
   Where the queue's head fits no chunk whole, it parks instead (`HybridPolicy.parking_plan`):
   with nothing parked yet, the head is chunked in its place when it would miss its TTFT SLO
   behind the chunked rest and the chunked request meets its own after the head's whole prefill;
   the parked request is SGLang's chunked request again once the head is done, and while it is
   parked nobody else is cut anew.
1. A prefill batch in flight (active or paused): the dispatcher's plan. A layer-wise prefill is
   finished where it started, never dropped or turned into chunks (preemption as its rule 4).
2. Nothing waiting: the dispatcher's plan (decode alone, or idle).
3. Else two candidates, both priced by the estimator:
   fused: for each size c (`HybridPolicy.sizes`), the chunk is the waiting requests' remaining
     prompt tokens first come, first served (the last one cut, at most ``max_prefill_bs``
     requests; while ``est.fused_price.learned`` is false, cut only if its rest fits one more such
     chunk), up to c less the decode rows (none if they fill it: the batch is c tokens, as SGLang
     counts a mixed chunk's budget); its price t_f = ``est.fused_ms(chunk, decode rows)``. The
     largest chunk with t_f <= the TBT SLO less a fused iteration's overrun
     (``snap.fused_host_ms``, else ``decode_host_ms``; for a streak's first, ``not
     snap.fused_streak``, the larger of that and ``snap.fused_start_host_ms``) is the candidate;
     rate = the tokens it commits to (`HybridPolicy.commitment`) over their time: each chunk's t_f
     less the price's tail allowance (`HybridPolicy.fused_tail_ms`) plus the median overrun
     (``snap.fused_rate_host_ms``, else the budget's). None fits: no fused candidate.
   spatial: the dispatcher's plan for a new batch, rate = its new tokens / (T_P x s x w): T_P its
     estimated time on its prefill SMs, s = ``prefill_slowdown`` beside a decode (1 alone), w =
     ``est.prefill_wall.factor``; 0 when it holds prefill back (overload-decode-first). Its decode
     is budgeted for the SLO less ``snap.start_host_ms`` (``budget_starts``).
   The higher rate wins; ties go to spatial. A streak's first fused iteration is sized for its own
   budget but weighed at the rate of the streak it starts.
   A queue head of more new tokens than ``layerwise_max_tokens`` (what one layer-wise prefill's
   activations can hold, `sglang_mux.prefill_memory`; None: no limit) has no spatial candidate: it
   is fused in chunks (rule 3's largest that fits, else the smallest; rule 0 runs its rest), and it
   preempts nothing.
No chunk budget to tune: the TBT SLO sets the size. docs/engine.md gives each rule's reasons.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from typing import Mapping, Sequence

from sglang_mux.latency_model.terms import PrefillReq
from sglang_mux.policy.dispatcher import MuxDispatcher
from sglang_mux.policy.plan import FusedPlan, Plan, SpatialPlan
from sglang_mux.policy.protocol import EstimatorLike
from sglang_mux.policy.slo import SLO
from sglang_mux.policy.snapshot import Snapshot, WaitingReq, decode_contexts

CHUNK_SIZES = (256, 512, 1024, 2048, 4096)  # fused chunk sizes the hybrid policy prices (tokens)
# Above this only CHUNK_SIZES are priced: finer captured sizes past it are not (docs/engine.md).
FINE_SIZES_UP_TO = 1024
# A fused candidate's commitment prices a cut prompt's rest in at most this many spans, each at the
# largest chunk that meets the budget there (keeps a decision's cost bounded for a long rest).
COMMIT_SPANS = 4


class HybridPolicy(MuxDispatcher):
    """The rules above. ``chunk_sizes``: the fused sizes priced (positive); ``prefill_slowdown``
    (>= 1, or {decode SMs: factor}, the nearest partition's used): how much slower prefill runs
    beside decode than T_P says (1 in the server, whose estimator's online prefill correction is in
    T_P already; a simulator passes the slowdown it plays). Raises ValueError at construction for
    bad sizes, a slowdown below 1, or a ``layerwise_max_tokens`` under ``max_prefill_tokens``."""

    wants_decode_contexts = True
    fuses_long_prompts = True

    def __init__(self, estimator: EstimatorLike, slo: SLO = SLO(), *, preemption: bool = True,
                 max_prefill_tokens: int = 16384, max_prefill_bs: int = 64, chunk_sizes: Sequence[int] = CHUNK_SIZES,
                 prefill_slowdown: float | Mapping[int, float] = 1.0, layerwise_max_tokens: int | None = None,
                 fcfs: bool = False):
        super().__init__(estimator, slo, preemption=preemption, max_prefill_tokens=max_prefill_tokens,
                         max_prefill_bs=max_prefill_bs, budget_starts=True, fcfs=fcfs)
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
        every size SGLang's prefill CUDA graph captured (``est.graph_tokens``) but those a larger
        one beats (``est.graph_cliffs``: their prices are not monotone in the size, which the
        bisection needs). The finer steps let a tight TBT budget take the largest chunk that fits,
        not the power of two below it."""
        lo = self.chunk_sizes[0]
        slow = self.est.graph_cliffs
        fine = {c for c in self.est.graph_tokens if lo <= c <= FINE_SIZES_UP_TO and c not in slow}
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
        """What the fused price adds for its tail (``est.fused_price.margin``): the budget holds
        it, a rate does not (a rate's time is the median's, as a spatial rate's T_P is a mean)."""
        return max(self.est.fused_price.margin, 0.0)

    def too_long(self, w: WaitingReq) -> bool:
        """Whether one layer-wise prefill cannot hold ``w``'s new tokens (``layerwise_max_tokens``)."""
        return self.layerwise_max_tokens is not None and w.n > self.layerwise_max_tokens

    def fused_terms(self, snap: Snapshot) -> tuple[float, float, object]:
        """(TBT budget of a fused iteration, host ms a chunk adds to its price in a rate, the decode
        rows' contexts summed for `Estimator.fused_ms`)."""
        host = max(snap.decode_host_ms if snap.fused_host_ms is None else snap.fused_host_ms, 0.0)
        if not snap.fused_streak and snap.fused_start_host_ms is not None:  # a streak's first: never less
            host = max(host, snap.fused_start_host_ms)
        budget = self.tbt_budget_ms(snap, host)
        if snap.fused_rate_host_ms is not None:  # the rate's time is the median's, the budget the tail's
            host = max(snap.fused_rate_host_ms, 0.0)
        host -= self.fused_tail_ms()  # and each chunk's GPU time the price less its tail (`fused_tail_ms`)
        return budget, host, self.est.decode_rows(decode_contexts(snap))  # ctx: summed once for many prices

    def fused_candidate(self, snap: Snapshot, force: bool = False, whole: bool = False,
                        terms: tuple | None = None) -> tuple[Plan, float] | None:
        """The largest fused chunk that meets the TBT budget and its rate over what it commits to
        (`commitment`); None if none does. ``force`` (rule 0, or a queue head too long for a
        layer-wise prefill): the smallest chunk if none fits, rated alone. ``whole``: no prompt
        is cut (the chunk ends before the first that does not fit). ``terms``: `fused_terms` of
        ``snap`` when the caller has them (they do not depend on the chunked request)."""
        budget, host, ctx = terms if terms is not None else self.fused_terms(snap)
        # On an unlearned price (the prior) a cut commits to one more chunk at most: a long prompt
        # cut on it would hold the loop fused for its every chunk once the true price is known.
        learned = self.est.fused_price.learned
        head_too_long = snap.chunked is None and bool(snap.waiting) and self.too_long(snap.waiting[0])
        chunks = self._chunks(snap, rest_chunks=0 if whole else None if learned or head_too_long else 1)
        if force and snap.chunked is not None:  # at worst the chunked request's rest alone, nobody cut anew
            w = snap.chunked
            chunks = [(0, [(w, min(w.n, self.chunk_sizes[0]))])] + chunks
        if not chunks:
            return None
        price = [None] * len(chunks)

        def t_f(i: int) -> float:
            if price[i] is None:
                price[i] = self.est.fused_ms([PrefillReq(take, w.r) for w, take in chunks[i][1]], ctx)
            return price[i]

        # The price grows with the chunk: the largest that fits, by bisection (dozens of sizes).
        lo, hi = 0, len(chunks) - 1
        if t_f(0) > budget and not force:
            return None
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if t_f(mid) <= budget else (lo, mid - 1)
        room, ch = chunks[lo]
        plan = FusedPlan(chunk=tuple((w.rid, take) for w, take in ch), t_ms=t_f(lo), total_sms=self.total)
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
        throughout would miss that. Where ``size`` fits to the end this is the rest in chunks of
        ``size`` priced at the first and last prefix. ``host``:
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
        price = lambda n, x: self.est.fused_ms([PrefillReq(n, x)], ctx)  # noqa: E731
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

    def yielding_plan(self, snap: Snapshot, rest: FusedPlan, terms: tuple) -> FusedPlan | None:
        """Rule 0's yield: a fused chunk of whole waiting prompts in place of ``rest`` (the
        chunked request's next chunk), or None. ``snap.chunked`` yields when preemption is on,
        ``rest`` does not finish it, the queue's head fits a chunk whole (the waiting prompts'
        batch: in queue order, whole prompts, the largest that meets the TBT budget), the chunked
        request would still meet its own TTFT deadline after it (its rest: `commitment`'s chunks
        from ``rest``'s take on, each with its host time) and, where the chunked prompt is no
        longer than the largest chunk size, the batch would miss its own deadline behind that
        rest. ``terms``: `fused_terms` of ``snap``."""
        long = snap.chunked
        take = next((t for rid, t in rest.chunk if rid == long.rid), 0)
        if not self.preemption or not snap.waiting or not 0 < take < long.n:
            return None
        # The rest as rule 0 will run it: later chunks attend over a longer prefix and may shrink
        # to meet the budget, and each adds its host time (`commitment`).
        budget, host, ctx = terms
        t_rest = self.commitment(((long, take),), take, rest.t_ms, ctx, host, budget, snap.decode_bs)[1]
        long_deadline_s = long.arrival_s + self.slo.ttft_ms_for(long.n + long.r) * 1e-3
        if snap.now_s + t_rest * 1e-3 > long_deadline_s:
            return None  # any delay would make it miss its own (checked before pricing a chunk)
        short = self.fused_candidate(replace(snap, chunked=None), whole=True, terms=terms)
        if short is None:  # the queue's head does not fit a chunk whole: it is not short
            return self.parking_plan(snap, t_rest, long_deadline_s, terms)
        plan = short[0]
        both_done_s = snap.now_s + (t_rest + plan.t_ms) * 1e-3
        if both_done_s > long_deadline_s:
            return None  # the chunked request would miss its own because of the delay
        if long.n + long.r <= self.chunk_sizes[-1]:  # a prompt one chunk could hold blocks little:
            ws = list(itertools.islice(snap.waiting, len(plan.chunk)))  # they go first only if they
            if both_done_s <= self._new_batch(ws).deadline_s:  # would miss their deadline behind it
                return None
        return replace(plan, yields=True)

    def parking_plan(self, snap: Snapshot, t_rest: float, long_deadline_s: float, terms: tuple) -> FusedPlan | None:
        """Rule 0's park: the queue's head, which fits no chunk whole, chunked in place of the
        chunked request (parked until the head is done), or None. Nothing may be parked yet; the
        head's whole prefill as rule 0 would run it (its fused candidate's `commitment`) must miss
        its TTFT deadline after ``t_rest`` ms (the chunked rest) and the chunked request still
        meet its own (``long_deadline_s``) after both."""
        if snap.parked is not None:
            return None  # one request parked at a time
        head = snap.waiting[0]
        cand = self.fused_candidate(replace(snap, chunked=None, waiting=(head,)), terms=terms)
        if cand is None or cand[0].chunk[0][1] >= head.n:
            return None  # no chunk of it meets the budget (or it fits whole after all)
        both_s = snap.now_s + (t_rest + head.n / cand[1]) * 1e-3  # its rate is over its whole prefill
        if both_s <= self._new_batch([head]).deadline_s or both_s > long_deadline_s:
            return None  # it meets its deadline waiting, or the parked request would miss its own
        return replace(cand[0], parks=True)

    def spatial_rate(self, plan: Plan, snap: Snapshot) -> float:
        """Prompt tokens per ms of a spatial plan that starts a new batch (0: prefill held)."""
        if not isinstance(plan, SpatialPlan) or plan.t_prefill_ms <= 0.0:
            return 0.0
        k = len(plan.new_prefill_rids)
        slow = self.corun_slowdown(plan.decode_sms) if snap.decode_bs > 0 and plan.decode_sms > 0 else 1.0
        wall = self.est.prefill_wall.factor
        return sum(w.n for w in itertools.islice(snap.waiting, k)) / (plan.t_prefill_ms * slow * wall)

    def plan(self, snap: Snapshot) -> Plan:
        if snap.chunked is not None:  # rule 0
            if snap.active_prefill is not None or snap.paused_prefill is not None:
                raise ValueError("a fused prefill and a layer-wise one cannot both be in flight")
            terms = self.fused_terms(snap)  # once for the rest and the yield's candidate
            # With a request parked nobody else is cut anew: the parked one resumes next.
            rest = self.fused_candidate(snap, force=True, whole=snap.parked is not None, terms=terms)[0]
            return self.yielding_plan(snap, rest, terms) or rest
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
