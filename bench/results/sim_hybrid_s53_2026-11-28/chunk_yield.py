"""What-if (not adopted): the hybrid's chunked request yields. CPU, repository root:

    D=bench/results/sim_hybrid_s53_2026-11-28
    PYTHONPATH=. python $D/chunk_yield.py map /tmp/chunk_yield_map.json > $D/chunk_yield_map.md   # ~1.5 min
    PYTHONPATH=. python $D/chunk_yield.py 70b > $D/chunk_yield_70b.md                           # ~40 s

A prompt fused in chunks holds the queue until its last chunk, as SGLang's chunked request does,
and rule 4's preemption never reaches it: on the 70B's uncapped cell (seed 1, 0.075 req/s) a
36K-token prompt ran ~6 s of chunks while a 4.7K and a 7.7K one that arrived within 0.7 s waited,
and the point's P99 went 2.92 s over its TTFT rule. Here (`Yielding.yielding_plan`) the chunked request
goes to the back of the queue when a waiting prompt would miss its deadline behind its rest and
meet it if the queue ran first, and it still meets its own after every prompt waiting then; once
per request. ``map``: this folder's map of record with it; ``70b``: uncapped_70b.md's table with it
(chunked prefill's rows are unchanged). Played by patching the simulator; the server has no
such rule (SGLang keeps one chunked request and always continues it first)."""
import dataclasses
import math
import runpy
import sys
from pathlib import Path

from bench.analysis import sim_hybrid_map as M
from sglang_mux import dispatch as D, sim


class Yielding(D.HybridPolicy):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.yielded: set[str] = set()  # once per request

    def yielding_plan(self, snap, rule0):
        c = snap.chunked
        room = sum(t for _, t in rule0.chunk)
        if c.rid in self.yielded or not snap.waiting or room <= 0 or c.n <= room:
            return None
        it_s = (rule0.t_prefill_ms + max(snap.fused_rate_host_ms or 0.0, 0.0)) * 1e-3  # a fused iteration
        rest = math.ceil(c.n / room) * it_s
        cum, helps = 0.0, False
        for w in snap.waiting:
            cum += math.ceil(w.n / room) * it_s
            due = w.arrival_s + self.ttft_slo_ms_for(w.n + w.r) * 1e-3
            helps = helps or snap.now_s + rest + cum > due >= snap.now_s + cum
        if not helps or snap.now_s + cum + rest > c.arrival_s + self.ttft_slo_ms_for(c.n + c.r) * 1e-3:
            return None
        plan = self.fused_candidate(dataclasses.replace(snap, chunked=None), force=True)
        if plan is not None:
            self.yielded.add(c.rid)
        return plan and plan[0]

    def plan(self, snap):
        if snap.chunked is not None and snap.active_prefill is None and snap.paused_prefill is None:
            y = self.yielding_plan(snap, self.fused_candidate(snap, force=True)[0])
            if y is not None:
                return y
        return super().plan(snap)


take = sim._take_chunk


def take_yielding(chunk, chunked, waiting):
    """A chunk without the chunked request is one it yields to: it goes to the back of the queue
    (its done tokens as reused), and the chunk is the queue's head."""
    if chunked is not None and all(rid != chunked.rid for rid, _ in chunk):
        out = take(chunk, None, waiting)
        waiting.append(chunked)
        return out
    return take(chunk, chunked, waiting)


make = sim.make_policy
sim.make_policy = lambda name, *a, **k: Yielding(*a, tbt_slo_ms=k.pop("tbt_slo_ms"), ttft_slo_ms=k.pop("ttft_slo_ms"),
                                                  **k) if name == "hybrid" else make(name, *a, **k)
sim._take_chunk = take_yielding

if sys.argv[1] == "map":
    M.build_map(Path(sys.argv[2]), fused_jitter="bench/results/cap30_lone_h100_s46_2026-11-28/mux-hybrid.timeline.jsonl.xz")
else:
    print("uncapped_70b.md's table with the hybrid's chunked request yielding (chunked prefill's rows "
          "are unchanged).\n")
    runpy.run_path(str(Path(__file__).with_name("uncapped_70b.py")), run_name="__main__")
