"""How fast can this machine's client drive a server? Measured against the stub on localhost.

    python -m bench.client_capacity [--out bench/results/client_capacity.json]

The stub (``bench.stub_server``, its own process) answers with TTFT 0 and ``--output-tokens``
tokens at ``--tbt-ms``; the client (``bench.client``) offers Poisson arrivals of fixed-size
requests (``--prompt-tokens`` token ids) for ``--point-s`` seconds per rate, doubling the
rate until a point fails, then bisecting. A rate is SUSTAINED when
  - every request finished (no error, no timeout);
  - P99 send lateness (actual - scheduled send) <= ``--max-lateness-ms``;
  - the client's own timing error stays small against the benchmark's SLOs: the P99 of
    the client's receive lag (chunk read time - the stub's send time ``stub_t``; both
    ``perf_counter``, i.e. the system-wide CLOCK_MONOTONIC) <= ``--max-lag-ms`` (5 ms, 10% of
    the 50 ms TBT SLO; a TBT is a difference of two such lags) and P99 TTFT <=
    ``--max-ttft-error-ms`` (50 ms, 1% of the 5 s TTFT SLO; the stub's TTFT is 0);
  - completions keep pace: (n-1)/(last end - first end) >= 0.95 x (n-1)/(arrival span).
Client and stub share the machine's CPUs, so the figure is a lower bound on the client alone.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from sglang_mux import cli

from . import client, metrics, workloads

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(url: str, rate: float, a: argparse.Namespace, seed: int) -> dict:
    n = max(2, round(rate * a.point_s))
    rng = np.random.default_rng(seed)
    ts = workloads.poisson_arrivals(n, rate, seed)
    wl = workloads.Workload("capacity", "generate", requests=[
        workloads.Request(f"cap-{i}", float(ts[i]), workloads.random_tokens(rng, a.prompt_tokens),
                          a.output_tokens) for i in range(n)])
    recs, info = client.run_workload(url, wl, deadline_s=wl.span_s + 30.0, progress=False,
                                     procs=a.client_procs, server_clock=True)
    s = metrics.summarize(recs)
    ends = sorted(r["end"] for r in recs if r["ok"])
    keep = (len(ends) - 1) / (ends[-1] - ends[0]) if len(ends) > 1 and ends[-1] > ends[0] else 0.0
    offered = (n - 1) / wl.span_s if wl.span_s > 0 else float("inf")
    why = []
    if s["n_failed"]:
        why.append(f"{s['n_failed']} failed")
    if (s["send_lateness_ms"]["p99"] or 0) > a.max_lateness_ms:
        why.append(f"P99 lateness {s['send_lateness_ms']['p99']:.1f} ms")
    lags = np.concatenate([np.asarray(r.get("lag_ms") or [], float) for r in recs] or [[]])
    lag99 = float(np.percentile(lags, 99)) if len(lags) else float("nan")
    if not lag99 <= a.max_lag_ms:
        why.append(f"P99 client lag {lag99:.1f} ms")
    if (s["ttft_ms"]["p99"] or 0) > a.max_ttft_error_ms:
        why.append(f"P99 TTFT {s['ttft_ms']['p99']:.1f} ms")
    if keep < 0.95 * offered:
        why.append(f"completions {keep:.0f}/s < 0.95 x {offered:.0f}/s")
    return {"rate": rate, "n": n, "sustained": not why, "reasons": why,
            "offered_rps": round(offered, 2), "completion_rps": round(keep, 2),
            "chunks_per_s": round(rate * a.output_tokens, 1),
            "p99_lateness_ms": s["send_lateness_ms"]["p99"], "p99_ttft_ms": s["ttft_ms"]["p99"],
            "p50_lag_ms": round(float(np.median(lags)), 3) if len(lags) else None,
            "p99_lag_ms": round(lag99, 3),
            "p50_tbt_ms": s["tbt_ms"]["p50"], "p99_tbt_ms": s["tbt_ms"]["p99"],
            "elapsed_s": round(info["elapsed_s"] or 0, 2)}


def main(argv: list[str] | None = None) -> int:
    pos, pos_i = cli.positive(float), cli.positive(int)
    p = cli.ArgumentParser(prog="python -m bench.client_capacity", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=ROOT / "bench/results/client_capacity.json", help="the result (JSON)")
    p.add_argument("--point-s", type=pos, default=10.0, help="seconds of arrivals per rate")
    p.add_argument("--prompt-tokens", type=pos_i, default=256, help="per request")
    p.add_argument("--output-tokens", type=pos_i, default=16, help="per request")
    p.add_argument("--tbt-ms", type=pos, default=10.0, help="the stub's time between tokens")
    p.add_argument("--max-lateness-ms", type=pos, default=10.0, help="sustained: P99 send lateness at most this")
    p.add_argument("--max-lag-ms", type=pos, default=5.0, help="sustained: P99 client receive lag at most this")
    p.add_argument("--max-ttft-error-ms", type=pos, default=50.0, help="sustained: P99 TTFT at most this (the stub's is 0)")
    p.add_argument("--client-procs", type=pos_i, default=1, help="client processes")
    p.add_argument("--stub-workers", type=pos_i, default=1, help="stub server processes")
    p.add_argument("--start-rate", type=pos, default=50.0, help="first rate tried, requests/s (doubled until one fails)")
    p.add_argument("--max-rate", type=pos, default=6400.0, help="highest rate tried, requests/s")
    p.add_argument("--bisect", type=cli.positive(int, allow_zero=True), default=3,
                   help="bisection steps between the last sustained and the first failing rate")
    a = p.parse_args(argv)
    if a.start_rate > a.max_rate:
        p.error(f"--start-rate {a.start_rate:g} is above --max-rate {a.max_rate:g}")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    stub = subprocess.Popen([sys.executable, "-m", "bench.stub_server", "--port", str(port),
                             "--ttft-ms", "0", "--tbt-ms", str(a.tbt_ms),
                             "--workers", str(a.stub_workers)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    points: list[dict] = []
    try:
        t_end = time.monotonic() + 30
        while not client.health(url) and time.monotonic() < t_end:
            time.sleep(0.2)
        client.run_workload(url, workloads.Workload("warm", "generate", requests=[
            workloads.Request("w", 0.0, workloads.random_tokens(np.random.default_rng(0), 8), 2)]),
            10.0, progress=False)

        def run(rate: float) -> bool:
            pt = measure(url, rate, a, seed=len(points))
            points.append(pt)
            print(json.dumps(pt), file=sys.stderr, flush=True)
            return pt["sustained"]

        lo, hi, r = None, None, a.start_rate
        while r <= a.max_rate:
            if run(r):
                lo, r = r, r * 2
            else:
                hi = r
                break
        for _ in range(a.bisect if lo is not None and hi is not None else 0):
            mid = round((lo + hi) / 2, 1)
            if run(mid):
                lo = mid
            else:
                hi = mid
    finally:
        stub.terminate()
        stub.wait(10)
    res = {
        "sustained_rate_rps": lo,
        "sustained_chunks_per_s": None if lo is None else round(lo * a.output_tokens, 1),
        "first_failing_rate_rps": hi,
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(),
                    "processor": platform.processor() or platform.machine(),
                    "python": platform.python_version()},
        "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": shlex.join([sys.executable, "-m", "bench.client_capacity",
                               *(argv if argv is not None else sys.argv[1:])]),
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()},
        "criteria": __doc__.split("SUSTAINED when")[1].split("Client and stub")[0].strip(),
        "note": "client and stub share this machine's CPUs: a lower bound on the client alone",
        "points": points,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=1) + "\n")
    print(f"sustained: {lo} req/s ({res['sustained_chunks_per_s']} token chunks/s); "
          f"first failing {hi}; wrote {a.out}")
    return 0


if __name__ == "__main__":
    cli.run(main)
