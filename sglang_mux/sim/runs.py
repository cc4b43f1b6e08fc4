"""Several policies replayed on one trace, each planning as a server of it would."""

from __future__ import annotations

from typing import Sequence

from sglang_mux import cli
from sglang_mux.fused_price import HYBRID_GRAPH_MAX_TOKENS
from sglang_mux.policy import SLO, EstimatorLike, check_policy_name, make_policy
from sglang_mux.sim.calibration import Calibration
from sglang_mux.sim.replay import simulate
from sglang_mux.sim.summary import SimResult
from sglang_mux.traces import TraceReq


def policy_names(spec: str, estimator: EstimatorLike) -> list[str]:
    """``--policy``'s names: 'all' is every policy (each decode partition for fixed), else a comma
    list, each checked (`check_policy_name`: a UsageError saying what is offered)."""
    if spec == "all":
        return ["dispatcher", "batch-size"] + [f"fixed:{d}" for d in estimator.decode_sms_options] + ["hybrid"]
    names = [s.strip() for s in spec.split(",") if s.strip()]
    if not names:
        raise cli.UsageError(f"--policy {spec!r} names no policy; give hybrid, dispatcher, batch-size, fixed:<decode SMs>, "
                             "all, or a comma list of them")
    for nm in names:
        check_policy_name(nm, estimator)
    return names


def run_policies(reqs: Sequence[TraceReq], estimator: EstimatorLike, spec: str, calib: Calibration = Calibration(),
                 *, slo: SLO = SLO(), preemption: bool = True, seed: int = 0, timeline=None,
                 online_guard: bool = False, prefill_graph: bool = False,
                 layerwise_max_tokens: int | None = None, fcfs: bool = False) -> list[SimResult]:
    """`simulate` for each policy of ``spec`` (`policy_names`), planning for ``slo``.
    ``online_guard``: each policy plans with its own copy of ``estimator``, as a server starts
    (`EstimatorLike.fresh_planner`: its guard refined and its fused price learned from what runs);
    False: it plans with ``estimator`` itself. ``prefill_graph``: fused batches run through SGLang's
    prefill CUDA graph, as the server's hybrid runs them (`EstimatorLike.with_prefill_graph`).
    ``layerwise_max_tokens``: the hybrid's (the longest prompt one layer-wise prefill holds in the
    served server's memory; a longer one is fused in chunks; None: no limit). ``fcfs``: the
    server's --mux-fcfs-prefill (the dispatcher's and the hybrid's queue in arrival order)."""
    if prefill_graph:
        estimator = estimator.with_prefill_graph(HYBRID_GRAPH_MAX_TOKENS)
    out = []
    for nm in policy_names(spec, estimator):
        planner = estimator.fresh_planner() if online_guard else None
        # The hybrid weighs a partition's prefill at its served speed. Learning online, it learns
        # that as the server does (the planner's prefill_wall: batches' wall time over their T_P)
        # and is told nothing; else the simulator tells it the co-run slowdown it plays.
        kw = {"prefill_slowdown": 1.0 if online_guard else calib.prefill_slowdown,
              "layerwise_max_tokens": layerwise_max_tokens} if nm == "hybrid" else {}
        pol = make_policy(nm, planner or estimator, slo, preemption=preemption, fcfs=fcfs, **kw)
        out.append(simulate(reqs, estimator, pol, calib, slo=slo, name=nm, seed=seed, planner=planner,
                            timeline=timeline))
    return out
