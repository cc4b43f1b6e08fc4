"""The service-level objectives a policy plans for and a simulator judges by, checked once here."""

from __future__ import annotations

import math
from dataclasses import dataclass

# A host time over this share of the TBT SLO is a stall, not a cost to plan for: a TBT budget never
# books more, and a fused budget's quantile leaves such overruns out (`DecodeHostTime.stall_ms`).
HOST_STALL_SHARE = 0.5


class SLOError(ValueError):
    """A bad SLO value; ``field`` names the SLO field (a caller maps it to its own flag)."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class SLO:
    """``tbt_ms``: the time between a request's tokens; ``ttft_ms`` + ``ttft_ms_per_token`` x its
    prompt tokens: its time to first token (a flat TTFT SLO with 0). Raises `SLOError` for a value
    that is not a finite number (> 0; the per-token term >= 0)."""

    tbt_ms: float = 50.0
    ttft_ms: float = 5000.0
    ttft_ms_per_token: float = 0.0

    def __post_init__(self):
        for name, zero_ok in (("tbt_ms", False), ("ttft_ms", False), ("ttft_ms_per_token", True)):
            v = getattr(self, name)
            if not (math.isfinite(v) and (v >= 0 if zero_ok else v > 0)):
                raise SLOError(name, f"must be a finite number of ms {'>= 0' if zero_ok else '> 0'}, got {v}")

    def ttft_ms_for(self, prompt_tokens: int) -> float:
        """The TTFT SLO of a prompt of ``prompt_tokens`` tokens."""
        return self.ttft_ms + self.ttft_ms_per_token * prompt_tokens

    @property
    def stall_ms(self) -> float:
        """A host time over this is a stall (HOST_STALL_SHARE of the TBT SLO)."""
        return HOST_STALL_SHARE * self.tbt_ms
