"""What-if (not adopted): the hybrid's chunked request yields. CPU, repository root:

    D=bench/results/sim_hybrid_s53_2026-11-28
    PYTHONPATH=. python $D/chunk_yield.py map /tmp/chunk_yield_map.json > $D/chunk_yield_map.md   # ~1.5 min
    PYTHONPATH=. python $D/chunk_yield.py 70b > $D/chunk_yield_70b.md                           # ~20 s

A prompt fused in chunks holds the queue until its last chunk, as SGLang's chunked request does,
and rule 4's preemption never reaches it: on the 70B's uncapped cell (seed 1, 0.075 req/s) a
36K-token prompt ran ~6 s of chunks while a 4.7K and a 7.7K one that arrived within 0.7 s waited,
and the 4.7K one missed its TTFT rule by 4.2 s. Here (`Yielding.yielding_plan`) the chunked request
goes to the back of the queue when a waiting prompt would miss its deadline behind its rest and
meet it if the queue ran first, and it still meets its own after every prompt waiting then; once
per request. ``map``: this folder's map of record with it; ``70b``: uncapped_70b.md's hybrid rows
with it (chunked prefill's are unchanged). Played by patching the simulator; the server has no
such rule (SGLang keeps one chunked request and always continues it first)."""
import dataclasses
import math
import sys
import tempfile
from pathlib import Path

from bench.analysis import sim_hybrid_map as M
from bench.analysis.whatif_fused_tail import fused_hosts, start_hosts
from sglang_mux import dispatch as D, sim


class Yielding(D.HybridPolicy):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.yielded: set[str] = set()
        self.yields = 0

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
            self.yields += 1
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
    raise SystemExit
T = "contention_tables/llama-3.1-70b__nvidia-h200__fa3__tp2"
TL = "bench/results/h200x4_s53_2026-11-28/cap70/mux-hybrid.timeline.jsonl.xz"
# The longest prompt one layer-wise prefill holds on the hybrid's server, as conv_uncapped_sweep.sh starts
# it (--mem-fraction-static 0.75): ~94K tokens, from the 44,095 the 70B's TP-2 server logged at 0.85
# with 12.9 GiB free (h200x4_s53_2026-11-28/cap70/mux-hybrid.log.xz), 14 GiB more at 0.75. Longer
# prompts (the trace's run to 118K) are fused in chunks.
LAYERWISE_MAX = 94_000
# The KV pools (tokens) that bound prefix reuse: the hybrid's at 0.75 ~236K (335,042 at 0.85, as both
# 70B servers logged, less 14 GiB at 152.6 KB a token), chunked prefill's at bench.run's 0.85 335,042
# (the 8B's in WORKLOADS are 358,800 / 423,494).
POOLS = (236_000, 335_042)
est, jit, host, corun = M.simulator_inputs(T, TL)
kw = dict(fused_jitter=sim.fused_jitter(TL), fused_host=list(fused_hosts(TL)), start_host=list(start_hosts(TL)))
RATES = (0.075, 0.08, 0.09, 0.1, 0.11, 0.125, 0.15)
print("The hybrid whose chunked request yields, as uncapped_70b.md (each point: pass, P99 of TTFT "
      "less K ms a token (s), P99 TBT (ms), D where the drift test fails).\n")
print("| seed | K | system | " + " | ".join(f"{r:g}" for r in RATES) + " | goodput |")
print("|---:|---:|---|" + "---|" * (len(RATES) + 1))
with tempfile.TemporaryDirectory() as d:
    for seed in (0, 1, 2):
        for k in (0.2, 0.8):
            w = dict(M.WORKLOADS["uncapped conversation (1 session in 20)"], span=600.0, ttft=("length", 2.0, k),
                     layerwise_max=LAYERWISE_MAX, pools=POOLS)
            pts = [M.run_point(est, jit, host, corun, w, 100.0, "hybrid", r, Path(d), seed=seed, **kw) for r in RATES]
            first = next((i for i, p in enumerate(pts) if not p["ok"]), len(pts))
            good = f"{pts[first - 1]['rate']:g}" if first else f"< {RATES[0]:g}"
            cells = [f"{'✓' if p['ok'] else '✗'} {p['ttft_p99_s']:.2f}, {p['tbt_p99_ms']:.0f}"
                     + ("" if p["drift_ok"] else " D") for p in pts]
            print(f"| {seed} | {k:g} | hybrid, yielding | " + " | ".join(cells) + f" | {good} |", flush=True)
