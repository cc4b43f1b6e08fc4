"""The design of a table's solo rows: the feature columns the fit solves over (`PrefillDesign`,
`DecodeDesign`, one partition each, uniform batches) and the vectorized predictions of whole CSV
frames (`predict_prefill_frame`, `predict_decode_frame`), equal to the model's hot path on those
rows. Needs numpy and pandas frames; `fit` fits on these, `model` predicts one batch at a time.
"""

from __future__ import annotations

import numpy as np

from .fa3_kernels import Fa3Grid
from .gemm_curve import GemmCurves
from .terms import (BLOCK_TOKENS, MIN_BATCH_TOKENS, DecodeHyper, cold_waves, gemm_excess, gemm_share, key_waves)

# b_c: batch sizes past which the decode projections may turn compute-bound (0 = off, always tried)
COMPUTE_KNEE_GRID = (8, 16, 24, 32, 48, 64, 96, 128, 192)
COMPUTE_KNEE_ROWS = 2  # distinct batch sizes a candidate compute knee must leave past it


class PrefillDesign:
    """The columns of one partition's solo_prefill rows (uniform batches) for any τ."""

    def __init__(self, df, sms: int, knee: int, block: int = BLOCK_TOKENS, device_sms: int = 0,
                 min_tokens: int = 0, curve: GemmCurves | None = None, heads: int = 0,
                 fa3: Fa3Grid | None = None):
        self.sms = int(sms)
        self.q = gemm_excess(int(device_sms), self.sms)
        self.y = df["latency_ms"].to_numpy(dtype=float)
        bs = df["bs"].to_numpy(dtype=float)
        self.n_sum = df["sum_new"].to_numpy(dtype=float)
        # the tokens the token-linear work is charged for: at least ``min_tokens`` (min_batch_tokens)
        self.n_lin = np.maximum(self.n_sum, float(min_tokens)) if min_tokens else self.n_sum
        # the projections' measured time at the batch's tokens (zeros: no curve, θ10 unused)
        self.gm = np.array(curve.column(self.sms, self.n_lin)) if curve is not None else np.zeros(len(self.y))
        self.sq = df["sum_new_sq"].to_numpy(dtype=float)
        self.nr = df["sum_new_reused"].to_numpy(dtype=float)
        r = np.where(self.n_sum > 0, self.nr / np.maximum(self.n_sum, 1.0), 0.0)
        self.r = r
        self.h = np.where(r > knee, r, 0.0) if knee > 0 else np.zeros_like(r)
        # the cold prefix reads of the uniform batch: r in each of its cold waves (Σr_i if heads = 0)
        self.sr = np.array([cold_waves(int(b), heads, self.sms) for b in bs], dtype=float) * r
        self.sr_res = np.where(r > knee, 0.0, self.sr) if knee > 0 else self.sr
        self.nh = self.n_sum * self.h
        if fa3 is not None:  # FA3: packed-GQA tiles, keys split to fill the whole GPU (fa3_kernels)
            block = fa3.block_tokens
            n = self.n_sum / bs
            self.s = np.array([fa3.splits(int(b), int(q), int(q + rr)) for b, q, rr in zip(bs, n, r)], dtype=float)
        else:
            self.s = None
        self.block_tok = bs * np.ceil(self.n_sum / bs / block) * block  # query tokens rounded to blocks
        self._cols: dict[int, object] = {}
        self._lins: dict[tuple, object] = {}

    def attn(self, tau: int):
        """[Σn², A1, A2] for τ (cached): A1 = W·Σn·r, A2 = W·Σn·r·[r > r0], floored at one wave."""
        X = self._cols.get(tau)
        if X is None:
            if tau > 0 and self.s is not None:  # FA3: s× the blocks, each sweeping r / s keys
                cap = float(tau * self.sms)
                span = np.ceil(self.s * self.block_tok / cap - 1e-9) * cap
                a1, a2 = span * self.r / self.s, span * self.h / self.s
            elif tau > 0:
                cap = float(tau * self.sms)
                w = np.ceil(self.block_tok / cap - 1e-9) * cap / self.n_sum
                a1 = np.maximum(w * self.nr, cap * self.r)
                a2 = np.maximum(w * self.nh, cap * self.h)
            else:
                a1, a2 = self.nr, self.nh
            X = self._cols[tau] = np.column_stack([self.sq, a1, a2])
        return X

    def attn_kappa(self, tau: int, kappa: float):
        """[Σn², A1 + κ·A2, C]: a spilled (query, key) pair costs (1+κ)x an L2-resident one;
        C = the cold first read of each prefix that stays in L2 (Σr_i, all of them without κ)."""
        X = self.attn(tau)
        if kappa:
            return np.column_stack([X[:, 0], X[:, 1] + kappa * X[:, 2], self.sr_res])
        return np.column_stack([X[:, 0], X[:, 1], self.sr])

    def lin(self, gemm=(0, 0), knees=(0, 0)):
        """[Σn·g, 1, (Σn − m_k)+, (Σn − m_k2)+]: token-linear work, g = 1 + (Q−1)·φ(Σn) for the
        GEMM waves (lo, hi), and the batch tokens past each knee (zero columns where off)."""
        X = self._lins.get((gemm, knees))
        if X is None:
            n = self.n_lin
            g = 1.0 + self.q * np.array([gemm_share(m, *gemm) for m in n]) if self.q else 1.0
            past = [np.maximum(n - k, 0.0) if k else np.zeros(len(self.y)) for k in knees]
            X = self._lins[(gemm, knees)] = np.column_stack([n * g, np.ones(len(self.y)), *past])
        return X

    def design(self, hyper):
        """(Xa, Xl, offset) for hyper = (τ, κ, L, m_lo, m_hi, (m_k, m_k2), θ7, θ10, ρ): prediction
        = Xa·θa + offset + max(Xl·θl, L). ρ < 0: Σn² is a free column of Xa (θ1), else θ1 = ρ·θ2
        (Σn² joins the prefix column: a causal pair costs what a prefix pair does). θ7 < 0: the
        cold reads are a free column of Xa (its last); else pooled, θ7·C is in the offset; so is
        θ10·G (the GEMM curve, pooled; the floor L is not offered with a curve, whose tables time
        the GPU alone)."""
        tau, kappa, _, lo, hi, knees, cold, gs, rho = hyper
        A, Xl = self.attn_kappa(tau, kappa), self.lin((lo, hi), knees)
        if rho >= 0:
            A = np.column_stack([A[:, 1] + rho * A[:, 0], A[:, 2]])
        off = gs * self.gm if gs else 0.0
        if cold < 0:
            return A, Xl, off
        return A[:, :-1], Xl, cold * A[:, -1] + off

    def take(self, idx) -> "PrefillDesign":
        out = object.__new__(PrefillDesign)
        out.sms, out.q = self.sms, self.q
        for k in ("y", "n_sum", "n_lin", "gm", "sq", "nr", "r", "h", "nh", "block_tok", "sr", "sr_res"):
            setattr(out, k, getattr(self, k)[idx])
        out.s = self.s[idx] if self.s is not None else None
        out._cols, out._lins = {}, {}
        return out


