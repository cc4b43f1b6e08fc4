"""The fused-price variants of this session on five 8B H100 cells, with served fused noise (CPU,
~10 minutes; repository root):

    python bench/results/h200x4_s51_2026-11-28/whatif_8b.py [TIMELINE]

`bench.analysis.sim_hybrid_map.run_point` on the H100 FA3 table, seed 0, each cell's walk up its
rates to the first failure, the hybrid's fused iterations drawing the measured / base ratios of a
served 8B timeline (default: session 47's capped conversation at TBT 30 on a 4 x H100 host) and its
price fed session 44's three warm-up batches first (`tests/test_fused_price.py`: one token at 5.7x,
64 and 65 tokens at 1.5x and 1.6x). Variants: session 50's code (spread on P10-P90, the margin in
the rate), the margin out of the rate only, this session's code (and spread on quartiles), and two
alternatives tried and not adopted on that base: a Theil-Sen line (`scipy.stats.theilslopes`) and
leaving the first fused iteration out. Prints each variant's goodput and walk per cell."""
import sys
import tempfile
from pathlib import Path

import numpy
from scipy.stats import theilslopes

from bench.analysis import sim_hybrid_map as M
from sglang_mux import dispatch as D, fused_price as FP, sim

TL = sys.argv[1] if len(sys.argv) > 1 else "bench/results/x4_s47_2026-11-28/cap30/mux-hybrid.timeline.jsonl.xz"
est, jit, host, corun = M.simulator_inputs()
FJ = list(sim.fused_jitter(TL))
WARM = [(9.34, 53.27, 12), (9.34, 13.9, 64), (9.34, 15.14, 80)]
ORIG_TAIL, NEW_SPREAD, OLD_SPREAD = D.HybridPolicy.fused_tail_ms, FP.SPREAD_QUANTILES, (0.1, 0.9)


class TheilSenNumpy:  # fused_price's numpy, its least-squares line a Theil-Sen one
    def __getattr__(self, k):
        return getattr(numpy, k)

    @staticmethod
    def polyfit(x, y, deg):
        slope, intercept, *_ = theilslopes(y, x)
        return numpy.array([slope, intercept])


def price(skip_first: bool):
    class P(FP.FusedPrice):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            self._seen = 0
            for s, m, z in WARM:
                self.observe(s, m, z)

        def observe(self, s, m, z=None):
            self._seen += 1
            return None if skip_first and self._seen == 1 else super().observe(s, m, z)
    return P


VARIANTS = {  # name: (spread quantiles, margin in the rate, Theil-Sen, first left out)
    "session 50's code": (OLD_SPREAD, True, False, False),
    "margin out of the rate": (OLD_SPREAD, False, False, False),
    "this session's code": (NEW_SPREAD, False, False, False),
    "Theil-Sen (not adopted)": (OLD_SPREAD, False, True, False),
    "first left out (not adopted)": (OLD_SPREAD, False, False, True),
}
CELLS = [("capped conversation (<= 8000)", 30.0), ("capped conversation (<= 8000)", 50.0), ("code", 30.0),
         ("chat-1k", 30.0), ("sharegpt", 30.0)]
print(f"fused draws: {TL}\n\n| TBT | workload | " + " | ".join(VARIANTS) + " |\n|---|---|" + "---|" * len(VARIANTS))
with tempfile.TemporaryDirectory() as d:
    for wname, tbt in CELLS:
        w, cols = M.WORKLOADS[wname], []
        for spread, tail, ts, skip in VARIANTS.values():
            FP.SPREAD_QUANTILES, FP.np = spread, (TheilSenNumpy() if ts else numpy)
            D.HybridPolicy.fused_tail_ms = (lambda self: 0.0) if tail else ORIG_TAIL
            sim.FusedPrice = price(skip)
            good, walk = None, []
            for rate in w["rates"]:
                p = M.run_point(est, jit, host, corun, w, tbt, "hybrid", rate, Path(d), fused_jitter=FJ)
                walk.append(f"{rate:g}{'✓' if p['ok'] else '✗'}")
                if not p["ok"]:
                    break
                good = rate
            cols.append(f"**{good}** ({' '.join(walk[-3:])})")
        print(f"| {tbt:g} | {wname} | " + " | ".join(cols) + " |", flush=True)
FP.SPREAD_QUANTILES, FP.np, D.HybridPolicy.fused_tail_ms, sim.FusedPrice = NEW_SPREAD, numpy, ORIG_TAIL, FP.FusedPrice
