"""The mux against chunked prefill on the Mooncake synthetic trace (64 % prefix reuse), as
bench/plans/synthetic_sweep.sh runs it: the shipped first 500 requests
(bench/data/synthetic_first500.jsonl), prompts capped at 100,000 tokens for every system (the one
prompt over the model's context, 134,773 tokens, would fail on every server), 90 s of Poisson
arrivals per rate, P99 TBT <= 50 ms, P99 TTFT <= 10 s / 5 s, no drift. Both simulators as
corrected on the served uncapped conversation (../conv_uncapped_h100_s22/predict_next.py): a
prefix cache the size of each server's KV pool, no host time on top of chunked iterations, the
mux's prefill beside decode as the table's co-run cells say. They were a step pessimistic for
chunked prefill there (chunked 512 served 1 req/s where they said 0.75). CPU, ~1 minute:

    python bench/results/sim_synthetic_s22/predict.py > bench/results/sim_synthetic_s22/predict.md

Another GPU's table and pools: argv TABLE MUX_POOL CHUNKED_POOL (the H200's in
bench/results/synthetic_h200_s23/predict_h200.md). A fourth argument OFFSET simulates the window
there of bench/data/synthetic_first1200.jsonl with its history warm, as `bench.run --offset OFFSET
--warm-history` serves it (bench/results/sim_synthetic_warm_s24/).
"""
import sys

from sglang_mux import sim
from sglang_mux.estimator import Estimator
from sglang_mux.sim_chunked import simulate_chunked

if len(sys.argv) not in (1, 4, 5):
    sys.exit("usage: predict.py [TABLE MUX_POOL CHUNKED_POOL [OFFSET]]  (pools in tokens, from the servers' logs)")
T, MUX_POOL, CHUNKED_POOL = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3])) if len(sys.argv) > 1 else \
    ("contention_tables/llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3", 358_800, 423_494)
OFFSET = int(sys.argv[4]) if len(sys.argv) == 5 else 0
J = "bench/results/sim_calibration_s21/served_mux_3.timeline.jsonl.xz"
TRACE = "bench/data/synthetic_first1200.jsonl" if OFFSET else "bench/data/synthetic_first500.jsonl"
RATES = (0.75, 1.0, 1.25, 1.5, 2.0)
SPAN, TBT, TTFTS, CAP = 90, 50.0, (10.0, 5.0), 100_000

est = Estimator.from_table(T)
jit, host = sim.decode_jitter(J), sim.served_host_ms(J)
corun = sim.table_prefill_slowdown(T, est)


def chunked(budget):
    return lambda reqs, seed: simulate_chunked(reqs, est, budget=budget, host_ms=0.0, tbt_slo_ms=TBT,
                                               ttft_slo_ms=10_000).summary


systems = {
    "mux": (MUX_POOL, lambda reqs, seed: sim.run_policies(
        reqs, est, "dispatcher", tbt_slo_ms=TBT, ttft_slo_ms=10_000, jitter=jit, online_guard=True,
        prefill_slowdown=corun, host_draws=host, seed=seed)[0].summary),
    **{f"chunked {b} + mixed": (CHUNKED_POOL, chunked(b)) for b in (256, 512, 1024)},
}
print(f"P99 TBT <= {TBT:g} ms, no drift; goodput at P99 TTFT <= {TTFTS[0]:g} s / <= {TTFTS[1]:g} s (the last rate "
      "passed before the first failure). Each cell: P99 TTFT s, P99 TBT ms.\n")
print("| seed | system | " + " | ".join(f"{r:g}" for r in RATES) + " | goodput 10 s / 5 s |")
print("|---|---|" + "---|" * len(RATES) + "---:|")
for seed in (0, 1):
    for name, (pool, run) in systems.items():
        cells, good, failed = [], {t: None for t in TTFTS}, {t: False for t in TTFTS}
        for rate in RATES:
            reqs = sim.load_trace(TRACE, limit=round(rate * SPAN), rate=rate, arrival="poisson", seed=seed,
                                  cache_tokens=pool, input_cap=CAP, offset=OFFSET, warm_history=bool(OFFSET))
            s = run(reqs, seed)
            for t in TTFTS:
                failed[t] = failed[t] or not (s["ttft_p99_s"] <= t and s["tbt_p99_ms"] <= TBT and s["ttft_drift"]["ok"])
                good[t] = rate if not failed[t] else good[t]
            cells.append(f"{s['ttft_p99_s']:.1f}, {s['tbt_p99_ms']:.0f}" + ("" if s["ttft_drift"]["ok"] else " drift"))
        gs = " / ".join(f"< {RATES[0]:g}" if good[t] is None else f"{good[t]:g}" for t in TTFTS)
        print(f"| {seed} | {name} | " + " | ".join(cells) + f" | {gs} |")