class DecodeDesign:
    def __init__(self, df, sms: int, kernel: DecodeHyper | None = None):
        self.sms = int(sms)
        self.kernel = kernel or DecodeHyper()
        self.y = df["latency_ms"].to_numpy(dtype=float)
        self.bs = df["bs"].to_numpy(dtype=float)
        self.sr = df["sum_reused"].to_numpy(dtype=float)
        self._base: dict[float, object] = {}
        self._feat: dict[int, object] = {}

    def feat(self, k: int):
        """The floor's feature per row: r_max (k = 0) or the key-waves K for k blocks/SM, or
        for FA3 with γ = k / 100."""
        f = self._feat.get(k)
        if f is None:
            if k == 0 and not self.kernel.fa3:
                f = self.sr / self.bs
            else:
                h, g = self.kernel.with_choice(k), k / 100.0 if self.kernel.fa3 else 0.0
                f = np.array([key_waves(h, self.sms, int(b), s, gamma=g) for b, s in zip(self.bs, self.sr)])
            self._feat[k] = f
        return f

    def knees(self) -> list[float]:
        """Candidate compute knees b_c: 0 (off), then each of COMPUTE_KNEE_GRID with at least
        COMPUTE_KNEE_ROWS distinct batch sizes past it (its slope is not one row's)."""
        sizes = np.unique(self.bs)
        return [0.0] + [float(b) for b in COMPUTE_KNEE_GRID if (sizes > b).sum() >= COMPUTE_KNEE_ROWS]

    def take(self, idx) -> "DecodeDesign":
        out = object.__new__(DecodeDesign)
        out.sms, out.kernel = self.sms, self.kernel
        for k in ("y", "bs", "sr"):
            setattr(out, k, getattr(self, k)[idx])
        out._base = {}
        out._feat = {k: f[idx] for k, f in self._feat.items()}
        return out


# b_c: batch sizes past which the decode projections may turn compute-bound (0 = off, always tried)


def prefill_domain(df, min_tokens: int = MIN_BATCH_TOKENS):
    """(rows the prefill fit models, rows of batches below ``min_tokens``: predicted as bounds)."""
    small = df["sum_new"].to_numpy() < min_tokens
    return df[~small], df[small]


def predict_prefill_frame(model, df):
    """``model``'s prefill latency of each solo_prefill.csv row (uniform batches), vectorized;
    equal to the hot path on those batches."""
    h = model.prefill_hyper
    out = np.empty(len(df))
    pos = {s: np.flatnonzero(df["prefill_sms"].to_numpy() == s) for s in df["prefill_sms"].unique()}
    for s, idx in pos.items():
        t = model.prefill_theta(int(s))
        rows = PrefillDesign(df.iloc[idx], int(s), h.l2_knee_tokens, h.block_tokens, h.gemm_device_sms,
                            h.min_batch_tokens, model.gemm_curve if t.gemm_curve_ms else None, h.cold_head_blocks,
                            h.fa3)
        a = rows.attn(h.wave_tokens_per_sm)
        lin = rows.lin(h.gemm_waves, (h.gemm_knee_tokens, h.gemm_knee2_tokens)) @ (
            t.sum_new, t.one, t.sum_new_past_knee, t.sum_new_past_knee2) + t.gemm_curve_ms * rows.gm
        out[idx] = (a[:, 0] * t.sum_new_sq + a[:, 1] * t.sum_new_reused_waves + a[:, 2] * t.sum_new_spill_waves
                    + rows.sr_res * t.sum_reused_resident + np.maximum(lin, t.launch_floor))
    return out


def predict_decode_frame(model, df):
    """``model``'s decode latency of each solo_decode.csv row (ms): the hot path row by row."""
    return np.array([model.decode_ms(int(s), int(b), float(r)) for s, b, r in
                     zip(df["decode_sms"], df["bs"], df["sum_reused"])], dtype=float)
