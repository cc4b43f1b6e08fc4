"""The 70B's uncapped cell at TP 2 in the simulator, below the rates session 53 played (CPU, ~15 s;
repository root):

    D=bench/results/sim_uncapped70_s55_2026-11-28; PYTHONPATH=. python $D/uncapped_70b_low.py > $D/uncapped_70b_low.md

Session 53's `uncapped_70b.py` (bench/results/sim_hybrid_s53_2026-11-28/, its docstring says the
framing: TP-2 table, session 53's served hybrid draws, 600-s points, seeds 0-2, the TTFT rule at
K = 0.2 and 0.8 ms a prompt token) with the rates from 0.03 req/s: there every system failed
0.075 or passed only it, so no chunked goodput was found to divide by."""
import tempfile
from pathlib import Path

from bench.analysis import sim_hybrid_map as M
from bench.analysis.whatif_fused_tail import fused_hosts, start_hosts
from sglang_mux import sim

T = "contention_tables/llama-3.1-70b__nvidia-h200__fa3__tp2"
TL = "bench/results/h200x4_s53_2026-11-28/cap70/mux-hybrid.timeline.jsonl.xz"
# The longest prompt one layer-wise prefill holds on the hybrid's server, as conv_uncapped_sweep.sh starts
# it (--mem-fraction-static 0.75): ~94K tokens, from the 44,095 the 70B's TP-2 server logged at 0.85
# with 12.9 GiB free (h200x4_s53_2026-11-28/cap70/mux-hybrid.log.xz), 14 GiB more at 0.75. Longer
# prompts (the trace's run to 118K) are fused in chunks.
LAYERWISE_MAX = 94_000
# The KV pools (tokens) that bound prefix reuse: the hybrid's at 0.75 ~236K (335,042 at 0.85, as both
# 70B servers logged, less 14 GiB at 152.6 KB a token), chunked prefill's at bench.run's 0.85 335,042
# (the 8B's in WORKLOADS are 358,800 / 423,494).
POOLS = (236_000, 335_042)
est, jit, host, corun = M.simulator_inputs(T, TL)
kw = dict(fused_jitter=sim.fused_jitter(TL), fused_host=list(fused_hosts(TL)), start_host=list(start_hosts(TL)))
M.CHUNKED_HOST_MS.setdefault(256, 0.0)
RATES = (0.03, 0.04, 0.05, 0.06, 0.065, 0.07, 0.075, 0.08)
SYSTEMS = ("hybrid", "chunked 256 + mixed", "chunked 512 + mixed", "chunked 1024 + mixed")
print("Each point: pass (✓), P99 of TTFT less K ms a token (s), P99 TBT (ms), D where the drift test "
      "fails. Goodput: the last pass before the first failure.\n")
print("| seed | K | system | " + " | ".join(f"{r:g}" for r in RATES) + " | goodput |")
print("|---:|---:|---|" + "---|" * (len(RATES) + 1))
with tempfile.TemporaryDirectory() as d:
    for seed in (0, 1, 2):
        for k in (0.2, 0.8):
            w = dict(M.WORKLOADS["uncapped conversation (1 session in 20)"], span=600.0, ttft=("length", 2.0, k),
                     layerwise_max=LAYERWISE_MAX, pools=POOLS)
            for name in SYSTEMS:
                mux = kw if name == "hybrid" else {}
                pts = [M.run_point(est, jit, host, corun, w, 100.0, name, r, Path(d), seed=seed, **mux)
                       for r in RATES]
                first = next((i for i, p in enumerate(pts) if not p["ok"]), len(pts))
                good = f"{pts[first - 1]['rate']:g}" if first else f"< {RATES[0]:g}"
                cells = [f"{'✓' if p['ok'] else '✗'} {p['ttft_p99_s']:.2f}, {p['tbt_p99_ms']:.0f}"
                         + ("" if p["drift_ok"] else " D") for p in pts]
                print(f"| {seed} | {k:g} | {name} | " + " | ".join(cells) + f" | {good} |", flush=True)
