"""The fused budget quantile replayed on session 44's served sharegpt and chat-1k overruns (TBT 30).
    PYTHONPATH=. python bench/results/whatif_fused_tail_2026-11-27/quantiles_s44.py > quantiles_s44.md"""
import tempfile, sys
from pathlib import Path
from bench.analysis import sim_hybrid_map as M
from bench.analysis.whatif_fused_tail import overruns, start_hosts, point_text
est, jit, host, corun = M.simulator_inputs()
cells = {"sharegpt": ("bench/results/x4_s44_2026-11-27/sharegpt30lo/mux-hybrid.timeline.jsonl.xz", (55, 60, 66, 72, 80)),
         "chat-1k": ("bench/results/x4_s44_2026-11-27/chat30/mux-hybrid.timeline.jsonl.xz", (17, 19, 22, 24))}
with tempfile.TemporaryDirectory() as d:
    for wname, (tl, rates) in cells.items():
        w = M.WORKLOADS[wname]; o, st = overruns(tl), start_hosts(tl)
        print(f"## {wname}\n\n| q | " + " | ".join(f"{r:g}" for r in rates) + " |\n|---|" + "---|" * len(rates), flush=True)
        for q in (0.95, 0.97, 0.99):
            pts = [M.run_point(est, jit, host, corun, w, 30.0, "hybrid", r, Path(d), fused_host=list(o), start_host=list(st) or None, fused_host_quantile=q) for r in rates]
            print(f"| {q:g} | " + " | ".join(map(point_text, pts)) + " |", flush=True)
        pts = [M.run_point(est, jit, host, corun, w, 30.0, n, r, Path(d)) for r in rates for n in ("chunked 1024 + mixed",)]
        print("| chunked 1024 | " + " | ".join(map(point_text, pts)) + " |\n", flush=True)
