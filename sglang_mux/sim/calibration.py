"""What a replay is calibrated with: draws from served timelines and the table's co-run cells, and
`Calibration`, the settings that make the simulated GPU and host differ from the estimator's solo
prices (docs/sim.md gives each one's reasons and what it was measured on).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
import random
from typing import Mapping, Sequence

import numpy as np

from sglang_mux.fused_price import SIZE_MIN_OBS, hybrid_batch_size
from sglang_mux.latency_model.terms import PrefillReq
from sglang_mux.policy.host_time import FUSED_HOST_QUANTILE

SLOWDOWNS = ("uniform", "worst", "none")


def decode_jitter(timeline_path) -> np.ndarray:
    """Measured / planned worst-case decode of a served timeline's co-run iterations."""
    from sglang_mux.mux_metrics import load_timeline

    t = load_timeline(timeline_path)
    need = {"measured_decode_ms", "t_decode_worst_ms", "prefill_sms", "decode_bs"}
    if t.empty or not need <= set(t.columns):
        raise ValueError(f"{timeline_path}: no measured decode iterations (a server's --mux-timeline has them)")
    co = t[t["measured_decode_ms"].notna() & (t["prefill_sms"] > 0) & (t["decode_bs"] > 0)
           & (t["t_decode_worst_ms"] > 0)]
    if co.empty:
        raise ValueError(f"{timeline_path}: no co-run decode iterations to draw jitter from")
    return (co["measured_decode_ms"] / co["t_decode_worst_ms"]).to_numpy(dtype=float)


def fused_jitter(timeline_path) -> np.ndarray:
    """Measured / base price of a served hybrid timeline's fused iterations (`mux_metrics.fused_rows`),
    the server's warm-up batches among them."""
    return _fused_ratios(timeline_path)[0]


def fused_jitter_by_size(timeline_path) -> "FusedJitter":
    """`fused_jitter`'s ratios, and apart for each padded size (the prefill graph's captured size
    of a row's ``extend_tokens``) with SIZE_MIN_OBS of them: a size's own ratios can differ from
    the pooled ones (docs/sim.md)."""
    ratio, sizes = _fused_ratios(timeline_path)
    by: dict[int, list[float]] = defaultdict(list)
    for r, z in zip(ratio, sizes):
        if z is not None:
            by[z].append(float(r))
    return FusedJitter(ratio, {z: np.asarray(v) for z, v in by.items() if len(v) >= SIZE_MIN_OBS})


def _fused_ratios(timeline_path) -> tuple[np.ndarray, list[int | None]]:
    from sglang_mux.mux_metrics import fused_rows, load_timeline

    try:
        f = fused_rows(load_timeline(timeline_path))
    except ValueError as e:
        raise ValueError(f"{timeline_path}: {e}") from None
    ratio = f["measured_decode_ms"].to_numpy(dtype=float) / f["base_ms"].to_numpy(dtype=float)
    tokens = f["extend_tokens"] if "extend_tokens" in f else [None] * len(f)
    sizes = [hybrid_batch_size(n) for n in tokens]
    keep = np.isfinite(ratio) & (ratio > 0)
    if not keep.any():
        raise ValueError(f"{timeline_path}: no fused iteration whose base price can be recovered")
    return ratio[keep], [z for z, k in zip(sizes, keep) if k]


@dataclass(frozen=True)
class FusedJitter:
    """Served fused measured / base ratios: ``pooled``, and ``by_size`` (padded size -> those of
    that size). `draw` takes a size's own where it has them, else the pooled."""
    pooled: np.ndarray
    by_size: Mapping[int, np.ndarray]

    def draw(self, rng: random.Random, size: int | None) -> float:
        own = self.by_size.get(size) if size is not None else None
        return float(rng.choice(own if own is not None else self.pooled))


def served_host_ms(timeline_path) -> tuple[np.ndarray, np.ndarray]:
    """The loop's host time (>= 0 ms) of a served timeline's decode iterations: (co-run, alone)."""
    from sglang_mux.mux_metrics import host_ms_per_decode, load_timeline

    t = load_timeline(timeline_path)
    h = host_ms_per_decode(t).clip(lower=0.0)
    co = t.loc[h.index, "prefill_sms"].fillna(0) > 0 if "prefill_sms" in t else None
    if co is None or not co.any() or co.all():
        raise ValueError(f"{timeline_path}: needs decode iterations with host_ms laps both beside a prefill and "
                         "alone (a server's --mux-timeline over a benchmark point has both)")
    return h[co].to_numpy(dtype=float), h[~co].to_numpy(dtype=float)


def cell_prefill_solo_ms(estimator, cell: Mapping, prefill_sms: int) -> float:
    """The solo fit's time, on `prefill_sms` SMs, for the layers one prefill launch of a
    ``tables.corun_cells`` cell ran (its launch time is the co-run one to compare with)."""
    return estimator.prefill_ms(prefill_sms, [PrefillReq(cell["n"], cell["r"])]) \
        * cell["layers_per_launch"] / estimator.num_layers


