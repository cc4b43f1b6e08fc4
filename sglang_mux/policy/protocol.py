"""The contracts between the policy, the estimator and their callers.

`EstimatorLike`: every member a policy and the simulator read or call on an estimator
(`sglang_mux.estimator.Estimator` is the real one). `SoloOnlyEstimator`: its neutral defaults for
an estimator that only knows solo-run times (stand-ins in tests and analyses): a fused iteration
priced as one prefill on the whole GPU, nothing learned online. `Policy`: what the scheduler loop
and the simulator call every iteration.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping, Protocol, Sequence

from sglang_mux.latency_model.terms import PrefillReq, fused_batch
from sglang_mux.policy.plan import Plan
from sglang_mux.policy.snapshot import Snapshot


class FusedPriceLike(Protocol):
    margin: float  # ms the price adds for its tail (a budget holds it, a rate does not)
    learned: bool  # fitted on served iterations (not the prior)
    known: bool  # the price is the truth's (a simulator planning with the truth)


class PrefillWallLike(Protocol):
    factor: float  # served layer-wise batches' wall time over their planned T_P

    def observe(self, planned_ms: float, wall_ms: float) -> None: ...


class EstimatorLike(Protocol):
    """Times in ms of whole-model work; ``decode_sms`` / ``prefill_sms``: a partition's SMs."""

    num_layers: int
    total_sms: int
    decode_sms_options: Sequence[int]  # the multiplexed decode partitions, ascending
    graph_tokens: tuple[int, ...]  # sizes SGLang's prefill CUDA graph captured (a fused batch is padded)
    graph_cliffs: Mapping[int, float]  # captured sizes slower than a larger one, and by how much
    fused_price: FusedPriceLike
    prefill_wall: PrefillWallLike

    def prefill_ms(self, prefill_sms: int, reqs: Sequence[PrefillReq]) -> float: ...

    def decode_solo_ms(self, decode_sms: int, bs: int, sum_reused: int, max_reused: int | None = None) -> float: ...

    def decode_worst_ms(self, decode_sms: int, bs: int, sum_reused: int, prefill_new: int, prefill_reused: int,
                        max_reused: int | None = None) -> float: ...

    def decode_rows(self, decode_contexts: Sequence[int]) -> Any:
        """A fused iteration's decode rows, summed once for every price beside them."""

    def fused_ms(self, pieces: Sequence[PrefillReq], decode_rows: Any) -> float:
        """One fused iteration on the whole GPU (``decode_rows``: contexts or `decode_rows`)."""

    def fused_tokens(self, pieces: Sequence[PrefillReq], decode_rows: Any) -> int | None:
        """The captured size a fused batch runs at (None: eagerly)."""

    def observe_decode(self, decode_sms, bs, sum_reused, prefill_new, prefill_reused, measured_ms,
                       max_reused: int | None = None) -> bool: ...

    def observe_fused(self, rows: Sequence[PrefillReq], measured_ms: float, extra: Any = None) -> float | None: ...

    def fresh_planner(self) -> "EstimatorLike":
        """A copy that plans as a server starts: what serving teaches it is still to learn."""

    def with_prefill_graph(self, max_tokens: int) -> "EstimatorLike":
        """This estimator as a server whose prefill CUDA graph is captured up to ``max_tokens``."""


class Policy(Protocol):
    wants_decode_contexts: bool  # reads Snapshot.decode_contexts (a caller fills them only then)
    fuses_long_prompts: bool  # runs a prompt over ``layerwise_max_tokens`` as fused chunks
    layerwise_max_tokens: int | None  # the longest prompt one layer-wise prefill holds (None: any)

    def plan(self, snap: Snapshot) -> Plan: ...

    def queue_key(self, arrival_s: float, prompt_tokens: int) -> float | None: ...


class _NeutralPrice:
    margin = 0.0
    learned = True
    known = True


class _NoWall:
    factor = 1.0

    def observe(self, planned_ms: float, wall_ms: float) -> None:
        pass


class SoloOnlyEstimator:
    """`EstimatorLike`'s members beyond the solo-run times, neutral: subclass it and give
    ``num_layers``, ``total_sms``, ``decode_sms_options``, ``prefill_ms`` and the decode times."""

    graph_tokens: tuple[int, ...] = ()
    graph_cliffs: Mapping[int, float] = {}
    fused_price = _NeutralPrice()
    prefill_wall = _NoWall()

    def decode_rows(self, decode_contexts: Sequence[int]) -> list[int]:
        return list(decode_contexts)

    def fused_ms(self, pieces: Sequence[PrefillReq], decode_rows: Sequence[int]) -> float:
        rows = fused_batch(pieces, decode_rows)
        return self.prefill_ms(self.total_sms, rows) if rows else 0.0

    def fused_tokens(self, pieces: Sequence[PrefillReq], decode_rows: Any) -> None:
        return None

    def observe_decode(self, *args, **kw) -> bool:
        return False

    def observe_fused(self, *args, **kw) -> None:
        return None

    def fresh_planner(self) -> "SoloOnlyEstimator":
        return copy.deepcopy(self)

    def with_prefill_graph(self, max_tokens: int) -> "SoloOnlyEstimator":
        return self
