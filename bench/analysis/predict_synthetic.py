"""Simulated goodput of the mux and chunked prefill on the Mooncake synthetic trace (CPU).

    python -m bench.analysis.predict_synthetic [TABLE MUX_POOL CHUNKED_POOL [OFFSET]]   (repository root)

What it simulates: bench/plans/synthetic_sweep.sh's workload, the shipped first 500 requests
(bench/data/synthetic_first500.jsonl), prompts capped at 100,000 tokens for every system, 90 s of
Poisson arrivals per rate (0.75-2 req/s), seeds 0 and 1, P99 TBT <= 50 ms, P99 TTFT <= 10 s / 5 s,
no TTFT drift. Both simulators as corrected on the served uncapped conversation (see
predict_uncapped_conv.py): a prefix cache the size of each server's KV pool, no host time on top of
chunked iterations, the mux's prefill beside decode slowed as the table's co-run cells say; host
times and decode jitter drawn from a served mux timeline (TIMELINE below).

Arguments (all or none of the first three): TABLE, a contention table directory (default: the H100
FA3 table); MUX_POOL and CHUNKED_POOL, the servers' KV pools in tokens, from their logs (default:
the H100's 358,800 / 423,494); OFFSET simulates that window of bench/data/synthetic_first1200.jsonl
with its history warm, as ``bench.run --offset OFFSET --warm-history`` serves it.

Output: a markdown table on stdout, one row per seed and system, each cell P99 TTFT s, P99 TBT ms,
and the goodput at both TTFT SLOs. About a minute.
"""
from __future__ import annotations

from sglang_mux.policy import SLO
from sglang_mux import cli, sim
from sglang_mux.estimator import Estimator
from sglang_mux.sim_chunked import simulate_chunked

TIMELINE = "bench/results/sim_calibration_s21/served_mux_3.timeline.jsonl.xz"  # host times, jitter
H100_TABLE = "contention_tables/llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3"
RATES = (0.75, 1.0, 1.25, 1.5, 2.0)
SPAN, TBT, TTFTS, CAP = 90, 50.0, (10.0, 5.0), 100_000


def predict(table: str, mux_pool: int, chunked_pool: int, offset: int) -> None:
    trace = "bench/data/synthetic_first1200.jsonl" if offset else "bench/data/synthetic_first500.jsonl"
    est = Estimator.from_table(table)
    jit, host = sim.decode_jitter(TIMELINE), sim.served_host_ms(TIMELINE)
    corun = sim.table_prefill_slowdown(table, est)

    def chunked(budget):
        return lambda reqs, seed: simulate_chunked(reqs, est, budget=budget, host_ms=0.0,
                                                   slo=SLO(TBT, 10_000)).summary

    systems = {
        "mux": (mux_pool, lambda reqs, seed: sim.run_policies(
            reqs, est, "dispatcher", sim.Calibration(jitter=jit, prefill_slowdown=corun, host_draws=host),
            slo=SLO(TBT, 10_000), online_guard=True, seed=seed)[0].summary),
        **{f"chunked {b} + mixed": (chunked_pool, chunked(b)) for b in (256, 512, 1024)},
    }
    print(f"P99 TBT <= {TBT:g} ms, no drift; goodput at P99 TTFT <= {TTFTS[0]:g} s / <= {TTFTS[1]:g} s (the last rate "
          "passed before the first failure). Each cell: P99 TTFT s, P99 TBT ms.\n")
    print("| seed | system | " + " | ".join(f"{r:g}" for r in RATES) + " | goodput 10 s / 5 s |")
    print("|---|---|" + "---|" * len(RATES) + "---:|")
    for seed in (0, 1):
        for name, (pool, run) in systems.items():
            cells, good, failed = [], {t: None for t in TTFTS}, {t: False for t in TTFTS}
            for rate in RATES:
                reqs = sim.load_trace(trace, limit=round(rate * SPAN), rate=rate, arrival="poisson", seed=seed,
                                      cache_tokens=pool, input_cap=CAP, offset=offset, warm_history=bool(offset))
                s = run(reqs, seed)
                for t in TTFTS:
                    failed[t] = failed[t] or not (s["ttft_p99_s"] <= t and s["tbt_p99_ms"] <= TBT and s["ttft_drift"]["ok"])
                    good[t] = rate if not failed[t] else good[t]
                cells.append(f"{s['ttft_p99_s']:.1f}, {s['tbt_p99_ms']:.0f}" + ("" if s["ttft_drift"]["ok"] else " drift"))
            gs = " / ".join(f"< {RATES[0]:g}" if good[t] is None else f"{good[t]:g}" for t in TTFTS)
            print(f"| {seed} | {name} | " + " | ".join(cells) + f" | {gs} |")


def main(argv=None) -> int:
    ap = cli.ArgumentParser(prog="python -m bench.analysis.predict_synthetic", description=__doc__.split("\n\n")[0])
    ap.add_argument("table", nargs="?", help=f"contention table directory (none: {H100_TABLE})")
    ap.add_argument("mux_pool", nargs="?", type=cli.positive(int), help="the mux server's KV pool, tokens (none: 358800)")
    ap.add_argument("chunked_pool", nargs="?", type=cli.positive(int),
                    help="the chunked-prefill servers' KV pool, tokens (none: 423494)")
    ap.add_argument("offset", nargs="?", type=cli.positive(int, allow_zero=True), default=0,
                    help="first request of the window in synthetic_first1200.jsonl, its history warm (0: the shipped 500)")
    a = ap.parse_args(argv)
    if a.table is None:
        a.table, a.mux_pool, a.chunked_pool = H100_TABLE, 358_800, 423_494
    elif a.chunked_pool is None:
        ap.error("give TABLE, MUX_POOL and CHUNKED_POOL together (pools in tokens, from the servers' logs)")
    predict(a.table, a.mux_pool, a.chunked_pool, a.offset)
    return 0


if __name__ == "__main__":
    cli.run(main)
