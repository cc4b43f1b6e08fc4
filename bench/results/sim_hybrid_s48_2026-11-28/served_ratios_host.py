"""Session 46's harsher truth for the capped conversation at TBT 30 (each fused batch at its base
price times the ratio served batches of its padded size ran at: ../sim_hybrid_s46_2026-11-28/
served_ratios.py), with the fused iterations' host time per iteration as a parameter. Those served
ratios are measured gap over price, so a served iteration's host overrun is in them already; the
map's flat 2 ms a fused iteration (sim_hybrid_map.WORKLOADS) counted it twice there.

    python bench/results/sim_hybrid_s48_2026-11-28/served_ratios_host.py > served_ratios_host.txt
"""
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[3]))
sys.path.insert(0, str(HERE.parents[1] / "sim_hybrid_s46_2026-11-28"))
import served_ratios as S  # noqa: E402
from bench.analysis import sim_hybrid_map as M  # noqa: E402
from sglang_mux import sim  # noqa: E402
from sglang_mux.estimator import Estimator  # noqa: E402

RATES = (3.45, 3.67, 3.9, 4.12, 4.35)

if __name__ == "__main__":
    Estimator.fused_base_ms = S.truth_ms
    est, jit, host, corun = M.simulator_inputs()
    est.size_factor = S.SERVED
    cell = "capped conversation (<= 8000)"
    w = M.chosen_workloads((cell,))[cell]
    tmp = Path(tempfile.mkdtemp())
    rows = [("chunked 512 + mixed", "chunked 512 + mixed", None, False)]
    for fh in (2.0, 1.0, 0.0):
        rows += [(f"hybrid, {fh:g} ms host", "hybrid", fh, False), (f"hybrid per-size oracle, {fh:g} ms host", "hybrid", fh, True)]
    print("| planner | " + " | ".join(f"{r:g}" for r in RATES) + " |")
    print("|---|" + "---|" * len(RATES))
    for label, system, fh, oracle in rows:
        sim.make_policy = S.planner(False, oracle)
        cells = []
        for r in RATES:
            p = M.run_point(est, jit, host, corun, w, 30.0, system, r, tmp, fused_host=fh)
            cells.append(f"{'✓' if p['ok'] else '✗'} {p['tbt_p99_ms']} ms, {p['ttft_p99_s']} s"
                         + ("" if p["drift_ok"] else ", drift"))
        print(f"| {label} | " + " | ".join(cells) + " |", flush=True)
