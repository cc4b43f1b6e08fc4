"""The one way a policy is built by name: for the server, the simulator and `dispatch plan`."""

from __future__ import annotations

from sglang_mux.cli import UsageError
from sglang_mux.policy.baselines import BatchSizePolicy, FixedPolicy
from sglang_mux.policy.dispatcher import MuxDispatcher
from sglang_mux.policy.hybrid import HybridPolicy
from sglang_mux.policy.protocol import EstimatorLike, Policy
from sglang_mux.policy.slo import SLO

NAMES = ("hybrid", "dispatcher", "batch-size", "fixed:<decode SMs>")


def make_policy(name: str, estimator: EstimatorLike, slo: SLO = SLO(), *, preemption: bool = True,
                fcfs: bool = False, **kw) -> Policy:
    """'hybrid' | 'dispatcher' | 'batch-size' | 'fixed:<decode SMs>' (bare 'fixed' = 64 decode
    SMs). ``slo``, ``preemption`` and ``fcfs`` (the prefill queue in arrival order, not by TTFT
    deadline) go to the dispatcher and the hybrid only; ``kw`` to the policy's constructor.
    Raises ValueError for an unknown name."""
    if name == "dispatcher":
        return MuxDispatcher(estimator, slo, preemption=preemption, fcfs=fcfs, **kw)
    if name == "hybrid":
        return HybridPolicy(estimator, slo, preemption=preemption, fcfs=fcfs, **kw)
    if name == "batch-size":
        return BatchSizePolicy(estimator, **kw)
    if name == "fixed" or name.startswith("fixed:"):
        return FixedPolicy(estimator, int(name.partition(":")[2] or 64), **kw)
    raise ValueError(f"unknown policy {name!r}: use {', '.join(NAMES)}")


def policy_name(args) -> str:
    """make_policy's name for a server's settings (`MuxArgs`: ``policy`` and ``fixed_decode_sms``):
    'fixed' becomes 'fixed:<fixed_decode_sms>', the others stay."""
    return f"fixed:{args.fixed_decode_sms}" if args.policy == "fixed" else args.policy


def check_policy_name(name: str, estimator: EstimatorLike) -> None:
    """A ``--policy`` name that `make_policy` can build on this estimator's partitions, else a
    `UsageError` saying which names and decode partitions there are."""
    opts = list(estimator.decode_sms_options)
    if name in ("dispatcher", "hybrid", "batch-size"):
        return
    if name == "fixed" or name.startswith("fixed:"):
        d = name.partition(":")[2] or "64"
        if d.isdigit() and int(d) in opts:
            return
        raise UsageError(f"--policy {name}: {d} SMs is not a decode partition of this table; its partitions are "
                         f"{', '.join(map(str, opts))} (e.g. fixed:{opts[len(opts) // 2]})")
    raise UsageError(f"--policy {name!r} is not a policy; use {', '.join(NAMES)} "
                     f"(decode partitions: {', '.join(map(str, opts))})")
