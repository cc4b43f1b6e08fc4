"""Simulated goodput of the mux and chunked 512 + mixed on the uncapped conversation (CPU).

    python -m bench.analysis.predict_uncapped_conv      (from the repository root)

What it simulates: bench/plans/conv_uncapped_sweep.sh's workload (bench/data/
conversation_sessions20.jsonl, prompts up to 118K tokens, 90 s of Poisson arrivals per rate,
0.75-1.75 req/s, seeds 0 and 1), P99 TBT <= 50 ms, P99 TTFT <= 10 s, no TTFT drift, on the H100
FA3 table. The simulators carry the corrections found on the served uncapped points of
bench/results/conv_uncapped_h100_s22/ (its README, sim_vs_served.md), fitted on them
(in-sample): a prefix cache the size of each server's KV pool (423,494 tokens for chunked prefill
at --mem-fraction-static 0.85, 358,800 for the mux at 0.75) and no host time on top of chunked
prefill's iterations. The mux's prefill beside decode is slowed as the table's co-run cells say,
per decode partition (nothing fitted). Host times and decode jitter are drawn from a served mux
timeline (TIMELINE below).

Output: a markdown table on stdout (each cell P99 TTFT s, P99 TBT ms; the goodput), as in
bench/results/conv_uncapped_h100_s22/predict_next.md. About 10 s. No arguments.
"""
from __future__ import annotations

from sglang_mux.policy import SLO
from sglang_mux import cli, sim
from sglang_mux.estimator import Estimator
from sglang_mux.sim_chunked import simulate_chunked

TABLE = "contention_tables/llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3"
TIMELINE = "bench/results/sim_calibration_s21/served_mux_3.timeline.jsonl.xz"  # host times, jitter
TRACE = "bench/data/conversation_sessions20.jsonl"
RATES = (0.75, 1.0, 1.25, 1.5, 1.75)
SPAN, TBT, TTFT = 90, 50.0, 10.0


def predict() -> None:
    est = Estimator.from_table(TABLE)
    jit, host = sim.decode_jitter(TIMELINE), sim.served_host_ms(TIMELINE)
    corun = sim.table_prefill_slowdown(TABLE, est)
    systems = {
        "mux": (358_800, lambda reqs, seed: sim.run_policies(
            reqs, est, "dispatcher", sim.Calibration(jitter=jit, prefill_slowdown=corun, host_draws=host),
            slo=SLO(TBT, 10_000), online_guard=True, seed=seed)[0].summary),
        "chunked 512 + mixed": (423_494, lambda reqs, seed: simulate_chunked(
            reqs, est, budget=512, host_ms=0.0, slo=SLO(TBT, 10_000)).summary),
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


def main(argv=None) -> int:
    ap = cli.ArgumentParser(prog="python -m bench.analysis.predict_uncapped_conv", description=__doc__.split("\n\n")[0])
    ap.parse_args(argv)
    predict()
    return 0


if __name__ == "__main__":
    cli.run(main)
