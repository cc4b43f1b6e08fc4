"""The mux and chunked prefill on the uncapped slice (90 s of arrivals per rate, as the plan runs it), both simulators calibrated on served capped
points (../sim_calibration_s21/, ../sim_chunked_s21/). CPU, ~1 minute:

    python bench/results/sim_uncapped_conv_s21/predict.py > bench/results/sim_uncapped_conv_s21/predict.md
"""
from sglang_mux import sim
from sglang_mux.estimator import Estimator
from sglang_mux.sim_chunked import simulate_chunked

T = "contention_tables/llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3"
J = "bench/results/sim_calibration_s21/served_mux_3.timeline.jsonl.xz"
TRACE = "bench/data/conversation_sessions20.jsonl"
RATES = (0.5, 0.75, 1.0, 1.25)  # the plan climbs from 0.5
SPAN = 90  # seconds of arrivals per point
TBT, TTFTS = 50.0, (10.0, 5.0)

est = Estimator.from_table(T)
jit, host = sim.decode_jitter(J), sim.served_host_ms(J)


def mux(reqs, seed):
    return sim.run_policies(reqs, est, "dispatcher", tbt_slo_ms=TBT, ttft_slo_ms=10_000, jitter=jit,
                            online_guard=True, prefill_slowdown=1.4, host_draws=host, seed=seed)[0].summary


systems = {"mux": mux}
for b in (256, 512, 1024, 2048):
    systems[f"chunked {b} + mixed"] = (lambda b: lambda reqs, seed: simulate_chunked(
        reqs, est, budget=b, host_ms=2.0, tbt_slo_ms=TBT, ttft_slo_ms=10_000).summary)(b)
print(f"P99 TBT <= {TBT:g} ms, no drift; goodput at P99 TTFT <= {TTFTS[0]:g} s / <= {TTFTS[1]:g} s "
      "(the last rate passed before the first failure). Each cell: P99 TTFT s, P99 TBT ms.\n")
print("| seed | system | " + " | ".join(f"{r:g}" for r in RATES) + " | goodput 10 s / 5 s |")
print("|---|---|" + "---|" * len(RATES) + "---:|")
for seed in (0, 1):
    for name, run in systems.items():
        cells, good = [], {t: None for t in TTFTS}
        failed = {t: False for t in TTFTS}
        for rate in RATES:
            reqs = sim.load_trace(TRACE, limit=round(rate * SPAN), rate=rate, arrival="poisson", seed=seed,
                                  cache_tokens=317_039)
            s = run(reqs, seed)
            for t in TTFTS:
                ok = s["ttft_p99_s"] <= t and s["tbt_p99_ms"] <= TBT and s["ttft_drift"]["ok"]
                failed[t] = failed[t] or not ok
                good[t] = rate if not failed[t] else good[t]
            cells.append(f"{s['ttft_p99_s']:.1f}, {s['tbt_p99_ms']:.0f}" + ("" if s["ttft_drift"]["ok"] else " drift"))
        gs = " / ".join("< " + f"{RATES[0]:g}" if good[t] is None else f"{good[t]:g}" for t in TTFTS)
        print(f"| {seed} | {name} | " + " | ".join(cells) + f" | {gs} |")
