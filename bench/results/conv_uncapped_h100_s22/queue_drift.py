"""The drift test on long-context traces: bench.metrics.drift (the goodput rule) against
bench.metrics.queue_drift (each request's wait beyond its own prefill), on this directory's served
points and on the corrected simulators' points of the uncapped conversation and the synthetic
slices (as predict_next.py and ../sim_synthetic_s22/predict.py run them). CPU, ~15 s:

    python bench/results/conv_uncapped_h100_s22/queue_drift.py > bench/results/conv_uncapped_h100_s22/queue_drift.md
"""
import json
import lzma
from pathlib import Path

from bench import metrics
from sglang_mux import sim
from sglang_mux.estimator import Estimator
from sglang_mux.sim_chunked import simulate_chunked

HERE = Path(__file__).resolve().parent
T = "contention_tables/llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3"
J = "bench/results/sim_calibration_s21/served_mux_3.timeline.jsonl.xz"


def verdict(d):
    return f"{d['tail_median_ms']:.0f} / {d['limit_ms']:.0f} {'ok' if d['ok'] else '**drift**'}"


print("Each cell: tail median / limit (ms), and the verdict. drift: TTFT (the goodput rule); queue: "
      "TTFT less c x new prompt tokens, c fitted on the point's first half (`bench.metrics.queue_drift`).\n")
print("## Served (one H100, seed 0)\n")
print("| point | drift | queue drift | c (µs/token) |\n|---|---|---|---:|")
for p in sorted(HERE.glob("*/*__*.jsonl.xz")):
    if p.parent.name == "sweep" and p.name.startswith("mux__"):
        continue  # the run that ran out of memory
    df = metrics.per_request([json.loads(x) for x in lzma.open(p, "rt")])
    d, q = metrics.ttft_drift(df), metrics.ttft_queue_drift(df)
    print(f"| {p.parent.name}/{p.name[:-9]} | {verdict(d)} | {verdict(q)} | {q['service_ms_per_token'] * 1e3:.1f} |")

est = Estimator.from_table(T)
jit, host = sim.decode_jitter(J), sim.served_host_ms(J)
corun = sim.table_prefill_slowdown(T, est)
runs = {
    "mux": (358_800, lambda reqs, seed: sim.run_policies(
        reqs, est, "dispatcher", tbt_slo_ms=50, ttft_slo_ms=10_000, jitter=jit, online_guard=True,
        prefill_slowdown=corun, host_draws=host, seed=seed)[0].summary),
    "chunked 512": (423_494, lambda reqs, seed: simulate_chunked(
        reqs, est, budget=512, host_ms=0.0, tbt_slo_ms=50, ttft_slo_ms=10_000).summary),
}
for label, trace, cap, rates in (
        ("uncapped conversation", "bench/data/conversation_sessions20.jsonl", None, (0.75, 1.0, 1.25)),
        ("synthetic, capped at 100K", "bench/data/synthetic_first500.jsonl", 100_000, (0.75, 1.0, 1.25, 1.5))):
    print(f"\n## Simulated: {label}, 90 s per rate, P99 TBT 50 ms / TTFT 10 s\n")
    print("Goodput by each rule (the last rate passed before the first failure), and the verdicts by rate.\n")
    print("| seed | system | goodput: drift / queue drift | " + " | ".join(f"{r:g}" for r in rates) + " |")
    print("|---|---|---|" + "---|" * len(rates))
    for seed in (0, 1):
        for name, (pool, run) in runs.items():
            good, failed, cells = {}, {}, []
            for rate in rates:
                reqs = sim.load_trace(trace, limit=round(rate * 90), rate=rate, arrival="poisson", seed=seed,
                                      cache_tokens=pool, input_cap=cap)
                s = run(reqs, seed)
                base = s["ttft_p99_s"] <= 10 and s["tbt_p99_ms"] <= 50
                for rule in ("ttft_drift", "ttft_queue_drift"):
                    ok = base and s[rule]["ok"]
                    failed[rule] = failed.get(rule, False) or not ok
                    if not failed[rule]:
                        good[rule] = rate
                mark = lambda k: "✓" if s[k]["ok"] else "✗"  # noqa: E731
                cells.append(f"{'' if base else 'SLO ✗ '}{mark('ttft_drift')} / {mark('ttft_queue_drift')}")
            g = " / ".join(f"{good[k]:g}" if k in good else f"< {rates[0]:g}" for k in ("ttft_drift", "ttft_queue_drift"))
            print(f"| {seed} | {name} | {g} | " + " | ".join(cells) + " |")
