"""The policy seam: one decision per iteration, `Snapshot` -> `Plan`, shared by the server's
scheduler loop, the simulator and `python -m sglang_mux.dispatch plan`.

Plain Python, no torch. Modules: `plan` (the three kinds of plan), `snapshot` (what a policy
sees, and `apply_plan`), `slo` (the SLOs, checked once), `host_time` (the host-time budgets a
caller keeps and fills a snapshot from), `protocol` (what a policy needs of an estimator, and
what a caller needs of a policy), `base` / `dispatcher` / `hybrid` / `baselines` (the policies),
`factory` (`make_policy` by name).
"""

from sglang_mux.policy.base import BasePolicy, prefill_layers_for
from sglang_mux.policy.baselines import BatchSizePolicy, FixedPolicy
from sglang_mux.policy.dispatcher import MuxDispatcher
from sglang_mux.policy.factory import check_policy_name, make_policy, policy_name
from sglang_mux.policy.host_time import FUSED_HOST_QUANTILE, DecodeHostTime, HostBudgets
from sglang_mux.policy.hybrid import CHUNK_SIZES, HybridPolicy
from sglang_mux.policy.plan import (BATCH_SIZE, BEST_FIT, DECODE_ONLY, FIXED, FUSED, IDLE, KIND_DECODE, KIND_FUSED,
                                    KIND_SPATIAL, OVERLOAD_DECODE_FIRST, OVERLOAD_MAX_DECODE, PREEMPT_PREFIX,
                                    PARK_FUSED, PREFILL_ONLY, YIELD_FUSED, DecodePlan, FusedPlan, Plan, SpatialPlan)
from sglang_mux.policy.protocol import EstimatorLike, Policy, SoloOnlyEstimator
from sglang_mux.policy.slo import HOST_STALL_SHARE, SLO, SLOError
from sglang_mux.policy.snapshot import PrefillBatchState, Snapshot, WaitingReq, apply_plan, decode_contexts

__all__ = ["BATCH_SIZE", "BEST_FIT", "CHUNK_SIZES", "DECODE_ONLY", "FIXED", "FUSED", "FUSED_HOST_QUANTILE",
           "HOST_STALL_SHARE", "IDLE", "KIND_DECODE", "KIND_FUSED", "KIND_SPATIAL", "OVERLOAD_DECODE_FIRST",
           "OVERLOAD_MAX_DECODE", "PARK_FUSED", "PREEMPT_PREFIX", "PREFILL_ONLY", "SLO", "BasePolicy", "BatchSizePolicy",
           "DecodeHostTime", "DecodePlan", "EstimatorLike", "FixedPolicy", "FusedPlan", "HostBudgets",
           "HybridPolicy", "MuxDispatcher", "Plan", "Policy", "PrefillBatchState", "SLOError", "Snapshot",
           "SoloOnlyEstimator", "SpatialPlan", "WaitingReq", "YIELD_FUSED", "apply_plan", "check_policy_name", "decode_contexts",
           "make_policy", "policy_name", "prefill_layers_for"]
