"""The 70B's uncapped cell at TP 2 in the simulator, by point length and TTFT rule (CPU, ~30 s;
repository root):

    D=bench/results/h200x4_s52_2026-11-28; PYTHONPATH=. python $D/uncapped_spans.py > $D/uncapped_spans.md

The uncapped conversation (one session in 20), TBT 100 ms, Poisson seed 0 (and 1, 2 on 600-s
points), `bench.analysis.sim_hybrid_map`'s framing on the TP-2 table with this session's served hybrid draws (host, decode jitter, fused
ratios, fused host times, batch starts). The TTFT rule is the length-aware one: P99 of TTFT less
K ms a prompt token within 2 s. K 0.2 is issue 43's, set for the 8B. K 0.8 scales it by the 70B's
prefill at TP 2 against the 8B's on an H100: 3.0-5.1 x per token from 118K to 8K-token prompts, by
the tables. Chunked 256 is played with no host time beyond the fused model, as 512 is
(`CHUNKED_HOST_MS`; 256 has no served calibration)."""
import tempfile
from pathlib import Path

from bench.analysis import sim_hybrid_map as M
from bench.analysis.whatif_fused_tail import fused_hosts, start_hosts
from sglang_mux import sim

T = "contention_tables/llama-3.1-70b__nvidia-h200__fa3__tp2"
TL = "bench/results/h200x4_s52_2026-11-28/cap70/mux-hybrid.timeline.jsonl.xz"
est, jit, host, corun = M.simulator_inputs(T, TL)
kw = dict(fused_jitter=sim.fused_jitter(TL), fused_host=list(fused_hosts(TL)), start_host=list(start_hosts(TL)))
M.CHUNKED_HOST_MS.setdefault(256, 0.0)
RATES = (0.05, 0.075, 0.1, 0.125, 0.15)
SYSTEMS = ("hybrid", "chunked 256 + mixed", "chunked 512 + mixed", "chunked 1024 + mixed")
print("Each point: pass (✓), P99 of TTFT less K ms a token (s), P99 TBT (ms), D where the drift test fails.\n")
print("| point (s) | seed | K | system | " + " | ".join(f"{r:g}" for r in RATES) + " | goodput |")
print("|---:|---:|---:|---|" + "---|" * (len(RATES) + 1))
with tempfile.TemporaryDirectory() as d:
    for span, seed in ((90, 0), (300, 0), (450, 0), (600, 0), (600, 1), (600, 2)):
        for k in (0.2, 0.8):
            w = dict(M.WORKLOADS["uncapped conversation (1 session in 20)"], span=float(span),
                     ttft=("length", 2.0, k))
            for name in SYSTEMS:
                mux = kw if name == "hybrid" else {}
                pts = [M.run_point(est, jit, host, corun, w, 100.0, name, r, Path(d), seed=seed, **mux)
                       for r in RATES]
                first = next((i for i, p in enumerate(pts) if not p["ok"]), len(pts))
                good = pts[first - 1]["rate"] if first else None  # the last pass before the first failure
                cells = [f"{'✓' if p['ok'] else '✗'} {p['ttft_p99_s']:.2f}, {p['tbt_p99_ms']:.0f}"
                         + ("" if p["drift_ok"] else " D") for p in pts]
                good = "< 0.05" if good is None else f"{good:g}"
                print(f"| {span} | {seed} | {k:g} | {name} | " + " | ".join(cells) + f" | {good} |")
