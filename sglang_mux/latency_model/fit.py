"""Fitting the latency model: non-negative least squares per partition, a search of the pooled
hyper-parameters, and held-out (cross-validated) errors. Needs numpy, scipy and pandas frames.

Inputs: solo_prefill.csv / solo_decode.csv rows (uniform batches: per-request n, r, r_max are
Σn/bs, Σn·r/Σn, Σr/bs), latency in ms. Outputs: ``PrefillHyper`` / ``DecodeHyper`` and
{SMs: θ} (``PrefillTheta`` / ``DecodeTheta``, all >= 0, plain floats).

- θ per partition: NNLS on relative error (rows weighted by 1/latency; columns rescaled to max
  1 for conditioning). max(·) terms (launch floor, decode floor) are fitted by enumerating which
  rows sit on the floor.
- Pooled hyper-parameters (τ, κ, L, GEMM waves, knees, θ7, θ10 for prefill; k and β for decode)
  are chosen on the training rows of all partitions by J = max/10 % + mean/3 % of the relative
  errors (the estimator's acceptance bounds), then refined by one joint NNLS (kept if J improves).
  Then a prefill partition without the table's longest prompt gets θ1 = ρ·θ2, ρ the median
  θ1/θ2 of the partitions that have it (their θ1 stays free).
- Decode's compute roofline (c, W) is fitted last, per partition: its knee b_c from
  COMPUTE_KNEE_GRID by J, at the pooled (k, β) and the floor rows chosen without it.
- ``heldout_errors``: k-fold per partition; a row never influences the fit that predicts it.

A frame without the CSV's columns raises KeyError (pandas). docs/latency_model.md gives the
why of each term and of the grids.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Sequence

import numpy as np

from .design import (DecodeDesign, PrefillDesign, predict_decode_frame, predict_prefill_frame,
                     prefill_domain)
from .fa3_kernels import Fa3Grid
from .gemm_curve import GemmCurves
from .model import SoloLatencyModel
from .terms import BLOCK_TOKENS, DecodeHyper, DecodeTheta, PrefillHyper, PrefillTheta, min_batch_tokens

# Hyper-parameter grids (searched on the training rows of all partitions).
WAVE_TOKENS_GRID = (0, 1, 2, 4, 8, 16)  # τ; 0 = no wave quantization
SPILL_GRID = (0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 1.0, 1.25, 1.5, 2.0)  # κ; 0 = no spill term
FLOOR_GRID = tuple(0.5 + 0.05 * i for i in range(16))  # L / (fastest training row); and 0
BETA_COARSE, BETA_FINE = 22, 15  # geometric grid points of β (coarse over 3 decades, then ±39%)
DECODE_BLOCKS_GRID = (0, 1, 2, 3, 4, 5, 6, 8, 12, 16)  # k: blocks per SM per decode wave; 0 = off
# (m_lo, m_hi): batch tokens up to which the token-linear work runs in ⌈D/S⌉ waves, and from
# which it scales as 1/S (log-linear between; m_lo = m_hi: a step); (0, 0) = off.
GEMM_WAVES_GRID = ((0, 0),) + tuple((lo, hi) for lo in (256, 512, 1024, 2048)
                                    for hi in (lo, 4096, 16384, 65536, 262144) if hi >= lo)
# (m_k, m_k2): batch tokens past which the token-linear work gets dearer per token (θ8, θ9
# charge the tokens past each); 0 = off.
GEMM_KNEE_GRID = ((0, 0),) + tuple((k, 0) for k in (128, 256, 512, 1024, 2048)) + tuple(
    (a, b) for a in (128, 256, 512, 1024) for b in (512, 1024, 2048, 4096) if b > a)
# Pooled GEMM-curve scale θ10 (model's projections / the curve's microbenchmark).
GEMM_SCALE_GRID = tuple(round(0.75 + 0.025 * i, 3) for i in range(15))
# Pooled cold-read cost θ7: the median of the per-partition fits times these factors.
COLD_GRID = tuple(0.6 + 0.05 * i for i in range(17))
# Selection criterion J = max/MAX_REL + mean/MEAN_REL: the estimator's accuracy bounds.
MAX_REL, MEAN_REL = 0.10, 0.03
_TIE = 1e-9


# ----------------------------------------------------------------------------- fitting helpers

def fit_nonneg(X, y, relative: bool = True, target=None) -> tuple[float, ...]:
    """Non-negative least squares of ``target`` ≈ X·θ (X includes the ones column).

    Relative error: rows are weighted by 1/y (``target`` defaults to y; a floored fit passes
    y minus the known floor part as target but keeps the weights of the measured y).
    Columns are rescaled to max 1 first: Σn² reaches 1e10 while the ones column is 1, and the
    NNLS solver is badly conditioned on such ranges. Scaling by positives keeps θ ≥ 0.
    """
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    t = y if target is None else np.asarray(target, dtype=float)
    return tuple(float(c) for c in _nnls(X, t, 1.0 / y if relative else np.ones_like(y)))


def _nnls(X, t, w, last_max: float | None = None):
    """Non-negative weighted least squares; ``last_max``: the last coefficient at most that."""
    from scipy.optimize import lsq_linear, nnls  # lazily: scipy takes ~0.3 s to import

    scale = np.abs(X).max(axis=0) if len(X) else np.ones(X.shape[1])
    scale[scale == 0] = 1.0
    A = (X / scale) * w[:, None]
    if last_max is not None:
        hi = np.full(X.shape[1], np.inf)
        hi[-1] = last_max * scale[-1]
        return np.maximum(lsq_linear(A, t * w, bounds=(np.zeros(X.shape[1]), hi)).x / scale, 0.0)
    try:
        c, _ = nnls(A, t * w, maxiter=50 * max(1, A.shape[1]))
    except RuntimeError:  # pragma: no cover - pathological inputs only
        from sklearn.linear_model import LinearRegression
        c = LinearRegression(positive=True, fit_intercept=False).fit(A, t * w).coef_
    return np.maximum(c / scale, 0.0)


def _criterion(pred, y) -> float:
    return _errors_j(np.abs(pred / y - 1.0))


def _errors_j(e) -> float:
    """J of relative errors ``e``."""
    return float(e.max() / MAX_REL + e.mean() / MEAN_REL) if len(e) else 0.0


def _prefill_theta(th, na: int, hyper) -> PrefillTheta:
    """The named θ from the fitted [Xa, Xl] coefficients (``design``) and the pooled values."""
    _, kappa, floor, _, _, _, cold, gs, rho = hyper
    th1, th2 = (rho * th[0], th[0]) if rho >= 0 else (th[0], th[1])
    return PrefillTheta(sum_new_sq=float(th1), sum_new_reused_waves=float(th2), sum_new=float(th[na]),
                        one=float(th[na + 1]), sum_new_spill_waves=float(kappa * th2), launch_floor=float(floor),
                        sum_reused_resident=float(th[na - 1]) if cold < 0 else float(cold),
                        sum_new_past_knee=float(th[na + 2]), sum_new_past_knee2=float(th[na + 3]),
                        gemm_curve_ms=float(gs))


def _fit_prefill_rows(rows: PrefillDesign, tau: int, kappa: float, floor: float, lo: int = 0, hi: int = 0,
                      knees: tuple = (0, 0), cold: float = -1.0, gs: float = 0.0, rho: float = -1.0):
    """θ (PrefillTheta) of one partition for fixed (τ, κ, L, m_lo, m_hi, (m_k, m_k2), θ7, θ10, ρ;
    θ7, ρ < 0: fitted here), its training relative errors and which rows sit on the floor."""
    hyper = (tau, kappa, floor, lo, hi, knees, cold, gs, rho)
    Xa, Xl, off = rows.design(hyper)
    na, y = Xa.shape[1], rows.y
    w = 1.0 / y
    base = _nnls(np.column_stack([Xa, Xl]), y - off, w)
    best = None
    cands = [None]
    if floor > 0:  # rows on the floor: the smallest Σn, as far as the unfloored fit goes below 2L
        lin0 = Xl @ base[na:]
        cands += sorted(set(rows.n_sum[lin0 < 2 * floor].tolist()))
    none = np.zeros(len(y), dtype=bool)
    for t in cands:
        if t is None:
            th, fl = base, none
        else:
            fl = rows.n_sum <= t
            X = np.column_stack([Xa, Xl * (~fl)[:, None]])
            th = _nnls(X, y - off - floor * fl, w)
        lin = Xl @ th[na:]
        pred = Xa @ th[:na] + off + (np.maximum(lin, floor) if floor > 0 else lin)
        j = _criterion(pred, y)
        if best is None or j < best[0] - _TIE:
            best = (j, th, pred, fl)
    _, th, pred, fl = best
    return _prefill_theta(th, na, hyper), np.abs(pred / y - 1.0), fl


MAX_FLOOR_CANDIDATES = 12  # floor thresholds tried per decode fit (spread over the distinct values)


def _thresholds(vals) -> list:
    """Candidate floor thresholds: every distinct value, or MAX_FLOOR_CANDIDATES of them evenly
    spread in rank, the smallest and the largest included (rows sit on the floor from the
    smallest Σr/K up; docs/latency_model.md, "Decode floor thresholds")."""
    v = sorted(set(vals.tolist()))
    if len(v) <= MAX_FLOOR_CANDIDATES:
        return v
    n = MAX_FLOOR_CANDIDATES - 1
    return [v[round(i * (len(v) - 1) / n)] for i in range(n + 1)]


def _fit_decode_rows(rows: DecodeDesign, k: int, beta: float, knees: Sequence[float] = (0.0,), floored=None):
    """θ (DecodeTheta) of one partition for fixed (k, β), its training relative errors and
    which rows sit on the floor. FA3 (k unused): the floor is β·K0 + δ·X, K0 the keys of one
    block per SM and X what a second one adds (``feat`` at γ = 0 and 1), δ fitted with
    0 ≤ δ ≤ β; θ5 = γ = δ/β. ``knees``: the compute knees b_c tried, the best by J kept (0 = no
    compute term, kept on ties), each a column (bs − b_c)+ whose slope c is ``gemm_compute``
    and c·b_c ``gemm_weight_read``. ``floored``: the rows on the floor (a boolean mask), given
    rather than searched."""
    y, sr, bs = rows.y, rows.sr, rows.bs
    fa3 = bool(rows.kernel.fa3)
    fk = rows.feat(0 if fa3 else k)
    xk = rows.feat(100) - fk if fa3 else None
    rho = sr / fk  # which rows sit on the floor: the smallest Σr per unit of floor feature
    w = 1.0 / y
    one = np.ones(len(y))
    none = np.zeros(len(y), dtype=bool)
    best = None
    for knee in knees:
        extra = [np.maximum(bs - knee, 0.0)] if knee else []  # the compute column, if on
        base = rows._base.get(knee)
        if base is None:
            base = rows._base[knee] = _nnls(np.column_stack([sr, bs, one, *extra]), y, w)
        cands = [None]
        if floored is not None:
            cands = [floored] if beta > 0 and floored.any() else [None]
        elif beta > 0:  # floored rows: the smallest Σr/K. Largest threshold first, so that of splits
            # that fit equally (rows the floor explains exactly as well as θ1·Σr) the fit keeps the one
            # with the most rows on the floor, rather than θ1 pinned by two of them at the edge.
            # FA3: every threshold, no reach limit (its floor has δ too; docs/latency_model.md)
            lim = 2.0 * beta / base[0] if base[0] > 0 and not fa3 else np.inf  # as far as the floor can reach
            cands += (sorted(set(rho.tolist())) if fa3 else _thresholds(rho[rho <= lim]))[::-1]
        for t in cands:
            delta = 0.0
            if t is None:
                th, fl = base, none
            else:
                fl = t if floored is not None else rho <= t
                cols = [sr * (~fl), bs, one, *extra]
                if fa3:
                    th = _nnls(np.column_stack(cols + [xk * fl]), y - beta * fk * fl, w, last_max=beta)
                    delta = th[-1]
                else:
                    th = _nnls(np.column_stack(cols), y - beta * fk * fl, w)
            c = float(th[3]) if knee else 0.0
            pred = np.maximum(th[0] * sr, beta * fk + (delta * xk if fa3 else 0.0)) + th[1] * bs + th[2]
            if c:
                pred = pred + c * extra[0]
            j = _criterion(pred, y)
            if best is None or j < best[0] - _TIE:
                best = (j, th, pred, fl, delta, c, knee)
    _, th, pred, fl, delta, c, knee = best
    theta = DecodeTheta(float(th[0]), float(th[1]), float(th[2]), occupancy_floor=float(beta),
                        fa3_block_share=float(delta / beta) if delta > 0 else 0.0,
                        gemm_compute=c, gemm_weight_read=c * knee)
    return theta, np.abs(pred / y - 1.0), fl


def _polish(kind: str, view, hyper, fits):
    """Joint NNLS of all partitions' θ and the pooled values — the floor (L or β) for the
    floored rows the grid search settled on, the prefill cold-read cost θ7 and GEMM-curve
    scale θ10 — so that they are exact, not grid points. Returns (hyper, fits) of the
    polished model (the caller keeps it only if J improves), or None when nothing is pooled."""
    cold = kind == "prefill" and hyper[6] >= 0
    gs = kind == "prefill" and hyper[7] > 0
    free = (*hyper[:6], -1.0, 0.0, *hyper[8:]) if kind == "prefill" else hyper  # θ7, θ10 as columns, pooled below
    blocks, shared, ys, owners = [], [], [], []
    for s, rows in view.items():
        fl = fits[s][2]
        if kind == "prefill":
            Xa, Xl, _ = rows.design(free)
            blocks.append(np.column_stack([Xa[:, :-1] if cold else Xa, Xl * (~fl)[:, None]]))
            shared.append(np.column_stack([fl.astype(float)] + ([Xa[:, -1]] if cold else [])
                                          + ([rows.gm] if gs else [])))
        else:
            blocks.append(np.column_stack([rows.sr * (~fl), rows.bs, np.ones(len(rows.y))]))
            shared.append((rows.feat(hyper[0]) * fl)[:, None])
        ys.append(rows.y)
        owners.append(s)
    S = np.concatenate(shared)
    if not S.any():
        return None
    width = blocks[0].shape[1]
    X = np.zeros((len(S), width * len(blocks) + S.shape[1]))
    r0 = 0
    for i, b in enumerate(blocks):
        X[r0:r0 + len(b), i * width:(i + 1) * width] = b
        r0 += len(b)
    X[:, width * len(blocks):] = S
    y = np.concatenate(ys)
    c = _nnls(X, y, 1.0 / y)
    pooled = float(c[width * len(blocks)])
    if kind == "prefill":
        extra = iter(float(v) for v in c[width * len(blocks) + 1:])
        h = (hyper[0], hyper[1], pooled, *hyper[3:6], next(extra) if cold else hyper[6],
             next(extra) if gs else hyper[7], *hyper[8:])
    else:
        h = (hyper[0], pooled)
    new = {}
    for i, s in enumerate(owners):
        th, rows = c[i * width:(i + 1) * width], view[s]
        if kind == "prefill":
            Xa, Xl, off = rows.design(h)  # the block's layout: Xa (θ7 in it only if free), then Xl
            na = Xa.shape[1]
            pred = Xa @ th[:na] + off + np.maximum(Xl @ th[na:], pooled)
            theta = _prefill_theta(th, na, h)
        else:
            pred = np.maximum(th[0] * rows.sr, pooled * rows.feat(hyper[0])) + th[1] * rows.bs + th[2]
            theta = DecodeTheta(float(th[0]), float(th[1]), float(th[2]), occupancy_floor=pooled)
        new[s] = (theta, np.abs(pred / rows.y - 1.0), fits[s][2])
    return h, new


def _knees_identified(parts, knees) -> bool:
    """Whether every partition's rows pin each piece of the bent line: two batch sizes (Σn)
    up to the first knee, one past each knee. Otherwise a piece is free, and the fold that
    holds out the one row below a knee was predicted 3x its time (synthetic table)."""
    k1, k2 = knees
    if not k1:
        return True
    for rows in parts.values():
        n = np.unique(rows.n_sum)
        if (n <= k1).sum() < 2 or not (n > (k2 or k1)).any() or (k2 and not ((n > k1) & (n <= k2)).any()):
            return False
    return True


def _prefill_floors(parts):
    ymin = min(float(p.y.min()) for p in parts.values())
    return [0.0] + [round(f * ymin, 6) for f in FLOOR_GRID]


def _decode_grid(parts, k: int):
    bmax = max(float((p.y / p.feat(k)).max()) for p in parts.values())
    return [0.0] + [float(b) for b in np.geomspace(bmax * 1e-3, bmax, BETA_COARSE)]


def _decode_refine(best):
    if best <= 0:
        return []
    step = 1e3 ** (1.0 / (BETA_COARSE - 1))
    return [float(b) for b in np.geomspace(best / step, best * step, BETA_FINE)]


class _Pooled:
    """Per-partition θ, hyper-parameters shared by all partitions and chosen on their
    training rows by J. Fits of a whole partition are cached per hyper-parameter value, so
    cross-validation (one partition's fold out at a time) refits only that partition."""

    def __init__(self, kind: str, parts: Mapping[int, object], knee: int = 0, gemm: bool = False,
                 floor: bool = True, taus: Sequence[int] = WAVE_TOKENS_GRID):
        self.kind = kind
        self.taus = tuple(taus)
        self.floor = floor
        self.knee = knee
        self.gemm = gemm
        self.parts = dict(parts)
        self._fit_rows = _fit_prefill_rows if kind == "prefill" else _fit_decode_rows
        self._cache: dict = {}

    def _fit_one(self, rows, hyper):
        return self._fit_rows(rows, *hyper)

    def _full(self, s, hyper):
        k = (s, hyper)
        v = self._cache.get(k)
        if v is None:
            v = self._cache[k] = self._fit_one(self.parts[s], hyper)
        return v

    def select(self, replace: Mapping[int, object] | None = None, sms=None):
        """(hyper, {sms: θ}) on all partitions, with ``replace[s]`` (training rows) for s;
        ``sms``: the partitions whose θ are wanted (default all; the hyper-parameters see all)."""
        replace = replace or {}
        view = {s: replace.get(s, p) for s, p in self.parts.items()}
        fa3_decode = self.kind == "decode" and next(iter(view.values())).kernel.fa3

        def fit(s, hyper):
            return self._fit_one(view[s], hyper) if s in replace else self._full(s, hyper)

        def evaluate(hyper):
            fits = {s: fit(s, hyper) for s in view}
            e = np.concatenate([f[1] for f in fits.values()])
            return _errors_j(e), fits

        best = None

        def scan(grid):
            nonlocal best
            for h in grid:
                j, fits = evaluate(h)
                if best is None or j < best[0] - _TIE:
                    best = (j, h, fits)

        if self.kind == "prefill":
            # Coordinate search: (τ, κ), then the floor L, the GEMM waves (m_lo, m_hi), the
            # projections' knee m_k and the pooled cold-read cost θ7, again while a round moves
            # any of them (at most three rounds). θ7 starts free per partition (-1); its grid
            # is the median of those fits times COLD_GRID, and from then on it is pooled
            # whatever J says, since a free θ7 always fits its own rows at least as well. With a
            # GEMM curve its scale θ10 (pooled, starting at 1) closes each round; the launch floor
            # is not offered then (such tables time the GPU alone). θ1 stays free per partition
            # (ρ = -1) until the end.
            curve = any(p.gm.any() for p in view.values())
            floors = _prefill_floors(view) if self.floor and not curve else [0.0]
            h = (0, 0.0, 0.0, 0, 0, (0, 0), -1.0, 1.0 if curve else 0.0, -1.0)
            for _ in range(3):
                scan([(tau, k, *h[2:]) for tau in self.taus for k in (SPILL_GRID if self.knee else (0.0,))])
                scan([(*best[1][:2], f, *best[1][3:]) for f in floors])
                if self.gemm:
                    scan([(*best[1][:3], *g, *best[1][5:]) for g in GEMM_WAVES_GRID])
                scan([(*best[1][:5], m, *best[1][6:]) for m in GEMM_KNEE_GRID if _knees_identified(view, m)])
                top = best[1]
                free = evaluate((*top[:6], -1.0, *top[7:]))[1]  # the pilot: θ7 fitted per partition
                pilot = float(np.median([f[0].sum_reused_resident for f in free.values()]))
                colds = sorted({pilot * c for c in COLD_GRID} | ({top[6]} if top[6] >= 0 else set()))
                if top[6] < 0:
                    best = None  # pooled from here on
                scan([(*top[:6], c, *top[7:]) for c in colds])
                if curve:
                    scan([(*best[1][:7], g, *best[1][8:]) for g in GEMM_SCALE_GRID])
                if best[1] == h:
                    break  # nothing moved: another round would repeat this one
                h = best[1]
        else:  # β over a coarse grid for each k, then finer around the best (k, β)
            kernel = next(iter(view.values())).kernel
            # k measured (the kernel's occupancy, profiling.decode_kernel): not chosen from rows;
            # FA3 has none (its second blocks are each partition's δ)
            ks = ((0,) if fa3_decode else (kernel.blocks_per_sm,) if kernel.blocks_per_sm
                  else DECODE_BLOCKS_GRID if kernel.usable else (0,))
            for k in ks:
                scan([(k, b) for b in _decode_grid(view, k)])
            k, b = best[1]
            scan([(k, x) for x in _decode_refine(b)])
        # FA3: δ ≤ β ties each partition's δ to the pooled β, which the joint NNLS cannot hold, so
        # β stays the refined grid's (steps of 4.8 %)
        polished = None if fa3_decode else _polish(self.kind, view, best[1], best[2])
        if polished is not None:
            j = _errors_j(np.concatenate([f[1] for f in polished[1].values()]))
            if j < best[0] - _TIE:
                best = (j, *polished)
                if self.kind == "decode":
                    scan([best[1]])  # the floored rows again, at the exact β: the grid's may differ
        _, h, fits = best
        want = view if sms is None else sms
        if self.kind == "prefill":
            # θ1 (Σn²) of a partition whose rows lack the table's longest prompt is ρ·θ2, ρ the
            # median θ1/θ2 of the partitions that have it: extrapolated from shorter prompts its
            # own θ1 missed the 70B table's 32K-token prefills by 13 % (132 SMs, held out)
            longest = {s: _longest_prompt(p) for s, p in view.items()}
            top = max(longest.values())
            ratios = [fits[s][0].sum_new_sq / fits[s][0].sum_new_reused_waves for s in view
                      if longest[s] >= top and fits[s][0].sum_new_reused_waves > 0]
            tied = (*h[:8], float(np.median(ratios))) if ratios else h
            return h, {s: fits[s][0] if longest[s] >= top else fit(s, tied)[0] for s in want}
        if self.kind == "decode":
            # The compute roofline comes last, per partition, at the chosen (k, β) and with the
            # rows the floor search put on the floor: searched together with β, the 70B table's
            # one odd row at 132 SMs pulled β up 70 % (held out 12 %), and together with the floor
            # rows it let all but one row of a partition sit on the floor (8B tables, 11 %).
            return h, {s: (self._compute(s, h, fits[s][2]) if s not in replace else
                           _fit_decode_rows(view[s], *h, knees=view[s].knees(), floored=fits[s][2])[0])
                       for s in want}
        return h, {s: fits[s][0] for s in want}

    def _compute(self, s, hyper, floored):
        """A whole partition's decode θ with the compute term (``select``), cached."""
        key = (s, hyper, floored.tobytes())
        v = self._cache.get(key)
        if v is None:
            rows = self.parts[s]
            v = self._cache[key] = _fit_decode_rows(rows, *hyper, knees=rows.knees(), floored=floored)[0]
        return v


def _longest_prompt(rows: PrefillDesign) -> float:
    """The most new tokens of one request among a partition's rows (uniform batches: Σn²/Σn)."""
    return float((rows.sq / np.maximum(rows.n_sum, 1.0)).max()) if len(rows.y) else 0.0


def _prefill_parts(df, knee: int, device_sms: int = 0, curve: GemmCurves | None = None, heads: int = 0,
                   fa3: Fa3Grid | None = None):
    return {int(s): PrefillDesign(g, int(s), knee, BLOCK_TOKENS, device_sms, curve=curve, heads=heads, fa3=fa3)
            for s, g in df.groupby("prefill_sms")}


def _prefill_pooled(parts, knee: int, device_sms: int, launch_floor: bool, fa3: Fa3Grid | None) -> "_Pooled":
    # FA3's τ is its tile's (fa3_kernels), not chosen from the rows
    taus = (fa3.tokens_per_sm,) if fa3 is not None else WAVE_TOKENS_GRID
    return _Pooled("prefill", parts, knee, bool(device_sms), launch_floor, taus=taus)


def _prefill_hyper(hyper, knee: int, device_sms: int, min_tokens: int, heads: int,
                   fa3: Fa3Grid | None = None) -> PrefillHyper:
    tau, kappa, _, lo, hi, (m, m2), _, _, _ = hyper
    return PrefillHyper(int(tau), fa3.block_tokens if fa3 is not None else BLOCK_TOKENS, int(knee) if kappa else 0,
                        int(device_sms) if lo else 0, int(lo), int(hi), int(m), int(m2), int(min_tokens), int(heads),
                        split_kv_device_sms=fa3.device_sms if fa3 is not None else 0,
                        kv_heads=fa3.kv_heads if fa3 is not None else 0)


def _decode_parts(df, kernel: DecodeHyper | None = None):
    return {int(s): DecodeDesign(g, int(s), kernel) for s, g in df.groupby("decode_sms")}


def fit_prefill_frame(df, l2_knee: int = 0, device_sms: int = 0, launch_floor: bool = True,
                      gemm_curve: GemmCurves | None = None, heads: int = 0,
                      fa3: Fa3Grid | None = None) -> tuple[PrefillHyper, dict[int, tuple]]:
    """(hyper-parameters, {prefill_sms: θ}) from solo_prefill.csv rows (all partitions);
    ``device_sms`` (the GPU's SM count) lets the fit choose GEMM waves, 0 = not;
    ``launch_floor``: offer the host's launch floor L (False for rows that time the GPU alone);
    ``gemm_curve``: the table's measured projection times (θ10's column; None: θ10 = 0);
    ``heads``: the model's query heads, for the cold waves (0: every prefix is read cold apart);
    ``fa3``: the attention grid is FA3's (fa3_kernels), else triton's."""
    nmin = min_batch_tokens(gemm_curve)
    parts = _prefill_parts(prefill_domain(df, nmin)[0], l2_knee, device_sms, gemm_curve, heads, fa3)
    hyper, th = _prefill_pooled(parts, l2_knee, device_sms, launch_floor, fa3).select()
    return _prefill_hyper(hyper, l2_knee, device_sms, nmin, heads, fa3), th


def fit_decode_frame(df, kernel: DecodeHyper | None = None) -> tuple[DecodeHyper, dict[int, tuple]]:
    """(hyper-parameters, {decode_sms: θ}) from solo_decode.csv rows (all partitions; k and β
    are shared). ``kernel`` describes the decode kernel (``decode_kernel``); None: no wave count."""
    kernel = kernel or DecodeHyper()
    (k, _), th = _Pooled("decode", _decode_parts(df, kernel)).select()
    return kernel.with_choice(k), th


def kfold(n: int, folds: int = 5, seed: int = 0):
    """The held-out checks' folds of ``n`` rows: (test, train) index arrays, the rows in a seeded
    random order and every k-th a fold (k = min(folds, n))."""
    k = min(folds, n)
    order = np.random.default_rng(seed).permutation(n)
    for f in range(k):
        test = order[f::k]
        yield test, np.setdiff1d(order, test)


def heldout_errors(kind: str, df, folds: int = 5, seed: int = 0, l2_knee: int = 0,
                   decode_kernel: DecodeHyper | None = None, device_sms: int = 0,
                   launch_floor: bool = True, gemm_curve: GemmCurves | None = None,
                   heads: int = 0, fa3: Fa3Grid | None = None) -> dict[int, object]:
    """{sms: relative errors of that partition's rows, each predicted without having seen it}.

    k-fold per partition (the rows of a partition in a seeded random order, every k-th row
    a fold); for partition s and fold f the model is fitted on every row except s's fold f —
    s's θ on its other rows, the pooled hyper-parameters on all partitions' training rows.
    The GEMM curve is an input (measured apart from the rows, like the SM count), not a row.
    """
    col = "prefill_sms" if kind == "prefill" else "decode_sms"
    nmin = min_batch_tokens(gemm_curve)
    if kind == "prefill":
        df = prefill_domain(df, nmin)[0]  # batches below the smallest modelled one are bounds, not fitted
    kernel = decode_kernel or DecodeHyper()
    parts = _prefill_parts(df, l2_knee, device_sms, gemm_curve, heads, fa3) if kind == "prefill" \
        else _decode_parts(df, kernel)
    pooled = _prefill_pooled(parts, l2_knee, device_sms, launch_floor, fa3) if kind == "prefill" \
        else _Pooled(kind, parts)
    out = {}
    for s, rows in parts.items():
        err = np.empty(len(rows.y))
        for test, train in kfold(len(rows.y), folds, seed):
            hyper, th = pooled.select({s: rows.take(train)}, sms=(s,))
            hp = _prefill_hyper(hyper, l2_knee, device_sms, nmin, heads, fa3) if kind == "prefill" else None
            dh = kernel.with_choice(hyper[0]) if kind == "decode" else None
            m = SoloLatencyModel({s: th[s]} if kind == "prefill" else {}, {s: th[s]} if kind == "decode" else {},
                                 prefill_hyper=hp, decode_hyper=dh, gemm_curve=gemm_curve, _partial=True)
            g = df[df[col] == s].iloc[test]
            pred = predict_prefill_frame(m, g) if kind == "prefill" else predict_decode_frame(m, g)
            err[test] = np.abs(pred / rows.y[test] - 1.0)
        out[s] = err
    return out


def fit_solo(solo_prefill, solo_decode, l2_knee: int = 0, decode_kernel: DecodeHyper | None = None,
             device_sms: int = 0, launch_floor: bool = True, gemm_curve: GemmCurves | None = None,
             heads: int = 0, padded_query_blocks: bool = False, fa3: Fa3Grid | None = None) -> SoloLatencyModel:
    """The solo-run model fitted from the two solo CSV frames. ``l2_knee`` = r0 (0: no
    L2-spill term); ``decode_kernel`` (``decode_kernel()``) lets the decode fit count waves;
    ``device_sms`` (the GPU's SM count) lets the prefill fit choose GEMM waves; ``gemm_curve``:
    the table's measured projection times (θ10); ``heads``: query heads (the cold waves);
    ``padded_query_blocks``: the attention kernel pads every request to the longest one's query
    blocks (SGLang's triton extend; profiled batches are uniform, so this is set, not fitted);
    ``fa3``: the prefill attention runs FA3's grid (fa3_kernels), else triton's."""
    hyper, pre = fit_prefill_frame(solo_prefill, l2_knee, device_sms, launch_floor, gemm_curve, heads, fa3)
    hyper = replace(hyper, padded_query_blocks=int(bool(padded_query_blocks)))
    dh, dec = fit_decode_frame(solo_decode, decode_kernel)
    return SoloLatencyModel(pre, dec, hyper, dh, gemm_curve=gemm_curve)
