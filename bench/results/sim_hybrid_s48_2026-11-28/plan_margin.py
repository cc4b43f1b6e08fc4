"""The hybrid planning for a TBT below the SLO it is judged by (the SLO, 0.98, 0.96 and 0.93 of it),
on session 46's served-ratio truth (fused host time 2 ms and 0 ms) or the table's truth with the
GEMM curve's steps (the map's, "cliffs").

    python bench/results/sim_hybrid_s48_2026-11-28/plan_margin.py served|cliffs > plan_margin_<truth>.txt
"""
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[3]))
sys.path.insert(0, str(HERE.parents[1] / "sim_hybrid_s46_2026-11-28"))
import served_ratios as S
from bench.analysis import sim_hybrid_map as M
from sglang_mux import sim, estimator
TRUTH = sys.argv[1]  # served | cliffs
if TRUTH == "served":
    estimator.Estimator.fused_base_ms = S.truth_ms
est, jit, host, corun = M.simulator_inputs()
if TRUTH == "served":
    est.size_factor = S.SERVED
cell = sys.argv[2] if len(sys.argv) > 2 else "capped conversation (<= 8000)"
tbt = float(sys.argv[3]) if len(sys.argv) > 3 else 30.0
rates = [float(x) for x in sys.argv[4].split(",")] if len(sys.argv) > 4 else (3.45, 3.67, 3.9, 4.12, 4.35)
w = M.chosen_workloads((cell,))[cell]
sim.make_policy = S.planner(False, False) if TRUTH == "served" else sim.make_policy
def point(plan_tbt, r, fh):
    reqs = M.requests(w, r, w["pools"][0], Path(tempfile.mkdtemp()), 0)
    slow = corun if w["slow"] == "table" else w["slow"]
    res = sim.run_policies(reqs, est, "hybrid", tbt_slo_ms=plan_tbt, ttft_slo_ms=w["ttft"][1] * 1e3, jitter=jit,
                           online_guard=True, prefill_slowdown=slow, host_draws=host, seed=0,
                           fused_host_ms=fh, prefill_graph=True)[0]
    s = res.summary; tp = M.ttft_p99(res, reqs, w["ttft"])
    ok = tp <= w["ttft"][1] and s["tbt_p99_ms"] <= tbt and s["ttft_drift"]["ok"]
    return f"{'✓' if ok else '✗'}{s['tbt_p99_ms']:.1f}"
for fh in ((2.0, 0.0) if TRUTH == "served" else (w["fused_host"],)):
    for plan_tbt in (tbt, tbt * 0.98, tbt * 0.96, tbt * 0.93):
        print(f"{TRUTH} host {fh} plan at {plan_tbt:.1f}: " + " ".join(f"{r:g}{point(plan_tbt, r, fh)}" for r in rates), flush=True)
