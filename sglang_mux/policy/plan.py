"""What a policy decides for one iteration: a `Plan`, one of three kinds.

- `DecodePlan`: decode alone (or nothing): no prefill layer or chunk is launched.
- `FusedPlan`: one mixed extend batch on the whole GPU, SGLang's mixed chunk: prompt pieces and
  one new token per decoding request.
- `SpatialPlan`: a layer-wise prefill batch on its own SMs beside decode (or alone on every SM).

Each is frozen and built by keyword. Every kind also answers the same read-only view
(``decode_sms``, ``prefill_sms``, ``t_decode_worst_ms``, ``t_prefill_ms``, ``prefill_layers``,
``new_prefill_rids``, ``preempt``, ``chunk``, ``reason``, ``config``), which the scheduler loop,
the metrics and the timeline read alike; a kind's own fields say what it means. Times in ms.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Union

from sglang_mux.partitions import PartitionConfig

# Plan.reason values (the metrics label decisions by these).
IDLE = "idle"
DECODE_ONLY = "decode-only"
PREFILL_ONLY = "prefill-only"
BEST_FIT = "best-fit"
OVERLOAD_DECODE_FIRST = "overload-decode-first"
OVERLOAD_MAX_DECODE = "overload-max-decode"
FIXED = "fixed"
BATCH_SIZE = "batch-size"
PREEMPT_PREFIX = "preempt+"
FUSED = "fused"
YIELD_FUSED = "yield+fused"  # a fused chunk of waiting prompts while the chunked request waits
PARK_FUSED = "park+fused"  # the queue's head chunked in the chunked request's place, which is parked
FUSED_REASONS = (FUSED, YIELD_FUSED, PARK_FUSED)  # every fused iteration's

# Plan.kind values.
KIND_DECODE = "decode"
KIND_FUSED = "fused"
KIND_SPATIAL = "spatial"


class _View:
    """The fields every kind answers; ``to_dict`` is the plan as `dispatch plan` prints it."""

    kind: ClassVar[str]

    @property
    def config(self) -> PartitionConfig:
        return PartitionConfig(self.decode_sms, self.prefill_sms)

    def to_dict(self) -> dict:
        return {"decode_sms": self.decode_sms, "prefill_sms": self.prefill_sms,
                "t_decode_worst_ms": self.t_decode_worst_ms, "t_prefill_ms": self.t_prefill_ms,
                "prefill_layers": self.prefill_layers, "new_prefill_rids": list(self.new_prefill_rids),
                "preempt": self.preempt, "reason": self.reason, "kind": self.kind,
                "chunk": [list(c) for c in self.chunk]}


class _OnPartition(_View):
    """A plan whose ``partition`` says both phases' SMs."""

    partition: PartitionConfig

    @property
    def decode_sms(self) -> int:
        return self.partition.decode_sms

    @property
    def prefill_sms(self) -> int:
        return self.partition.prefill_sms


@dataclass(frozen=True, kw_only=True)
class DecodePlan(_OnPartition):
    """Decode alone, or nothing to run. ``partition``: the whole GPU for decode, or a fixed split
    whose prefill side stays idle (`FixedPolicy`); ``t_decode_worst_ms``: 0 with no decode."""

    partition: PartitionConfig
    t_decode_worst_ms: float = 0.0
    reason: str = DECODE_ONLY

    kind: ClassVar[str] = KIND_DECODE
    t_prefill_ms: ClassVar[float] = 0.0
    prefill_layers: ClassVar[int] = 0
    new_prefill_rids: ClassVar[tuple[str, ...]] = ()
    preempt: ClassVar[bool] = False
    chunk: ClassVar[tuple] = ()


@dataclass(frozen=True, kw_only=True)
class SpatialPlan(_OnPartition):
    """Layer-wise prefill on ``partition.prefill_sms`` SMs, decode on the rest (none: prefill
    alone on every SM). ``t_decode_worst_ms``: decode's worst case there (0 with no decode);
    ``t_prefill_ms``: T_P, the whole batch's solo time on its SMs; ``prefill_layers``: N_PL to
    launch now (0: every layer is launched already); ``new_prefill_rids``: start these, a prefix
    of `Snapshot.waiting`, as a new batch (empty: go on with the active or paused one);
    ``preempt``: the new batch preempts the active one, which is paused."""

    partition: PartitionConfig
    t_decode_worst_ms: float
    t_prefill_ms: float
    prefill_layers: int
    new_prefill_rids: tuple[str, ...] = ()
    preempt: bool = False
    reason: str = BEST_FIT

    kind: ClassVar[str] = KIND_SPATIAL
    chunk: ClassVar[tuple] = ()


@dataclass(frozen=True, kw_only=True)
class FusedPlan(_View):
    """One mixed extend batch on all ``total_sms``: ``chunk`` = ((rid, prompt tokens), ...), a
    prefix of the chunked request's rest and `Snapshot.waiting` (the last entry may be part of its
    request's prompt), beside one row per decoding request; ``t_ms``: its price. ``yields``: the
    chunked request sits this one out, and ``chunk`` is whole waiting prompts only (SGLang
    0.5.16 keeps one request mid-prefill). ``parks``: the chunked request is parked, its KV and
    prefix kept, until the one this chunk cuts (the queue's head, its first chunk) is done."""

    chunk: tuple[tuple[str, int], ...]
    t_ms: float
    total_sms: int
    yields: bool = False
    parks: bool = False

    kind: ClassVar[str] = KIND_FUSED
    prefill_sms: ClassVar[int] = 0
    prefill_layers: ClassVar[int] = 0
    new_prefill_rids: ClassVar[tuple[str, ...]] = ()
    preempt: ClassVar[bool] = False

    @property
    def reason(self) -> str:
        return PARK_FUSED if self.parks else YIELD_FUSED if self.yields else FUSED

    @property
    def decode_sms(self) -> int:
        return self.total_sms

    @property
    def t_decode_worst_ms(self) -> float:
        return self.t_ms

    @property
    def t_prefill_ms(self) -> float:
        return self.t_ms


Plan = Union[DecodePlan, FusedPlan, SpatialPlan]
