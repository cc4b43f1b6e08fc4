"""Uncapped conversation: the hybrid with and without length-aware preemption (K = 0.2, the check's),
and chunked 512 + mixed; from the repository root (~5 minutes each):
    PYTHONPATH=. python bench/results/h200x4_s50_2026-11-28/sim_tp2/preempt_unc.py \
        contention_tables/llama-3.1-70b__nvidia-h200__fa3__tp2 0.1,0.15,0.2,0.3 100 > uncapped_preempt_k02.md
    PYTHONPATH=. python bench/results/h200x4_s50_2026-11-28/sim_tp2/preempt_unc.py \
        contention_tables/llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3 0.5,0.65,0.8,1.0 50 > uncapped_preempt_k02_8b_h100.md"""
import sys, tempfile
from pathlib import Path
from bench.analysis import sim_hybrid_map as M
from bench.analysis.whatif_fused_tail import point_text
T = sys.argv[1]; rates = [float(r) for r in sys.argv[2].split(",")]; tbt = float(sys.argv[3])
NAME = "uncapped conversation (1 session in 20)"
est, jit, host, corun = M.simulator_inputs(T)
print(f"table {T}; {NAME}, TBT {tbt:g} ms\n")
with tempfile.TemporaryDirectory() as d:
    for queue in (False, True):
        w = M.chosen_workloads((NAME,), queue_drift=queue)[NAME]
        print(f"## drift test: {'length-aware' if queue else 'bench.run'}\n")
        print("| req/s | hybrid, K 0 | hybrid, K 0.2 | chunked 512 |\n|---:|---|---|---|")
        for r in rates:
            a = M.run_point(est, jit, host, corun, w, tbt, "hybrid", r, Path(d))
            b = M.run_point(est, jit, host, corun, w, tbt, "hybrid", r, Path(d), ttft_ms_per_token=0.2)
            c = M.run_point(est, jit, host, corun, w, tbt, "chunked 512 + mixed", r, Path(d))
            print(f"| {r:g} | {point_text(a)} | {point_text(b)} | {point_text(c)} |", flush=True)
        print()
