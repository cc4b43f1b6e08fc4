"""Served against simulated, request by request, on the 70B capped cell at TP 2 (CPU, ~5 s;
repository root):

    D=bench/results/h200x4_s52_2026-11-28; PYTHONPATH=. python $D/sim_vs_served.py > $D/sim_vs_served.md

Each point: its verdict, P99 TTFT and the drift test's tail median against its limit (the last
10 % of the requests' median TTFT against 2 x the first half's + 250 ms), served (cap70/,
cap70_b/) and simulated: `bench.analysis.sim_hybrid_map`'s framing with this session's served
host draws, fused host times (gap less measured), batch starts and fused measured / base ratios,
the server's three warm-up fused iterations observed first (as ../h200x4_s51_2026-11-28/'s
whatif_sim.py plays them). Then the TTFTs of the burst the trace brings at its 20th to 27th
requests. Last, the verdicts on 45-s and 150-s points, the hybrid's fused iterations given as host
time their served gap less their measured time (`whatif_fused_tail.fused_hosts`) and, as session
51's whatif_sim.py gave them, less their planned price (`overruns`), which with the fused jitter
counts the price's margin off every iteration a second time."""
import json, lzma, sys, tempfile
from pathlib import Path
import numpy as np
from bench.analysis import sim_hybrid_map as M
from bench.analysis.whatif_fused_tail import fused_hosts, overruns, start_hosts
from sglang_mux import sim, fused_price as FP
from sglang_mux.drift import drift
from sglang_mux.sim_chunked import simulate_chunked

HERE = Path(__file__).parent
T = "contention_tables/llama-3.1-70b__nvidia-h200__fa3__tp2"
TL = str(HERE / "cap70/mux-hybrid.timeline.jsonl.xz")
est, jit, host, corun = M.simulator_inputs(T, TL)
o, fh, st, fj = list(overruns(TL)), list(fused_hosts(TL)), list(start_hosts(TL)), list(sim.fused_jitter(TL))
w = M.WORKLOADS["capped conversation (<= 8000)"]
WARM = [(30.5, 93.6, 4), (32.0, 50.4, 64), (32.4, 56.2, 80)]  # a server's warm-up fused iterations (s51)


class Warmed(FP.FusedPrice):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        for s, m, z in WARM:
            self.observe(s, m, z)


def simulated(name, rate, tmp, hosts=None):
    """(TTFTs ms, P99 TBT ms); ``hosts``: the hybrid's fused host draws (default: gap less measured)."""
    reqs = M.requests(w, rate, None, tmp)
    if name == "mux-hybrid":
        sim.FusedPrice = Warmed
        r = sim.run_policies(reqs, est, "hybrid", tbt_slo_ms=100.0, ttft_slo_ms=5000.0, jitter=jit,
                             online_guard=True, prefill_slowdown=1.4, host_draws=host, seed=0,
                             fused_host_ms=fh if hosts is None else hosts, prefill_graph=True,
                             start_host_ms=st, fused_jitter=fj)[0]
        sim.FusedPrice = FP.FusedPrice
    else:
        r = simulate_chunked(reqs, est, budget=512, host_ms=M.CHUNKED_HOST_MS[512], tbt_slo_ms=100.0,
                             ttft_slo_ms=5000.0)
    return np.asarray(r.ttft_s) * 1e3, r.summary["tbt_p99_ms"]


def served(name, rate):
    for d in ("cap70", "cap70_b"):
        p = HERE / d / f"{name}__{rate:g}.jsonl.xz"
        if p.exists():
            rs = sorted((json.loads(l) for l in lzma.open(p, "rt")), key=lambda r: r["scheduled"])
            return d, np.array([r["tok_ms"][0] for r in rs if r.get("ok")])
    return None, None


def text(ttft):
    d = drift(ttft)
    p99 = np.percentile(ttft, 99)
    return (f"{'✓' if d['ok'] and p99 <= 5000 else '✗'} P99 {p99 / 1e3:.2f} s, "
            f"drift {d['tail_median_ms'] / 1e3:.2f} / {d['limit_ms'] / 1e3:.2f} s")


rates = [0.5, 0.6, 0.7, 0.8, 0.9]
burst = {}
with tempfile.TemporaryDirectory() as tmp:
    print("| system | rate | requests | served (pair) | simulated (P99 TBT) |\n|---|---:|---:|---|---|")
    for name in ("mux-hybrid", "sglang-chunked-512"):
        for rate in rates:
            s, tbt = simulated(name, rate, Path(tmp))
            d, v = served(name, rate)
            sv = f"{text(v)} ({d})" if v is not None else "not run"
            print(f"| {name} | {rate:g} | {len(s)} | {sv} | {text(s)} ({tbt:.1f} ms) |")
            burst[name, rate] = (s[19:27], None if v is None else v[19:27])
print("\nThe burst (requests 20-27 in arrival order), TTFT in s, served / simulated:\n")
for (name, rate), (s, v) in burst.items():
    if v is not None:
        print(f"- {name} {rate:g}: " + " ".join(f"{a / 1e3:.1f}/{b / 1e3:.1f}" for a, b in zip(v, s)))
rates = [0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.9]
print("\nThe verdicts by the length of a point (s of arrivals), simulated (✓ pass, P99 TTFT in s):\n")
print("| system | fused host draws | point | " + " | ".join(f"{r:g}" for r in rates) + " |")
print("|---|---|---:|" + "---|" * len(rates))
with tempfile.TemporaryDirectory() as tmp:
    for name, hosts, how in (("mux-hybrid", None, "gap less measured (`fused_hosts`)"),
                             ("mux-hybrid", o, "gap less planned (`overruns`, as s51's whatif_sim.py)"),
                             ("sglang-chunked-512", None, "—")):
        for span in (45, 150):
            w["span"] = span
            cells = []
            for rate in rates:
                s, _ = simulated(name, rate, Path(tmp), hosts=hosts)
                cells.append(text(s)[:1] + f" {np.percentile(s, 99) / 1e3:.2f}")
            print(f"| {name} | {how} | {span} | " + " | ".join(cells) + " |")
