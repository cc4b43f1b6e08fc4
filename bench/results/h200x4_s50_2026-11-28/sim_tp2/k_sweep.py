"""Uncapped conversation: the dispatcher and the hybrid with length-aware preemption deadlines
(K ms a prompt token, the goodput check's 0.2) against chunked 512 + mixed; from the repository
root (~5 minutes each):
    PYTHONPATH=. python bench/results/h200x4_s50_2026-11-28/sim_tp2/k_sweep.py \
        contention_tables/llama-3.1-70b__nvidia-h200__fa3__tp2 0.15,0.2,0.25,0.3,0.4 100 > uncapped_k_70b.md
    PYTHONPATH=. python bench/results/h200x4_s50_2026-11-28/sim_tp2/k_sweep.py \
        contention_tables/llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3 0.5,0.65,0.8,1.0,1.2 50 > uncapped_k_8b_h100.md"""
import sys, tempfile, json
from pathlib import Path
from bench.analysis import sim_hybrid_map as M
from bench.analysis.whatif_fused_tail import point_text
T = sys.argv[1]; rates = [float(r) for r in sys.argv[2].split(",")]; tbt = float(sys.argv[3])
NAME = "uncapped conversation (1 session in 20)"
est, jit, host, corun = M.simulator_inputs(T)
print(f"table {T}; {NAME}, TBT {tbt:g} ms; bench.run's drift test\n")
cols = [("dispatcher", 0.0), ("dispatcher", 0.2), ("hybrid", 0.0), ("hybrid", 0.2), ("chunked 512 + mixed", None)]
print("| req/s | " + " | ".join(n + (f", K {k:g}" if k is not None else "") for n, k in cols) + " |")
print("|---:|" + "---|" * len(cols))
w = M.chosen_workloads((NAME,))[NAME]
with tempfile.TemporaryDirectory() as d:
    for r in rates:
        cells = []
        for n, k in cols:
            kw = {"ttft_ms_per_token": k} if k is not None else {}
            res = M.run_point(est, jit, host, corun, w, tbt, n, r, Path(d), **kw)
            cells.append(point_text(res))
        print(f"| {r:g} | " + " | ".join(cells) + " |", flush=True)
