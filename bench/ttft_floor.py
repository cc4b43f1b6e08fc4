"""The TTFT floor of a trace on one GPU: every request's prefill alone on the whole GPU, at the
table's solo estimate, with the prefix cache's reuse (``sglang_mux.sim.load_trace``: unbounded
or LRU of ``--cache-tokens``). No single-GPU system, multiplexed or chunked, answers a request
faster than its prefill alone, so a percentile of these times bounds the same percentile of any
system's TTFT from below, before queueing. A TTFT SLO under that bound leaves no goodput to
compare. With ``--ttft-ms-per-token K`` the floors are judged by the length-aware SLO (bench.run's
``--ttft-slo-ms-per-token``): each floor less K ms per prompt token.

    python -m bench.ttft_floor --table TABLE --trace PATH [--input-cap N] [--ttft-ms-per-token K]
"""
from __future__ import annotations

import datetime as dt
import json
import sys
from typing import Sequence

import numpy as np
from tqdm import tqdm

from sglang_mux import cli
from sglang_mux.estimator import Estimator
from sglang_mux.latency_model import PrefillReq
from sglang_mux.sim import TraceReq

from sglang_mux import cli_io as _cli_io

PERCENTILES = (50, 90, 99)


def floor_s(est: Estimator, reqs: Sequence[TraceReq], total_sms: int) -> np.ndarray:
    """Each request's prefill alone on ``total_sms``, in seconds."""
    # a whole trace is some seconds of estimates: progress on a terminal
    return np.array([est.prefill_ms(total_sms, [PrefillReq(r.n_input - r.reused, r.reused)])
                     for r in tqdm(reqs, desc="prefill floor", unit="req", disable=None, file=sys.stderr,
                                   leave=False)]) / 1e3


def summarize(t: np.ndarray, slos_s: Sequence[float]) -> dict:
    out = {f"p{p}_s": round(float(np.percentile(t, p)), 3) for p in PERCENTILES}
    out["max_s"] = round(float(t.max()), 3)
    # the share over an SLO is what one percentile may lose: at or above 1 % no P99 can hold
    over = {f"{s:g}s": float((t > s).mean()) for s in slos_s}
    out["share_over"] = {k: round(v, 4) for k, v in over.items()}
    out["p99_feasible"] = {k: v < 0.01 for k, v in over.items()}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    pos_i = cli.positive(int)
    ap = cli.ArgumentParser(prog="python -m bench.ttft_floor", description=_cli_io.about(__doc__))
    ap.add_argument("--table", required=True, type=_cli_io.table_arg, help="a table directory or a shipped table's name "
                                                   "(contention_tables/<model>__<gpu>__<backend>)")
    ap.add_argument("--trace", default="conversation", help="trace file, or bundled: conversation | synthetic")
    ap.add_argument("--input-cap", type=pos_i, default=None, help="keep the first N prompt tokens")
    ap.add_argument("--limit", type=pos_i, default=None, help="first N requests")
    ap.add_argument("--session-sample", type=int, default=1, metavar="K", help="one session in K")
    ap.add_argument("--cache-tokens", type=pos_i, default=None, help="prefix cache (LRU); default unbounded")
    ap.add_argument("--slos-s", default="2,5", type=_cli_io.numbers(example="2,5"), help="TTFT SLOs to check, comma list of seconds")
    ap.add_argument("--ttft-ms-per-token", type=cli.positive(float, allow_zero=True), default=0.0, metavar="K",
                    help="judge each floor less K ms per prompt token (the length-aware SLO; default 0: flat)")
    a = ap.parse_args(argv)
    if a.session_sample < 1:
        ap.error("--session-sample K keeps one session in K: give K >= 1 (1 keeps the whole trace)")
    slos = a.slos_s
    est = _cli_io.estimator(a.table)
    reqs = _cli_io.load_trace(a.trace, limit=a.limit, input_cap=a.input_cap, cache_tokens=a.cache_tokens,
                              session_sample=a.session_sample)
    res = {"date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
           "command": " ".join(["python -m bench.ttft_floor", *(argv if argv is not None else sys.argv[1:])]),
           "requests": len(reqs), "total_sms": est.total_sms,
           "reused_share": round(sum(r.reused for r in reqs) / max(1, sum(r.n_input for r in reqs)), 4),
           "ttft_ms_per_token": a.ttft_ms_per_token,
           **summarize(floor_s(est, reqs, est.total_sms) - a.ttft_ms_per_token / 1e3 * np.array([r.n_input for r in reqs]),
                       slos)}
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    cli.run(main)
