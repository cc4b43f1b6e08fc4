"""The hybrid as served before this commit, replayed on a truth that pays cuBLAS's slow sizes.

Its planner sees no ``graph_cliffs``: every captured size is a candidate and none is priced for
its GEMM cliff, while the truth (the estimator the simulator plays) pays them.

    python bench/results/sim_hybrid_s46_2026-11-28/served_policy.py map --json OUT.json > OUT.md
    python bench/results/sim_hybrid_s46_2026-11-28/served_policy.py cell CELL TBT RATES

``map``: sim_hybrid_map's arguments, that planner for every mux policy. ``cell``: one workload of
sim_hybrid_map at one TBT SLO, point by point: that planner ("hybrid as served"), this commit's
hybrid and chunked 512 + mixed.
"""
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from bench.analysis import sim_hybrid_map as M  # noqa: E402
from sglang_mux import sim  # noqa: E402

MAKE = sim.make_policy


def blind(nm, est, **kw):
    """sim.make_policy for a planner (a copy of the truth) without the cliffs."""
    est.graph_cliffs = {}
    return MAKE(nm, est, **kw)


def cell(name: str, tbt: float, rates: list[float]) -> None:
    est, jit, host, corun = M.simulator_inputs()
    w = M.chosen_workloads((name,))[name]
    tmp = Path(tempfile.mkdtemp())
    for label, system, make in (("hybrid as served", "hybrid", blind), ("hybrid", "hybrid", MAKE),
                                ("chunked 512 + mixed", "chunked 512 + mixed", MAKE)):
        sim.make_policy = make
        for r in rates:
            p = M.run_point(est, jit, host, corun, w, tbt, system, r, tmp)
            print(f"{label}: {r:g} req/s {'pass' if p['ok'] else 'FAIL'}, P99 TTFT {p['ttft_p99_s']} s, "
                  f"P99 TBT {p['tbt_p99_ms']} ms, drift {'ok' if p['drift_ok'] else 'up'}", flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["map"]:
        sim.make_policy = blind
        sys.exit(M.main(sys.argv[2:]))
    cell(sys.argv[2], float(sys.argv[3]), [float(x) for x in sys.argv[4].split(",")])
