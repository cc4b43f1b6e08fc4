"""The simulator on the 70B capped cell at TP 2 in the SLO map's framing (CPU, ~1 minute; repository root):

    python bench/results/h200x4_s51_2026-11-28/whatif_sim.py [RATE ...]

`bench.analysis.sim_hybrid_map.run_point` with the shipped TP-2 table, host draws and decode jitter
from this session's served timeline (cap70/), its fused overruns and batch starts
(`bench.analysis.whatif_fused_tail`), TBT 100: the hybrid as the simulator plays it, then with the
served server's three warm-up fused iterations observed by its price before the run (one token at
3.1x, 64 and 65 tokens at 1.6x and 1.7x), weighed with the margin in the rate (session 50's code)
and without (this session's). Each point: pass, P99 TTFT, P99 TBT, fused and spatial shares of time; chunked
512 and 1024 + mixed as the map plays them, for comparison."""
import tempfile, sys
from pathlib import Path
import numpy as np
from bench.analysis import sim_hybrid_map as M
from bench.analysis.whatif_fused_tail import overruns, start_hosts, point_text
from sglang_mux import dispatch as D, sim, fused_price as FP
T = "contention_tables/llama-3.1-70b__nvidia-h200__fa3__tp2"
TL = "bench/results/h200x4_s51_2026-11-28/cap70/mux-hybrid.timeline.jsonl.xz"
est, jit, host, corun = M.simulator_inputs(T, TL)
o, st = overruns(TL), start_hosts(TL)
w = M.WORKLOADS["capped conversation (<= 8000)"]
WARM = [(30.5, 93.6, 4), (32.0, 50.4, 64), (32.4, 56.2, 80)]  # the served server's first three fused iterations
def warmed(base):
    class W(base):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            for s, m, z in WARM:
                self.observe(s, m, z)
    return W
orig = D.HybridPolicy.fused_tail_ms
variants = {
  "no warm-up (sim as is)": (FP.FusedPrice, orig),
  "warm-ups, tail in rate (s50 code)": (warmed(FP.FusedPrice), lambda self: 0.0),
  "warm-ups, rate at median (now)": (warmed(FP.FusedPrice), orig),
}
rates = [float(x) for x in sys.argv[1:]] or [0.5, 0.6, 0.7, 0.8, 0.9]
with tempfile.TemporaryDirectory() as d:
    print("| variant | " + " | ".join(f"{r:g}" for r in rates) + " |\n|---|" + "---|" * len(rates))
    for name, (cls, tail) in variants.items():
        sim.FusedPrice = cls; D.HybridPolicy.fused_tail_ms = tail
        cells = []
        for rate in rates:
            p = M.run_point(est, jit, host, corun, w, 100.0, "hybrid", rate, Path(d), fused_host=list(o), start_host=list(st))
            cells.append(point_text(p) + " f%.2f s%.2f" % (p["fused_share"], p["spatial_share"]))
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    sim.FusedPrice = FP.FusedPrice; D.HybridPolicy.fused_tail_ms = orig
    for name in ("chunked 512 + mixed", "chunked 1024 + mixed"):
        pts = [M.run_point(est, jit, host, corun, w, 100.0, name, rate, Path(d)) for rate in rates]
        print(f"| {name} | " + " | ".join(point_text(p) for p in pts) + " |")
