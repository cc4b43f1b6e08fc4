"""What-ifs on this folder's map (CPU, ~2.5 minutes a map; repository root):

    PYTHONPATH=. python bench/results/sim_hybrid_s52_2026-11-28/map_variant.py OUT.json [--by-size] [--spatial-factor F]
        [--starts] > OUT.md

The map of record's framing (`sim_hybrid_map --fused-jitter`, session 46's lone-H100 timeline),
with ``--by-size`` each fused iteration drawing its ratio from the served iterations of its own
padded size (`sim.fused_jitter_by_size`) instead of all of them, ``--spatial-factor F`` the
hybrid weighing a spatial plan's rate at F x its estimate against the fused candidate's, and
``--starts`` each iteration that starts a layer-wise batch drawing its host time from a served
TBT-30 H100 timeline's 92 batch starts (`whatif_fused_tail.start_hosts`; the lone H100's has 3),
budgeted as the server does (the map leaves starts untold)."""
import argparse
from pathlib import Path

from bench.analysis import sim_hybrid_map as M
from bench.analysis.whatif_fused_tail import start_hosts
from sglang_mux import dispatch as D, sim

TL = "bench/results/cap30_lone_h100_s46_2026-11-28/mux-hybrid.timeline.jsonl.xz"
ap = argparse.ArgumentParser()
ap.add_argument("json", type=Path)
ap.add_argument("--by-size", action="store_true")
ap.add_argument("--spatial-factor", type=float, default=1.0)
ap.add_argument("--starts", action="store_true")
a = ap.parse_args()
if a.starts:
    starts = list(start_hosts("bench/results/capped_tbt30_h100_2026-11-27/mux-hybrid.timeline.jsonl.xz"))
    point = M.run_point
    M.run_point = lambda *args, **kw: point(*args, **{**kw, "start_host": starts})
if a.by_size:
    M.sim.fused_jitter = sim.fused_jitter_by_size
if a.spatial_factor != 1.0:
    rate = D.HybridPolicy.spatial_rate
    D.HybridPolicy.spatial_rate = lambda self, plan, snap: a.spatial_factor * rate(self, plan, snap)
M.build_map(a.json, fused_jitter=TL)
