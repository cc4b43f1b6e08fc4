"""The capped conversation at TBT 30 on a harsher truth: each fused batch costs its base price
times the ratio served batches of its padded size ran at on the lone H100
(../cap30_lone_h100_s46_2026-11-28/fused_sizes.md; sizes not served there: 1.10 above 512, 1.0
below), the GEMM cliffs included in those ratios. Four planners on it: the hybrid as served (no
graph_cliffs), the hybrid of this commit, the same knowing every size's ratio (an oracle for a
per-size served price), and chunked 512 + mixed.

    python bench/results/sim_hybrid_s46_2026-11-28/served_ratios.py [RATES] > served_ratios.txt
"""
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from bench.analysis import sim_hybrid_map as M  # noqa: E402
from sglang_mux import sim  # noqa: E402
from sglang_mux.estimator import Estimator  # noqa: E402
from sglang_mux.fused_price import graph_padding  # noqa: E402
from sglang_mux.latency_model import fused  # noqa: E402

SERVED = {352: 1.025, 384: 0.971, 416: 1.046, 448: 1.171, 480: 1.023, 512: 0.988, 576: 1.096, 640: 1.096,
          704: 1.133, 768: 1.080, 832: 1.225}
BASE = Estimator.fused_base_ms
MAKE = sim.make_policy


def truth_ms(self, rows, extra=None):
    """fused_base_ms times the served ratio of the padded size (``size_factor``; None: as is)."""
    ms = BASE(self, rows, extra)
    f = getattr(self, "size_factor", None)
    if not f:
        return ms
    t = fused.sums(rows)[0] + (len(extra.contexts) if extra else 0)
    t += graph_padding(t, self.graph_tokens)
    return (ms - self.graph_cliffs.get(t, 0.0)) * f.get(t, 1.10 if t > 512 else 1.0)


def planner(blind: bool, oracle: bool):
    def make(nm, est, **kw):  # the planner: a copy of the truth, which learns the served price online
        est.size_factor = SERVED if oracle else None
        if blind:
            est.graph_cliffs = {}
        return MAKE(nm, est, **kw)
    return make


if __name__ == "__main__":
    Estimator.fused_base_ms = truth_ms
    rates = [float(x) for x in (sys.argv[1] if len(sys.argv) > 1 else "3,3.45,3.67,3.9,4.12,4.35").split(",")]
    cell = "capped conversation (<= 8000)"
    est, jit, host, corun = M.simulator_inputs()
    est.size_factor = SERVED
    w = M.chosen_workloads((cell,))[cell]
    tmp = Path(tempfile.mkdtemp())
    for label, system, blind, oracle in (("hybrid as served", "hybrid", True, False), ("hybrid", "hybrid", False, False),
                                         ("hybrid, per-size oracle", "hybrid", False, True),
                                         ("chunked 512 + mixed", "chunked 512 + mixed", False, False)):
        sim.make_policy = planner(blind, oracle)
        for r in rates:
            p = M.run_point(est, jit, host, corun, w, 30.0, system, r, tmp)
            sh = (f", fused / spatial / decode alone {p['fused_share']:.0%} / {p['spatial_share']:.0%} / "
                  f"{p['decode_alone_share']:.0%}" if "fused_share" in p else "")
            print(f"{label}: {r:g} req/s {'pass' if p['ok'] else 'FAIL'}, P99 TTFT {p['ttft_p99_s']} s, "
                  f"P99 TBT {p['tbt_p99_ms']} ms, drift {'ok' if p['drift_ok'] else 'up'}{sh}", flush=True)
