"""SM partition configurations: which (decode, prefill) SM splits the engine offers.

Pure arithmetic, no GPU: the cuda-python side lives in green_ctx.py.
"""

from __future__ import annotations

from dataclasses import dataclass

# Hopper kernels that use thread-block clusters need SM groups of 8; MuxWise uses 16 (§3.3.2).
MIN_GRANULARITY = 8


@dataclass(frozen=True, order=True)
class PartitionConfig:
    decode_sms: int  # 0: prefill runs alone on the full GPU
    prefill_sms: int  # 0: decode runs alone on the full GPU

    @property
    def is_full_prefill(self) -> bool:
        return self.decode_sms == 0

    @property
    def is_full_decode(self) -> bool:
        return self.prefill_sms == 0

    @property
    def is_multiplexed(self) -> bool:
        return self.decode_sms > 0 and self.prefill_sms > 0

    def label(self) -> str:
        return f"D{self.decode_sms}/P{self.prefill_sms}"


def validate_granularity(total_sms: int, granularity: int) -> None:
    if total_sms <= 0:
        raise ValueError(f"total_sms must be positive, got {total_sms}")
    if granularity < MIN_GRANULARITY or granularity % MIN_GRANULARITY:
        raise ValueError(
            f"--mux-sm-granularity {granularity} cannot be honoured: green contexts on Hopper "
            f"split SMs in multiples of {MIN_GRANULARITY}; use 16 (MuxWise's choice), 24, 32, ..."
        )
    if 2 * granularity > total_sms:
        raise ValueError(
            f"--mux-sm-granularity {granularity} leaves no split of a {total_sms}-SM device into "
            f"two non-empty partitions; use at most {total_sms // 2 // MIN_GRANULARITY * MIN_GRANULARITY}"
        )


def partition_configs(total_sms: int = 132, granularity: int = 16) -> list[PartitionConfig]:
    """The multiplexed configurations, ascending in decode SMs.

    Decode gets k*granularity SMs; prefill gets the rest, which must hold at least one granule
    (132 SMs, 16: decode 16..112, prefill 116..20 — 7 configurations).
    """
    validate_granularity(total_sms, granularity)
    out = []
    d = granularity
    while total_sms - d >= granularity:
        out.append(PartitionConfig(decode_sms=d, prefill_sms=total_sms - d))
        d += granularity
    return out


def full_modes(total_sms: int) -> tuple[PartitionConfig, PartitionConfig]:
    """(prefill alone on every SM, decode alone on every SM)."""
    return PartitionConfig(0, total_sms), PartitionConfig(total_sms, 0)
