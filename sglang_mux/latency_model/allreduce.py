"""What a tensor-parallel rank's forward adds to the slice its table times: the all-reduces.

Each decoder layer all-reduces its hidden state twice (after attention's output projection and
after the MLP's down projection, both row-parallel), ``tokens`` rows of ``hidden`` bf16 values. A
TP table is profiled on one GPU (one rank's slice, no peers: ``profiling.run --tp-size N``), so
the estimator adds ``2 x layers x AllReduceCost.ms(tokens)``, fitted on ``profiling.allreduce``'s
timings of SGLang's own all-reduce on the server's partitions (``allreduce.json`` beside the
table's fit).

Timed, a small all-reduce costs a latency floor and a large one grows linearly in its bytes; the
lane's SM count matters only for the smallest lanes, which the fit leaves out (a decode lane that
small never all-reduces thousands of tokens). docs/measurements.md gives the timings.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path

import numpy as np

FLOOR_MAX_TOKENS = 512  # at or below: the latency floor's timings; from twice this: the bandwidth line's
MIN_LANE_SMS = 32  # lanes this small or larger are fitted (see the module docstring)
BYTES = 2  # bf16


@dataclass(frozen=True)
class AllReduceCost:
    """ms(tokens) = max(floor_ms, fixed_ms + ms_per_mb x tokens x hidden x 2 bytes / 1e6)."""

    hidden: int
    floor_ms: float
    fixed_ms: float
    ms_per_mb: float

    def ms(self, tokens: int) -> float:
        """One all-reduce of ``tokens`` rows (0 for none)."""
        if tokens <= 0:
            return 0.0
        return max(self.floor_ms, self.fixed_ms + self.ms_per_mb * tokens * self.hidden * BYTES / 1e6)

    def forward_ms(self, tokens: int, num_layers: int) -> float:
        """A whole forward's: two a layer."""
        return 2 * num_layers * self.ms(tokens)

    @classmethod
    def fit(cls, rows: list[dict], hidden: int) -> "AllReduceCost":
        """From ``profiling.allreduce``'s ``time`` rows (``tokens``, ``sms``, ``ms``) of every rank:
        the floor is the median at <= FLOOR_MAX_TOKENS, the line least squares from
        2 x FLOOR_MAX_TOKENS, on lanes of >= MIN_LANE_SMS SMs. Raises ValueError when either part has
        fewer than two token counts."""
        kept = [r for r in rows if r["sms"] >= MIN_LANE_SMS and r["ms"] > 0]
        small = [r["ms"] for r in kept if r["tokens"] <= FLOOR_MAX_TOKENS]
        big = [r for r in kept if r["tokens"] >= 2 * FLOOR_MAX_TOKENS]
        if len({r["tokens"] for r in big}) < 2 or not small:
            raise ValueError(f"all-reduce timings need token counts <= {FLOOR_MAX_TOKENS} and two or more >= "
                             f"{2 * FLOOR_MAX_TOKENS} on lanes of >= {MIN_LANE_SMS} SMs")
        mb = np.array([r["tokens"] * hidden * BYTES / 1e6 for r in big])
        slope, fixed = np.polyfit(mb, np.array([r["ms"] for r in big]), 1)
        return cls(hidden=int(hidden), floor_ms=float(statistics.median(small)), fixed_ms=float(fixed),
                   ms_per_mb=float(slope))

    @classmethod
    def from_json(cls, path: str | Path) -> "AllReduceCost":
        """Fitted on a ``profiling.allreduce`` output (every rank's rows, its ``hidden``).
        Raises OSError / ValueError (with the file's name) for a missing or malformed one."""
        path = Path(path)
        try:
            d = json.loads(path.read_text())
            ranks = d["ranks"]
            hidden = {int(r["hidden"]) for r in ranks}
            if len(hidden) != 1:
                raise ValueError(f"ranks timed different hidden sizes {sorted(hidden)}")
            return cls.fit([row for r in ranks for row in r["time"]], hidden.pop())
        except (KeyError, TypeError, json.JSONDecodeError, ValueError) as e:
            raise ValueError(f"{path}: not a profiling.allreduce output ({e}); measure it: python -m "
                             "profiling.allreduce --tp-size N --hidden HIDDEN --out " + str(path)) from None
