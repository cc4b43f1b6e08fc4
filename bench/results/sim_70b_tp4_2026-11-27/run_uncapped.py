"""The simulator's uncapped-conversation cell for the 70B shape at TP 4: TBT 100 ms, the length-aware
TTFT SLO (P99 of TTFT - 0.2 ms x prompt <= 2 s), 90 s of Poisson arrivals a point, judged by
bench.run's drift test and by the length-aware one proposed for these cells (--queue-drift).
    PYTHONPATH=. python bench/results/sim_70b_tp4_2026-11-27/run_uncapped.py [TABLE [RATES [TIMELINE]]] > uncapped_tbt100.md
(default: the TP-4 H100 table at 0.2 ... 1 req/s, the map's host times: sim_hybrid_map.TIMELINE)"""
import sys
import tempfile
from pathlib import Path

from bench.analysis import sim_hybrid_map as M
from bench.analysis.whatif_fused_tail import point_text

T = sys.argv[1] if len(sys.argv) > 1 else "contention_tables/llama-3.1-70b__nvidia-h100-80gb-hbm3__fa3__tp4"
RATES = [float(r) for r in sys.argv[2].split(",")] if len(sys.argv) > 2 else (0.2, 0.3, 0.4, 0.5, 0.6, 0.75, 1.0)
NAME = "uncapped conversation (1 session in 20)"
# chunked sizes with a served host-time calibration (sim_hybrid_map.CHUNKED_HOST_MS; 2048 had one in 2026-11-27)
SYSTEMS = ("hybrid", *(f"chunked {b} + mixed" for b in sorted(M.CHUNKED_HOST_MS)))
est, jit, host, corun = M.simulator_inputs(T, *sys.argv[3:4])
print(f"table {T}; {NAME}, TBT 100 ms; each point: pass, P99 of TTFT less 0.2 ms a prompt token (s), P99 TBT ms\n")
with tempfile.TemporaryDirectory() as d:
    for queue in (False, True):
        w = M.chosen_workloads((NAME,), queue_drift=queue)[NAME]
        print(f"## drift test: {'length-aware (--queue-drift)' if queue else 'bench.run'}\n")
        print("| req/s | " + " | ".join(SYSTEMS) + " |\n|---:|" + "---|" * len(SYSTEMS))
        for r in RATES:
            cells = [M.run_point(est, jit, host, corun, w, 100.0, n, r, Path(d)) for n in SYSTEMS]
            print(f"| {r:g} | " + " | ".join(map(point_text, cells)) + " |", flush=True)
        print()
