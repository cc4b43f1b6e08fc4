"""The chunked-prefill simulator (sglang_mux.sim_chunked) against every served chunked point on FA3
at TBT 30 ms (capped conversation, H100). CPU, ~20 s:

    python bench/results/sim_chunked_s21/validate.py > bench/results/sim_chunked_s21/validate.md
"""
import json
import lzma
from pathlib import Path

import numpy as np

from bench.metrics import tbt_gaps
from sglang_mux import sim
from sglang_mux.estimator import Estimator
from sglang_mux.sim_chunked import simulate_chunked

T = "contention_tables/llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3"
RUNS = [("bench/results/guard_ab_tbt30_h100_s21", 0), ("bench/results/guard_ab_tbt30_h100_s21/seed1", 1),
        ("bench/results/slo30_fa3_h100_s20", 0)]
N = {2.5: 112, 3.0: 135, 3.5: 158, 4.0: 180, 4.5: 202}  # bench.run's requests per 45 s point
HOST_MS = 2.0

est = Estimator.from_table(T)
print(f"Simulated with --host-ms {HOST_MS:g}. Each cell: P99 TTFT, TBT P50 / P99, pass at TBT 30 ms / TTFT 5 s"
      " (drift: the TTFT drift test fails).\n")
print("| run | system | rate | served | simulated |")
print("|---|---|---:|---|---|")
for run, seed in RUNS:
    summary = json.load(open(Path(run) / "summary.json"))
    for name, sysd in summary["systems"].items():
        m = __import__("re").fullmatch(r"sglang-chunked-(\d+)(-nomix)?", name)
        if not m:
            continue
        for p in sysd["points"]:
            rate = float(p["rate"])
            recs = [json.loads(x) for x in lzma.open(Path(run) / (Path(p["file"]).name + ".xz"), "rt") if x.strip()]
            g = tbt_gaps(recs)
            s = p["summary"]
            served = (f"{'✓' if p['pass'] else '✗'} {s['ttft_ms']['p99'] / 1e3:.1f} s, {np.percentile(g, 50):.1f} / "
                      f"{np.percentile(g, 99):.1f} ms" + ("" if s["ttft_drift"]["ok"] else ", drift"))
            reqs = sim.load_trace("conversation", limit=N[rate], rate=rate, input_cap=8000, arrival="poisson", seed=seed)
            r = simulate_chunked(reqs, est, budget=int(m.group(1)), mixed=not m.group(2), host_ms=HOST_MS,
                                 tbt_slo_ms=30).summary
            ok = r["ttft_p99_s"] <= 5 and r["tbt_p99_ms"] <= 30 and r["ttft_drift"]["ok"]
            simd = (f"{'✓' if ok else '✗'} {r['ttft_p99_s']:.1f} s, {r['tbt_p50_ms']:.1f} / {r['tbt_p99_ms']:.1f} ms"
                    + ("" if r["ttft_drift"]["ok"] else ", drift"))
            print(f"| {Path(run).relative_to('bench/results')} (seed {seed}) | {name} | {rate:g} | {served} | {simd} |")
