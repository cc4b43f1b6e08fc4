"""What the next uncapped run (bench/plans/conv_uncapped_sweep.sh: mux and chunked 512 + mixed from
1 req/s) should expect: ../sim_uncapped_conv_s21/predict.py with the corrections sim_vs_served.md
found on this directory's served points (seed 0), which are fitted on them (in-sample):
a prefix cache the size of each server's KV pool (423,494 tokens for chunked prefill at 0.85,
358,800 for the mux at 0.75) and no host time on top of chunked prefill's iterations (served
decode-only iterations took the table's GPU time). The mux's prefill beside decode is slowed as the
table's co-run cells say, per decode partition (`--prefill-slowdown table`, nothing fitted): on the
served points that gives prefill busy 15.2 / 28.3 s against 15.8 / 29.0 served, and P99 TTFT
2.56 / 5.18 s against 2.68 / 5.05 (x1.14, fitted to the busy time, gives 2.61 / 5.11). CPU, ~10 s:

    python bench/results/conv_uncapped_h100_s22/predict_next.py > bench/results/conv_uncapped_h100_s22/predict_next.md
"""
from sglang_mux import sim
from sglang_mux.estimator import Estimator
from sglang_mux.sim_chunked import simulate_chunked

T = "contention_tables/llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3"
J = "bench/results/sim_calibration_s21/served_mux_3.timeline.jsonl.xz"
TRACE = "bench/data/conversation_sessions20.jsonl"
RATES = (0.75, 1.0, 1.25, 1.5, 1.75)
SPAN, TBT, TTFT = 90, 50.0, 10.0

est = Estimator.from_table(T)
jit, host = sim.decode_jitter(J), sim.served_host_ms(J)
corun = sim.table_prefill_slowdown(T, est)
systems = {
    "mux": (358_800, lambda reqs, seed: sim.run_policies(
        reqs, est, "dispatcher", tbt_slo_ms=TBT, ttft_slo_ms=10_000, jitter=jit, online_guard=True,
        prefill_slowdown=corun, host_draws=host, seed=seed)[0].summary),
    "chunked 512 + mixed": (423_494, lambda reqs, seed: simulate_chunked(
        reqs, est, budget=512, host_ms=0.0, tbt_slo_ms=TBT, ttft_slo_ms=10_000).summary),
}
print(f"P99 TBT <= {TBT:g} ms, P99 TTFT <= {TTFT:g} s, no drift; 90 s of Poisson arrivals per rate. "
      "Each cell: P99 TTFT s, P99 TBT ms. Served on seed 0 (this directory): mux passed 0.75, chunked 512 passed 1.\n")
print("| seed | system | " + " | ".join(f"{r:g}" for r in RATES) + " | goodput |")
print("|---|---|" + "---|" * len(RATES) + "---:|")
for seed in (0, 1):
    for name, (pool, run) in systems.items():
        cells, good, failed = [], None, False
        for rate in RATES:
            reqs = sim.load_trace(TRACE, limit=round(rate * SPAN), rate=rate, arrival="poisson", seed=seed,
                                  cache_tokens=pool)
            s = run(reqs, seed)
            ok = s["ttft_p99_s"] <= TTFT and s["tbt_p99_ms"] <= TBT and s["ttft_drift"]["ok"]
            failed = failed or not ok
            good = rate if not failed else good
            cells.append(f"{s['ttft_p99_s']:.1f}, {s['tbt_p99_ms']:.0f}" + ("" if s["ttft_drift"]["ok"] else " drift"))
        print(f"| {seed} | {name} | " + " | ".join(cells) + f" | {'< %g' % RATES[0] if good is None else f'{good:g}'} |")
