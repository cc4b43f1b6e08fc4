"""Two baseline policies that share the dispatcher's batch and N_PL rules but not its partition
choice: one fixed split, and SGLang's PD-multiplexing demo rule."""

from __future__ import annotations

from sglang_mux.partitions import PartitionConfig
from sglang_mux.policy.base import Batch, BasePolicy
from sglang_mux.policy.plan import BATCH_SIZE, DECODE_ONLY, FIXED, IDLE, DecodePlan, Plan, SpatialPlan
from sglang_mux.policy.protocol import EstimatorLike
from sglang_mux.policy.snapshot import Snapshot


class FixedPolicy(BasePolicy):
    """One fixed partition of ``decode_sms`` whenever both phases have work (a static-split
    baseline). With ``full_gpu_when_alone`` (default) a phase that runs alone gets the whole GPU,
    as in the other policies, so that a comparison isolates the choice of partition. Raises
    ValueError for a ``decode_sms`` outside (0, total SMs)."""

    def __init__(self, estimator: EstimatorLike, decode_sms: int = 64, *, full_gpu_when_alone: bool = True,
                 max_prefill_tokens: int = 16384, max_prefill_bs: int = 64):
        super().__init__(estimator, max_prefill_tokens=max_prefill_tokens, max_prefill_bs=max_prefill_bs)
        if not 0 < decode_sms < self.total:
            raise ValueError(f"fixed decode_sms {decode_sms} must be in (0, {self.total})")
        self.decode_sms = int(decode_sms)
        self.full_gpu_when_alone = full_gpu_when_alone

    def plan(self, snap: Snapshot) -> Plan:
        plan = super().plan(snap)
        if self.full_gpu_when_alone or plan.reason == IDLE or (plan.decode_sms and plan.prefill_sms):
            return plan
        d, b = self.decode_sms, self._pick(snap)
        split = PartitionConfig(d, self.total - d)
        if plan.reason == DECODE_ONLY:
            t = self.est.decode_worst_ms(d, snap.decode_bs, snap.decode_sum_reused, 0, 0,
                                         max_reused=snap.decode_max_reused)
            return DecodePlan(partition=split, t_decode_worst_ms=t, reason=FIXED)
        t_p = self.est.prefill_ms(self.total - d, b.reqs)
        return SpatialPlan(partition=split, t_decode_worst_ms=0.0, t_prefill_ms=t_p,
                           prefill_layers=self.layers - b.layers_done, new_prefill_rids=b.new_rids, reason=FIXED)

    def _mux(self, snap: Snapshot, b: Batch) -> Plan:
        d = self.decode_sms
        t = self.est.decode_worst_ms(d, snap.decode_bs, snap.decode_sum_reused, b.new_tokens, b.reused_tokens,
                                     max_reused=snap.decode_max_reused)
        return self._spatial(d, t, b, FIXED)


class BatchSizePolicy(BasePolicy):
    """SGLang's PD-multiplexing demo rule: decode's share grows with the decode batch size.

    Option index = clamp(bs * k // decode_bs_divisor, 1, k) - 1 over the k multiplexed
    partitions (SGLang: stream group = clamp(bs*(G-2)//36, 1, G-2)); prefill layers per launch
    = split_forward_token_budget // new tokens (SGLang's split-forward budget), at least 1.
    """

    def __init__(self, estimator: EstimatorLike, decode_bs_divisor: int = 36,
                 split_forward_token_budget: int = 65536, *, max_prefill_tokens: int = 16384,
                 max_prefill_bs: int = 64):
        super().__init__(estimator, max_prefill_tokens=max_prefill_tokens, max_prefill_bs=max_prefill_bs)
        self.divisor = max(1, int(decode_bs_divisor))
        self.budget = max(1, int(split_forward_token_budget))

    def decode_sms_for(self, bs: int) -> int:
        k = len(self.options)
        return self.options[max(1, min(k, bs * k // self.divisor)) - 1]

    def _mux(self, snap: Snapshot, b: Batch) -> Plan:
        d = self.decode_sms_for(snap.decode_bs)
        t = self.est.decode_worst_ms(d, snap.decode_bs, snap.decode_sum_reused, b.new_tokens, b.reused_tokens,
                                     max_reused=snap.decode_max_reused)
        p = self.total - d
        t_p = self.est.prefill_ms(p, b.reqs)
        n = max(1, min(self.layers - b.layers_done, self.budget // max(1, b.new_tokens)))
        return SpatialPlan(partition=PartitionConfig(d, p), t_decode_worst_ms=t, t_prefill_ms=t_p, prefill_layers=n,
                           new_prefill_rids=b.new_rids, reason=BATCH_SIZE)
