"""Why DP 2 served more than twice one replica (CPU, seconds): the simulator's hybrid on the H200 table,
one replica fed (a) Poisson arrivals at R, as bench.run sends to one server, and (b) every other
request of a Poisson stream at 2R (the even ones, then the odd), as SGLang's round-robin controller
deals a DP-2 server's arrivals to its two replicas (each replica's prefix cache sees only its own
requests). Requests come from the slice bench.run sent (its first requests in trace order). Capped
conversation, seed 0, 30-s points (the dp part's), TBT 50, P99 TTFT 5 s, the drift test.

    python bench/results/h200x4_s49_2026-11-28/dp/arrivals.py > bench/results/h200x4_s49_2026-11-28/dp/arrivals.md
"""
import math
import sys
import tempfile
from collections import OrderedDict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from bench.analysis import sim_hybrid_map as M  # noqa: E402
import numpy as np  # noqa: E402

from sglang_mux import traces  # noqa: E402
from sglang_mux.drift import drift  # noqa: E402

TRACE = "bench/data/conversation_first1000.jsonl"  # what bench.run sent
SPAN, CAP, TBT, TTFT_S = 30, 8000, 50.0, 5.0
RATES = (3.6, 4.0, 4.25, 4.5, 4.75, 5.0, 5.25, 5.5, 5.75, 6.0)


def stream(rate: float, n: int, take=slice(None)) -> list:
    """The first n conversation requests with Poisson arrivals at ``rate`` (seed 0), then ``take``
    of them, each one's reuse from the requests taken before it only (load_trace's LRU, no cap)."""
    rows = traces.read_rows(TRACE, n)
    rows.sort(key=lambda x: x["timestamp"])
    arr = traces.poisson_arrivals(len(rows), rate, 0)
    cache, out = OrderedDict(), []
    for i in range(len(rows))[take]:
        x = rows[i]
        k, ids = int(x["input_length"]), list(x.get("hash_ids") or [])
        if k > CAP:
            k, ids = CAP, ids[: math.ceil(CAP / traces.BLOCK)]
        hit = 0
        for h in ids:
            if h not in cache:
                break
            hit += 1
        for h in ids:
            cache[h] = None
        out.append(traces.TraceReq(f"r{i}", float(arr[i]), k, max(1, int(x["output_length"])),
                                   min(hit * traces.BLOCK, max(0, k - 1))))
    return out  # arrivals as sent (a replica's first may come after 0)


def simulate(reqs, est, jit, host):
    w = M.WORKLOADS["capped conversation (<= 8000)"]
    return M.sim.run_policies(reqs, est, "hybrid", tbt_slo_ms=TBT, ttft_slo_ms=TTFT_S * 1e3, jitter=jit,
                              online_guard=True, prefill_slowdown=w["slow"], host_draws=host, seed=0,
                              fused_host_ms=w["fused_host"], prefill_graph=True)[0]


def verdict(parts) -> str:
    """bench.run's rule over the requests of every (requests, SimResult) in ``parts`` pooled, as a
    client of the whole server sees them: P99 TTFT, the highest replica's P99 TBT (a pooled P99 lies
    at or below it), the drift test over all requests by arrival."""
    reqs = [q for r, _ in parts for q in r]
    ttft = np.concatenate([res.ttft_s for _, res in parts])
    order = np.argsort([q.arrival_s for q in reqs], kind="stable")
    tp, tbt = float(np.percentile(ttft, 99)), max(res.summary["tbt_p99_ms"] for _, res in parts)
    d = drift(1e3 * ttft[order])
    ok = tp <= TTFT_S and tbt <= TBT and d["ok"]
    return (f"{'✓' if ok else '✗'} (P99 TTFT {tp:.2f} s, P99 TBT {tbt:.1f} ms, "
            f"drift {'ok' if d['ok'] else 'yes'}, {len(reqs)} requests)")


def main() -> None:
    est, jit, host, corun = M.simulator_inputs("contention_tables/llama-3.1-8b__nvidia-h200__fa3")
    print("| rate per replica | one replica, Poisson at R | DP 2 at 2R: replica 0 (even requests) | replica 1 (odd) | DP 2, both pooled |")
    print("|---:|---|---|---|---|")
    for r in RATES:
        one = stream(r, round(r * SPAN))
        dp = [stream(2 * r, round(2 * r * SPAN), slice(k, None, 2)) for k in (0, 1)]
        runs = [(q, simulate(q, est, jit, host)) for q in (one, *dp)]
        cols = [verdict([x]) for x in runs] + [verdict(runs[1:])]
        print(f"| {r:g} | " + " | ".join(cols) + " |", flush=True)


if __name__ == "__main__":
    main()
