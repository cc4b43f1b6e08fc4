"""SGLang's chunked prefill replayed with the estimator playing the GPU: the baseline the mux is
judged against, on the same requests, arrivals and metrics as ``sim.simulate``.

    python -m sglang_mux.sim_chunked --table NAME|DIR --trace conversation --arrival poisson --rate 4 \\
        --limit 180 --input-cap 8000 --budget 512 [--no-mixed] [--host-ms H] [--json]

Every iteration runs on the whole GPU. Prompt tokens are taken first come, first served, up to
``budget`` per iteration: the rest of the request being chunked first, then the next ones, whole
or cut. With mixed chunks (SGLang's ``--enable-mixed-chunk``) the running decode batch rides in
the same iteration, as SGLang runs it: one extend batch, each piece with the prompt tokens before it
as reused context and each decoding request one new token on its context, the decode rows counted
in ``budget`` (SGLang's PrefillAdder does: no prompt token runs while the rows fill it), timed by
``Estimator.fused_ms``, the table's prefill model, padded as SGLang's default prefill CUDA graph
(captured up to ``budget``) pads it (docs/sim.md compares it with served points). Without mixing a
chunk runs alone and the decode batch waits for it. An iteration without prompt tokens is a decode
step (the table's decode model). ``host_ms`` is added to every iteration (default 0, the GPU
alone; docs/sim.md says which value reproduces served points). A request's
first token comes at the end of the iteration that ran its last piece; it decodes from the next
iteration on. No KV-capacity limit, as in ``sim``. It prints ``sim``'s table (the columns are
explained below it) or, with ``--json``, the settings and the summary. Bad arguments or a malformed
trace: one ``error:`` line and exit status 2.
"""

from __future__ import annotations

from collections import deque
from typing import Sequence

import numpy as np

from sglang_mux import cli
from sglang_mux.latency_model.terms import PrefillReq
from sglang_mux.policy import SLO, EstimatorLike
from sglang_mux.sim import (SimResult, TraceReq, add_trace_args, drift_tests, estimator_from_args, print_results,
                            slo_from_args, trace_from_args)