def table_prefill_slowdown(table_dir, estimator) -> dict[int, float]:
    """Per decode partition, the median over the table's co-run cells of the prefill's layer
    launches beside looping decode graphs over the solo fit's time for those layers
    (``tables.corun_cells``: what ``profiling.run`` measured; the fit itself ignores them)."""
    from statistics import median

    from sglang_mux.tables import TableError, corun_cells

    try:
        cells = corun_cells(table_dir)
    except TableError as e:
        raise ValueError(str(e)) from None
    ratios: dict[int, list[float]] = defaultdict(list)
    for c in cells:
        solo = cell_prefill_solo_ms(estimator, c, c["prefill_sms"])
        if solo > 0:
            ratios[int(c["decode_sms"])].append(c["prefill_launch_ms"] / solo)
    return {d: max(1.0, median(v)) for d, v in sorted(ratios.items())}


@dataclass(frozen=True)
class Calibration:
    """How the simulated GPU and host differ from the estimator's solo prices. Raises ValueError
    for a setting that is out of range.

    ``slowdown``: co-run decode takes its solo time x U(1, guard) ("uniform"), the guard ("worst")
    or 1 ("none"); ``jitter``: instead, the worst case x a draw of these ratios (a served
    timeline's, `decode_jitter`). ``prefill_slowdown``: prefill beside decode runs this much
    slower than its solo time (>= 1, or {decode SMs: factor}, the nearest partition's used).
    ``host_ms``: the loop's host time per decode iteration (decode waits, prefill runs on);
    ``host_draws``: instead, (co-run, decode-alone) host times each iteration of that kind draws
    from. ``fused_host_ms``: a fused iteration's host time (None: a co-run decode's); a sequence
    instead: each fused iteration's gap exceeds its GPU time by a draw from it (a served timeline's
    gaps less their planned price; with ``fused_jitter``, less the measured time). ``start_host_ms``:
    host times a decode iteration that starts a layer-wise batch draws from instead.
    ``fused_start_host_ms``: overruns the first fused iteration of a streak draws from instead
    (needs ``fused_host_ms`` draws or ``host_draws``). ``fused_host_quantile``: the quantile the
    fused budget books; ``fused_stalls_apart``: it leaves out overruns over the stall share of the
    SLO, as the server's does. ``overlap_decode``: under a fusing policy, a decode alone with no
    prefill anywhere has no host time in its gap and keeps the fused streak going, as the server's
    ``--mux-overlap-decode`` runs it. ``fused_jitter``: a fused iteration takes its price x a draw
    of these served measured / base ratios (a `FusedJitter` draws by padded size; None: the price).
    The policy is told the host times as a server measures them (`HostBudgets`)."""

    slowdown: str = "uniform"
    jitter: Sequence[float] | None = None
    prefill_slowdown: float | Mapping[int, float] = 1.0
    host_ms: float = 0.0
    host_draws: tuple[Sequence[float], Sequence[float]] | None = None
    fused_host_ms: float | Sequence[float] | None = None
    start_host_ms: Sequence[float] | None = None
    fused_start_host_ms: Sequence[float] | None = None
    fused_host_quantile: float = FUSED_HOST_QUANTILE
    fused_stalls_apart: bool = True
    overlap_decode: bool = True
    fused_jitter: Sequence[float] | FusedJitter | None = None

    def __post_init__(self):
        if self.slowdown not in SLOWDOWNS:
            raise ValueError(f"slowdown must be uniform, worst or none, got {self.slowdown!r}")
        fixed = self.fused_host_ms if self.fused_draws is None else None
        if self.fused_draws is not None and not self.fused_draws:
            raise ValueError("fused_host_ms: an empty list of draws (give a number, or served overruns)")
        if self.host_ms < 0 or (fixed is not None and fixed < 0):
            raise ValueError(f"host_ms and fused_host_ms must be >= 0, got {self.host_ms}, {fixed}")
        ps = self.prefill_slowdown
        if not all(x >= 1.0 for x in (ps.values() if isinstance(ps, Mapping) else [ps])):
            raise ValueError(f"prefill_slowdown must be >= 1 (co-running never speeds prefill up), got {ps}")
        fj = self.fused_jitter_draws
        if fj is not None and (not len(fj.pooled) or min(fj.pooled) <= 0):
            raise ValueError("fused_jitter: measured / price ratios > 0, at least one")
        h = self.host_draws
        if h is not None and (len(h) != 2 or not all(len(x) and min(x) >= 0 for x in h)):
            raise ValueError("host_draws must be (co-run, decode-alone) lists of host times >= 0 ms, neither empty")
        if self.start_host_ms is not None and (not len(self.start_host_ms) or min(self.start_host_ms) < 0):
            raise ValueError("start_host_ms: host times >= 0 ms, at least one")
        fs = self.fused_start_host_ms
        if fs is not None and (not len(fs) or (h is None and self.fused_draws is None)):
            raise ValueError("fused_start_host_ms: at least one overrun, beside fused_host_ms draws or host_draws")

    @property
    def fused_draws(self) -> list[float] | None:
        """``fused_host_ms`` as draws, when it is a sequence."""
        f = self.fused_host_ms
        return None if f is None or isinstance(f, (int, float)) else [float(x) for x in f]

    @property
    def fused_jitter_draws(self) -> "FusedJitter | None":
        f = self.fused_jitter
        return f if f is None or isinstance(f, FusedJitter) else FusedJitter(np.asarray([float(x) for x in f]), {})
