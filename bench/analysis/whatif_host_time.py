"""What the mux's TBT-30 goodput would be with less host time per decode iteration, in the
simulator calibrated against session 21's served point (README.md here). CPU, ~10 s:

    python bench/results/sim_calibration_s21/whatif_host.py > bench/results/sim_calibration_s21/whatif_host.md

"without the plan lap": a co-run iteration's host time less its ``plan`` lap (the policy's
decision and SGLang's formation of a new prefill batch), as if that work overlapped the decode's
GPU time (``--mux-defer-prefill-start``).
"""
import pandas as pd

from sglang_mux import sim
from sglang_mux.estimator import Estimator
from sglang_mux.mux_metrics import host_ms_per_decode, load_timeline

T = "contention_tables/llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3"
J = "bench/results/sim_calibration_s21/served_mux_3.timeline.jsonl.xz"
POINTS = ((2.5, 112), (3, 135), (3.5, 158), (4, 180), (4.5, 202))  # bench.run's requests per 45 s point

est = Estimator.from_table(T)
jit = sim.decode_jitter(J)
co, alone = sim.served_host_ms(J)
t = load_timeline(J)
h = host_ms_per_decode(t)
laps = pd.DataFrame(list(t.loc[h.index, "host_ms"]), index=h.index).fillna(0.0)
co_rows = t.loc[h.index, "prefill_sms"] > 0
co_less_plan = (h - laps["plan"]).clip(lower=0.0)[co_rows].to_numpy()
variants = {"served (co-run and decode-alone host times drawn apart)": (co, alone),
            "co-run iterations without the plan lap": (co_less_plan, alone),
            "co-run iterations with decode-alone host times": (alone, alone),
            "every host time halved": (co / 2, alone / 2),
            "no host time": ([0.0], [0.0])}
print("| seed | host time per decode iteration | " + " | ".join(str(r) for r, _ in POINTS) + " | goodput |")
print("|---|---|" + "---|" * len(POINTS) + "---:|")
for seed in (0, 1):
    for name, draws in variants.items():
        cells, good, failed = [], None, False  # goodput as bench.run climbs: the last pass before a failure
        for rate, n in POINTS:
            reqs = sim.load_trace("conversation", limit=n, rate=rate, input_cap=8000, arrival="poisson", seed=seed)
            r = sim.run_policies(reqs, est, "dispatcher", tbt_slo_ms=30, ttft_slo_ms=5000, jitter=jit,
                                 online_guard=True, prefill_slowdown=1.4, host_draws=draws, seed=seed)[0].summary
            ok = r["ttft_p99_s"] <= 5 and r["tbt_p99_ms"] <= 30 and r["ttft_drift"]["ok"]
            failed = failed or not ok
            good = rate if not failed else good
            cells.append(f"{'✓' if ok else '✗'} {r['ttft_p99_s']:.1f} s, {r['tbt_p99_ms']:.1f}"
                         + ("" if r["ttft_drift"]["ok"] else ", drift"))
        print(f"| {seed} | {name} | " + " | ".join(cells) + f" | {good if good is not None else '< ' + str(POINTS[0][0])} |")
