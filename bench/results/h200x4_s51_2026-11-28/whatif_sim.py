"""The simulator on the 70B capped cell at TP 2 in the SLO map's framing (CPU, ~2 minutes; repository root):

    python bench/results/h200x4_s51_2026-11-28/whatif_sim.py [RATE ...]

`bench.analysis.sim_hybrid_map.run_point` with the shipped TP-2 table, host draws and decode jitter
from this session's served timeline (cap70/), its fused overruns and batch starts
(`bench.analysis.whatif_fused_tail`), TBT 100. The hybrid as the simulator plays it, then with the
served server's three warm-up fused iterations observed by its price before the run (one token at
3.1x, 64 and 65 tokens at 1.6x and 1.7x), each with fused iterations that run their exact price or
their price times a draw of the served measured / base ratios (`sim.fused_jitter`, cap70_lo/'s
378), under: session 50's code (the price's spread judged from P10 to P90, its margin in the
hybrid's rate), the margin out of the rate only, and this session's code (the spread judged on the
middle half too). Each point: pass, P99 TTFT, P99 TBT, fused and spatial shares of time; chunked
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
FJ = list(sim.fused_jitter("bench/results/h200x4_s51_2026-11-28/cap70_lo/mux-hybrid.timeline.jsonl.xz"))
tail_in_rate = lambda self: 0.0  # noqa: E731 (session 50's code: the margin in the rate)
OLD_SPREAD, NEW_SPREAD = (0.1, 0.9), FP.SPREAD_QUANTILES
variants = {  # name: (warm-ups observed first, spread quantiles, fused_tail_ms, fused jitter)
  "no warm-up, exact price (the simulator as it was)": (False, OLD_SPREAD, tail_in_rate, None),
  "warm-ups, exact price, session 50's code": (True, OLD_SPREAD, tail_in_rate, None),
  "warm-ups, served jitter, session 50's code": (True, OLD_SPREAD, tail_in_rate, FJ),
  "warm-ups, served jitter, margin out of the rate": (True, OLD_SPREAD, orig, FJ),
  "warm-ups, served jitter, this session's code": (True, NEW_SPREAD, orig, FJ),
  "no warm-up, served jitter, this session's code": (False, NEW_SPREAD, orig, FJ),
}
rates = [float(x) for x in sys.argv[1:]] or [0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
with tempfile.TemporaryDirectory() as d:
    print("| variant | " + " | ".join(f"{r:g}" for r in rates) + " |\n|---|" + "---|" * len(rates))
    for name, (warm, spread, tail, fj) in variants.items():
        sim.FusedPrice = warmed(FP.FusedPrice) if warm else FP.FusedPrice
        FP.SPREAD_QUANTILES, D.HybridPolicy.fused_tail_ms = spread, tail
        cells = []
        for rate in rates:
            p = M.run_point(est, jit, host, corun, w, 100.0, "hybrid", rate, Path(d), fused_host=list(o),
                            start_host=list(st), fused_jitter=fj)
            cells.append(point_text(p) + " f%.2f s%.2f" % (p["fused_share"], p["spatial_share"]))
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    sim.FusedPrice, FP.SPREAD_QUANTILES, D.HybridPolicy.fused_tail_ms = FP.FusedPrice, NEW_SPREAD, orig
    for name in ("chunked 512 + mixed", "chunked 1024 + mixed"):
        pts = [M.run_point(est, jit, host, corun, w, 100.0, name, rate, Path(d)) for rate in rates]
        print(f"| {name} | " + " | ".join(point_text(p) for p in pts) + " |")