def simulate_chunked(reqs: Sequence[TraceReq], estimator: EstimatorLike, *, budget: int = 512, mixed: bool = True,
                     host_ms: float = 0.0, slo: SLO = SLO(), name: str | None = None,
                     cap: int | None = None) -> SimResult:
    """Replay ``reqs`` under SGLang's chunked prefill (the module docstring), judged by ``slo``.
    ``cap``: the capped baseline (`bench.capped_prefill`): a request takes at most ``cap`` tokens
    of an iteration, and while one is part-way through its prompt a waiting one that needs more
    than that is passed over (it keeps its place). Raises ValueError for a budget or cap <= 0 or
    a negative host time."""
    if budget <= 0 or host_ms < 0 or (cap is not None and cap <= 0):
        raise ValueError(f"budget and cap must be > 0 and host_ms >= 0, got {budget}, {cap}, {host_ms}")
    # SGLang captures its prefill graph up to the chunk size
    est, total = estimator.with_prefill_graph(budget), estimator.total_sms
    reqs = sorted(reqs, key=lambda q: q.arrival_s)
    n = len(reqs)
    arrival = np.array([q.arrival_s for q in reqs])
    out_len = np.array([q.output_len for q in reqs], dtype=np.int64)
    first_tok = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    waiting: deque = deque()  # [index, new tokens done]
    decoding: dict[int, list] = {}  # index -> [tokens left, context, last token time]
    gaps: list[float] = []
    max_gap = np.zeros(n)  # each request's longest gap (ms)
    t, nxt, done, iters = 0.0, 0, 0, 0
    while done < n:
        while nxt < n and reqs[nxt].arrival_s <= t + 1e-12:
            waiting.append([nxt, 0])
            nxt += 1
        if not waiting and not decoding:
            t = reqs[nxt].arrival_s
            continue
        pieces, finished, room = [], [], budget - (len(decoding) if mixed else 0)
        # The one being chunked is first in the queue: requests ahead of it have finished (one
        # passed over is behind it, and the next to start is the first after it finishes).
        mid = waiting[0] if waiting and waiting[0][1] > 0 else None
        for w in waiting:  # first come, first served
            if room <= 0:
                break
            q = reqs[w[0]]
            left = q.n_input - q.reused - w[1]
            share = room if cap is None else min(room, cap)
            if left > share and mid is not None and w is not mid:
                continue  # capped: one request part-way at a time (uncapped the room is 0 here)
            take = min(share, left)
            pieces.append(PrefillReq(take, q.reused + w[1]))
            w[1] += take
            room -= take
            if q.reused + w[1] >= q.n_input:
                finished.append(w[0])
                mid = None if w is mid else mid
            else:
                mid = w
        runs_decode = bool(decoding) and (mixed or not pieces)
        ctx = [d[1] for d in decoding.values()] if runs_decode else []
        if pieces:  # a mixed batch is one extend batch: each decode request one new token
            ms = est.fused_ms(pieces, ctx)
        else:
            ms = est.decode_solo_ms(total, len(ctx), sum(ctx), max_reused=max(ctx))
        t += (ms + host_ms) / 1e3
        iters += 1
        if runs_decode:
            for i in list(decoding):
                d = decoding[i]
                gaps.append((t - d[2]) * 1e3)
                max_gap[i] = max(max_gap[i], gaps[-1])
                d[0] -= 1
                d[1] += 1
                d[2] = t
                if d[0] <= 0:
                    finish[i] = t
                    done += 1
                    del decoding[i]
        if finished:  # a prefix of the queue, but where the cap passed a long prompt over
            gone = set(finished)
            waiting = deque(w for w in waiting if w[0] not in gone)
        for i in finished:
            first_tok[i] = t
            if out_len[i] <= 1:
                finish[i] = t
                done += 1
            else:
                decoding[i] = [int(out_len[i]) - 1, reqs[i].n_input + 1, t]
    ttft = first_tok - arrival
    g = np.asarray(gaps)
    ttft_ok = ttft * 1e3 <= slo.ttft_ms + slo.ttft_ms_per_token * np.array([q.n_input for q in reqs])
    makespan = float(np.nanmax(finish) - arrival.min())
    summary = {
        "policy": name or f"chunked-{budget}{'' if mixed else '-nomix'}{f'-cap{cap}' if cap else ''}", "requests": n,
        "ttft_p50_s": float(np.percentile(ttft, 50)), "ttft_p99_s": float(np.percentile(ttft, 99)),
        "tbt_p50_ms": float(np.percentile(g, 50)) if len(g) else float("nan"),
        "tbt_p99_ms": float(np.percentile(g, 99)) if len(g) else float("nan"),
        "ttft_attainment": float(np.mean(ttft_ok)),
        "tbt_attainment": float(np.mean(g <= slo.tbt_ms)) if len(g) else 1.0,
        "slo_attainment": float(np.mean(ttft_ok & (max_gap <= slo.tbt_ms))),
        "throughput_tok_s": float(out_len.sum() / makespan) if makespan > 0 else float("nan"),
        "makespan_s": makespan, "iterations": iters,
        **drift_tests(ttft, reqs),
    }
    return SimResult(summary["policy"], summary, ttft, finish)


def main(argv: list[str] | None = None, estimator=None) -> int:
    ap = cli.ArgumentParser(prog="python -m sglang_mux.sim_chunked", description=__doc__.split("\n\n")[0])
    add_trace_args(ap)
    ap.add_argument("--budget", type=cli.positive(int), default=512,
                    help="prompt tokens per iteration (--chunked-prefill-size)")
    ap.add_argument("--no-mixed", action="store_true", help="a chunk runs alone (no --enable-mixed-chunk)")
    ap.add_argument("--cap", type=cli.positive(int), default=None,
                    help="the capped baseline: at most this many tokens a request a step (bench.capped_prefill)")
    ap.add_argument("--host-ms", type=cli.positive(float, allow_zero=True), default=0.0,
                    help="time added to every iteration (ms; docs/sim.md says which reproduces served points)")
    ap.add_argument("--json", action="store_true", help="print the settings and the summary as JSON")
    a = ap.parse_args(argv)
    estimator = estimator_from_args(ap, a, estimator)
    reqs = trace_from_args(ap, a)
    r = simulate_chunked(reqs, estimator, budget=a.budget, mixed=not a.no_mixed, host_ms=a.host_ms,
                         slo=slo_from_args(a), cap=a.cap)
    print_results(a, vars(a), [r])
    return 0


if __name__ == "__main__":
    cli.run(main)
