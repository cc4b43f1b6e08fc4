"""Other cells on session 46's served-ratio truth (fused host time counted once): the hybrid with
one line over all sizes (the per-size term off) against the hybrid learning each padded size's error.

    python bench/results/sim_hybrid_s48_2026-11-28/other_cells.py > other_cells.txt
"""
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[3]))
sys.path.insert(0, str(HERE.parents[1] / "sim_hybrid_s46_2026-11-28"))
import served_ratios as S  # noqa: E402
from bench.analysis import sim_hybrid_map as M  # noqa: E402
from sglang_mux import fused_price, sim  # noqa: E402
from sglang_mux.estimator import Estimator  # noqa: E402

CELLS = (("code", 30, (14, 15.5, 17, 18, 20)), ("chat-1k", 30, (16, 17.5, 19, 20, 22)),
         ("capped conversation (<= 8000)", 50, (4, 4.4, 4.8, 5.2)), ("code", 50, (17, 18, 20, 22)))

if __name__ == "__main__":
    Estimator.fused_base_ms = S.truth_ms
    est, jit, host, corun = M.simulator_inputs()
    est.size_factor = S.SERVED
    sim.make_policy = S.planner(False, False)
    tmp = Path(tempfile.mkdtemp())
    per_size = fused_price.SIZE_MIN_OBS
    print("| cell | TBT | price | " + " | ".join(f"point {i + 1}" for i in range(5)) + " |")
    print("|---|---:|---|" + "---|" * 5)
    for cell, tbt, rates in CELLS:
        w = M.chosen_workloads((cell,))[cell]
        for label, min_obs in (("one line", 10 ** 9), ("per size", per_size)):
            fused_price.SIZE_MIN_OBS = min_obs
            pts = [M.run_point(est, jit, host, corun, w, float(tbt), "hybrid", r, tmp, fused_host=0.0) for r in rates]
            cells = [f"{p['rate']:g} {'✓' if p['ok'] else '✗'} {p['tbt_p99_ms']} ms" + ("" if p["drift_ok"] else ", drift")
                     for p in pts]
            print(f"| {cell} | {tbt} | {label} | " + " | ".join(cells) + " |" * (6 - len(cells)), flush=True)
