"""The mux's simulated TBT-30 goodput with less host time per decode iteration (CPU).

    python -m bench.analysis.whatif_host_time      (from the repository root)

What it simulates: the capped conversation (<= 8000 tokens, bench.run's 45 s points at 2.5-4.5
req/s, Poisson seeds 0 and 1), P99 TBT <= 30 ms, P99 TTFT <= 5 s, no TTFT drift, on the H100 FA3
table, in the simulator calibrated against a served mux point (bench/results/sim_calibration_s21/:
host times and decode jitter drawn from its TIMELINE, prefill x1.4 beside decode). Variants of the
host time per decode iteration: as served; co-run iterations without their ``plan`` lap (the
policy's decision and SGLang's formation of a new prefill batch, as if it overlapped the decode's
GPU time: ``--mux-defer-prefill-start``); co-run iterations with decode-alone host times; every
host time halved; none.

Output: a markdown table on stdout, one row per seed and variant (each cell pass, P99 TTFT s,
P99 TBT ms; the goodput), as in bench/results/sim_calibration_s21/whatif_host.md. About 10 s.
"""
from __future__ import annotations

import pandas as pd

from sglang_mux.policy import SLO
from sglang_mux import cli, sim
from sglang_mux.estimator import Estimator
from sglang_mux.mux_metrics import host_ms_per_decode, load_timeline

TABLE = "contention_tables/llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3"
TIMELINE = "bench/results/sim_calibration_s21/served_mux_3.timeline.jsonl.xz"
POINTS = ((2.5, 112), (3, 135), (3.5, 158), (4, 180), (4.5, 202))  # bench.run's requests per 45 s point


def whatif() -> None:
    est = Estimator.from_table(TABLE)
    jit = sim.decode_jitter(TIMELINE)
    co, alone = sim.served_host_ms(TIMELINE)
    t = load_timeline(TIMELINE)
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
                r = sim.run_policies(reqs, est, "dispatcher",
                                     sim.Calibration(jitter=jit, prefill_slowdown=1.4, host_draws=draws),
                                     slo=SLO(30, 5000), online_guard=True, seed=seed)[0].summary
                ok = r["ttft_p99_s"] <= 5 and r["tbt_p99_ms"] <= 30 and r["ttft_drift"]["ok"]
                failed = failed or not ok
                good = rate if not failed else good
                cells.append(f"{'✓' if ok else '✗'} {r['ttft_p99_s']:.1f} s, {r['tbt_p99_ms']:.1f}"
                             + ("" if r["ttft_drift"]["ok"] else ", drift"))
            print(f"| {seed} | {name} | " + " | ".join(cells) + f" | {good if good is not None else '< ' + str(POINTS[0][0])} |")


def main(argv=None) -> int:
    ap = cli.ArgumentParser(prog="python -m bench.analysis.whatif_host_time", description=__doc__.split("\n\n")[0])
    ap.parse_args(argv)
    whatif()
    return 0


if __name__ == "__main__":
    cli.run(main)
