"""``python -m sglang_mux.dispatch plan``: one policy decision for a described state, as JSON.

    python -m sglang_mux.dispatch plan --table NAME|DIR --decode-bs 64 --decode-reused 4096
        [--decode-max-reused 32768] --prefill-new 8192 [--prefill-reused 0] [--policy hybrid]

The decision is the server's own (`sglang_mux.policy`: the policies, `make_policy`); the table's
estimator prices it. The default policy is the server's (``--mux-policy``'s default).
"""

from __future__ import annotations

import json
import sys
from typing import Sequence

from sglang_mux import cli
from sglang_mux.latency_model.terms import PrefillReq
from sglang_mux.mux_args import MuxArgs
from sglang_mux.policy import SLO, EstimatorLike, PrefillBatchState, Snapshot, WaitingReq, check_policy_name, make_policy


def main(argv: Sequence[str] | None = None, estimator: EstimatorLike | None = None) -> int:
    pos, nonneg = cli.positive, lambda kind: cli.positive(kind, allow_zero=True)
    ap = cli.ArgumentParser(prog="python -m sglang_mux.dispatch", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("plan", help="one decision for a described state; prints the Plan as JSON",
                       description="One decision for a described state; prints the Plan as JSON.")
    p.add_argument("--table", help="a shipped table's name (e.g. llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3) or a "
                   "contention_tables/<model>__<gpu>__<backend>/ dir")
    p.add_argument("--policy", default=MuxArgs.policy, help="hybrid | dispatcher | batch-size | fixed:<decode SMs> "
                   "(default: the server's)")
    p.add_argument("--tbt-slo-ms", type=pos(float), default=50.0, help="time-between-tokens SLO (ms)")
    p.add_argument("--ttft-slo-ms", type=pos(float), default=5000.0, help="time-to-first-token SLO (ms)")
    p.add_argument("--ttft-ms-per-token", type=nonneg(float), default=0.0, help="TTFT SLO += this x prompt tokens")
    p.add_argument("--decode-bs", type=nonneg(int), default=0, help="requests in the decode batch (0 = none)")
    p.add_argument("--decode-reused", type=nonneg(int), default=0, help="context tokens per decode request")
    p.add_argument("--decode-max-reused", type=nonneg(int), default=None,
                   help="longest context in the decode batch (default: --decode-reused, a uniform batch)")
    p.add_argument("--prefill-new", type=nonneg(int), default=0, help="new tokens of the prefill (0 = none)")
    p.add_argument("--prefill-reused", type=nonneg(int), default=0, help="reused (cached) tokens of the prefill")
    p.add_argument("--prefill-layers-done", type=nonneg(int), default=0, help=">0: an active batch this far along")
    p.add_argument("--prefill-age-ms", type=nonneg(float), default=0.0, help="how long the prefill has waited")
    p.add_argument("--waiting-new", type=nonneg(int), default=0,
                   help="with --prefill-layers-done: a waiting request of this many new tokens (may preempt)")
    p.add_argument("--waiting-reused", type=nonneg(int), default=0)
    p.add_argument("--waiting-age-ms", type=nonneg(float), default=0.0)
    p.add_argument("--no-preemption", action="store_true")
    a = ap.parse_args(argv)
    if a.decode_max_reused is not None and a.decode_max_reused < a.decode_reused:
        p.error("--decode-max-reused is the longest context: it cannot be below --decode-reused")
    est = estimator
    if est is None:
        if not a.table:
            p.error("the following arguments are required: --table (a shipped table's name or a table dir)")
        from sglang_mux.estimator import from_table_arg

        est = from_table_arg(p, a.table)
    try:
        check_policy_name(a.policy, est)
    except cli.UsageError as e:
        p.error(str(e))
    if a.prefill_layers_done >= est.num_layers:
        p.error(f"--prefill-layers-done {a.prefill_layers_done}: the model has {est.num_layers} layers; "
                f"give 0 (a waiting batch) to {est.num_layers - 1}")
    pol = make_policy(a.policy, est, SLO(a.tbt_slo_ms, a.ttft_slo_ms, a.ttft_ms_per_token),
                      preemption=not a.no_preemption)
    now = 1000.0
    active, waiting = None, ()
    if a.prefill_new > 0:
        arr = now - a.prefill_age_ms / 1e3
        if a.prefill_layers_done > 0:
            active = PrefillBatchState(["prefill"], [PrefillReq(a.prefill_new, a.prefill_reused)],
                                       a.prefill_layers_done, arr)
        else:
            waiting = (WaitingReq("prefill", arr, a.prefill_new, a.prefill_reused),)
    if a.waiting_new > 0 and active is not None:
        waiting = (WaitingReq("waiting", now - a.waiting_age_ms / 1e3, a.waiting_new, a.waiting_reused),)
    snap = Snapshot(now, a.decode_bs, a.decode_bs * a.decode_reused,
                    decode_max_reused=a.decode_reused if a.decode_max_reused is None else a.decode_max_reused,
                    active_prefill=active, waiting=waiting)
    out = pol.plan(snap).to_dict()
    out["num_layers"] = est.num_layers
    json.dump(out, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    cli.run(main)
