"""SoloLatencyModel: the solo (no co-runner) latency of one whole-model prefill forward or one
decode iteration on an S-SM partition, in ms, from per-partition named coefficients.

Hot path (``prefill_ms``, ``decode_ms``): plain floats, no numpy/sklearn import, a loop over the
requests and a handful of multiplications (budget <= 20 µs a call). A fused iteration's hundreds
of one-token decode rows are summed once (``decode_rows``) and added to each chunk priced beside
them (``prefill_ms``'s ``extra``). The terms are those of ``PrefillTheta`` / ``DecodeTheta``
(terms.py); docs/latency_model.md says why each exists.

Partitions not profiled (``s`` SMs):
- between two profiled ones: coefficients interpolated linearly in 1/SMs (FA3's decode γ, a
  share, takes the larger of the two); the wave counts use s;
- above the largest: that partition's coefficients (a conservative overestimate);
- below the smallest: ``UnprofiledPartition`` (a ValueError): fewer SMs would underestimate.

fit.json (``to_dict`` / ``from_dict``): format 11 (written: the decode compute roofline, a
7-value decode θ), 10 (FA3 grids, a 5-value decode θ) or 8 (the triton tables: the same without
FA3's grid, a 4-value decode θ); the missing decode terms read as 0. Any other format raises
ValueError naming the refit command ``python -m sglang_mux.estimator fit DIR``; so does a θ of
the wrong width or sign.
Fitting (numpy/scipy) lives in fit.py (`fit.fit_solo`); the ``*_frame`` methods import design.py.
"""

from __future__ import annotations

import bisect
import heapq
from dataclasses import asdict
from typing import Mapping, NamedTuple, Sequence

from .gemm_curve import GemmCurves
from .terms import (DECODE_FEATURES, PREFILL_FEATURES, DecodeHyper, DecodeTheta, PrefillHyper, PrefillReq,
                    PrefillTheta, UnprofiledPartition, cold_waves, gemm_excess, gemm_share, key_waves, make_theta)

FORMAT = 11  # fit.json's format as written; READ_FORMATS are read (docs/latency_model.md, "Fit formats")
# the decode θ's width of each format read: 8 has no FA3 γ, 10 no compute roofline (both read as 0)
DECODE_WIDTHS = {8: 4, 10: 5, 11: len(DECODE_FEATURES)}
READ_FORMATS = tuple(DECODE_WIDTHS)
REFIT = "refit the table: python -m sglang_mux.estimator fit DIR"


class DecodeRows(NamedTuple):
    """A fused iteration's one-token decode rows (`SoloLatencyModel.decode_rows`), summed as
    `SoloLatencyModel.prefill_ms` reads a batch, to be added to the prompt rows (its ``extra``)."""

    contexts: tuple  # each row's prefix (tokens), longest first
    nr: int  # Σ r
    nh: int  # Σ r over prefixes past the L2 knee
    blocks: tuple  # (r, block-rounded tokens), longest prefix first
    resident: tuple  # prefixes that stay in L2, longest first
    resident_sum: int

    def rows(self) -> list[PrefillReq]:
        return [PrefillReq(1, r) for r in self.contexts]


class _PartitionTable:
    """Named θ per SM count, with the interpolation policy of the module docstring."""

    def __init__(self, thetas: Mapping[int, Sequence[float]], kind: str, allow_empty: bool = False):
        if not thetas and not allow_empty:
            raise ValueError(f"no {kind} partitions")
        self.kind = kind
        cls = PrefillTheta if kind == "prefill" else DecodeTheta
        self.profiled: dict[int, tuple] = {int(s): make_theta(cls, th, kind, s) for s, th in thetas.items()}
        self.sms = sorted(self.profiled)
        self._cache = dict(self.profiled)  # profiled + interpolated, the hot-path lookup

    def __call__(self, sms: int):
        th = self._cache.get(sms)
        if th is None:
            th = self._cache[sms] = self._derive(sms)
        return th

    def _derive(self, s: int):
        if s <= 0:
            raise UnprofiledPartition(f"{self.kind} partition of {s} SMs is not a partition")
        i = bisect.bisect_left(self.sms, s)
        if i == 0:
            raise UnprofiledPartition(
                f"{self.kind} partition of {s} SMs is below every profiled one {self.sms}; "
                f"profile it (python -m profiling.run ...) — extrapolating would underestimate")
        if i == len(self.sms):
            return self.profiled[self.sms[-1]]  # more SMs than profiled: conservative
        lo, hi = self.profiled[self.sms[i - 1]], self.profiled[self.sms[i]]
        w = (1.0 / s - 1.0 / self.sms[i]) / (1.0 / self.sms[i - 1] - 1.0 / self.sms[i])  # lo's weight, in 1/SMs
        th = type(lo)(*(w * a + (1.0 - w) * b for a, b in zip(lo, hi)))
        if self.kind == "decode":  # γ is a share, not a rate in 1/SMs: the dearer neighbour's
            th = th._replace(fa3_block_share=max(lo.fa3_block_share, hi.fa3_block_share))
        return th


class SoloLatencyModel:
    """Eq. 1 / Eq. 2 and their extension terms, per partition. ``prefill_ms``/``decode_ms``
    are the hot path.

    ``prefill``/``decode`` map SM counts to θs: PrefillTheta / DecodeTheta, or sequences in
    PREFILL_FEATURES / DECODE_FEATURES order of at least the paper's width (4 / 3; the omitted
    extension terms are 0). ``_partial``: allow an empty side (held-out fits of one kind).
    """

    def __init__(self, prefill: Mapping[int, Sequence[float]], decode: Mapping[int, Sequence[float]],
                 prefill_hyper: PrefillHyper | None = None, decode_hyper: DecodeHyper | None = None, *,
                 gemm_curve: GemmCurves | None = None, _partial: bool = False):
        self._prefill = _PartitionTable(prefill, "prefill", _partial)
        if gemm_curve is None and any(th.gemm_curve_ms for th in self._prefill.profiled.values()):
            raise ValueError("prefill θ10 (GEMM curve) > 0 needs a gemm_curve")
        missing = sorted(set(self._prefill.sms) - set(gemm_curve.sms)) if gemm_curve is not None else []
        if missing:
            raise ValueError(f"gemm_curve has no points for prefill partitions {missing} (it has {gemm_curve.sms})")
        self.gemm_curve = gemm_curve
        self._decode = _PartitionTable(decode, "decode", _partial)
        self.prefill_hyper = h = prefill_hyper or PrefillHyper()
        # hot-path copies of the hyper-parameters
        self._tau = h.wave_tokens_per_sm
        self._blk = h.block_tokens
        self._knee = h.l2_knee_tokens
        self._knee_or_inf = self._knee or float("inf")
        self._gemm_lo, self._gemm_hi = h.gemm_waves
        self._mk = h.gemm_knee_tokens
        self._mk2 = h.gemm_knee2_tokens
        self._nmin = h.min_batch_tokens
        self._heads = h.cold_head_blocks
        self._pad_q = h.padded_query_blocks
        self._fa3 = h.fa3
        self.decode_hyper = decode_hyper or DecodeHyper()
        self._waves_on = self.decode_hyper.waves

    @property
    def prefill_sms(self) -> list[int]:
        return list(self._prefill.sms)

    @property
    def decode_sms(self) -> list[int]:
        return list(self._decode.sms)

    def prefill_theta(self, prefill_sms: int) -> PrefillTheta:
        return self._prefill(prefill_sms)

    def decode_theta(self, decode_sms: int) -> DecodeTheta:
        return self._decode(decode_sms)

    def prefill_ms(self, prefill_sms: int, reqs: Sequence[PrefillReq], extra: DecodeRows | None = None) -> float:
        """Solo latency (ms) of one whole-model prefill forward; 0 for an empty batch. ``extra``:
        one-token rows of the batch summed beforehand (`decode_rows`): a fused iteration's decode
        rows, the same for every chunk a plan prices, are then not walked again for each."""
        if extra is not None and self._pad_q:  # every row's padding depends on the longest query
            reqs, extra = [*reqs, *extra.rows()], None
        # Padded query blocks (triton): every request runs the longest one's; a dead block sweeps
        # its request's prefix and new tokens with no valid row.
        blk = self._blk
        qmax = (max(q.n for q in reqs) + blk - 1) // blk * blk if self._pad_q and len(reqs) > 1 else 0
        count, n, sq, nr, nh, bt, max_n, max_nr, r_lo, r_hi, blocks, resident = self._accumulate(reqs, qmax)
        if extra is not None and extra.contexts:
            k = len(extra.contexts)
            r_lo, r_hi = (extra.contexts[-1], extra.contexts[0]) if not count else (
                min(r_lo, extra.contexts[-1]), max(r_hi, extra.contexts[0]))
            count += k
            n += k
            sq += k
            nr += extra.nr
            nh += extra.nh
            bt += k * blk
            max_n, max_nr = max(max_n, 1), max(max_nr, 1 + extra.contexts[0])
            blocks = [*extra.blocks, *blocks]  # sorted in _waves: two runs, merged in one pass
        if n <= 0:
            return 0.0
        t = self._prefill(prefill_sms)
        knee = self._knee_or_inf
        cap = self._tau * prefill_sms  # query tokens per wave (0: no wave quantization)
        if cap and self._fa3 is not None:  # FA3: s× the blocks, each sweeping r / s keys (fa3_kernels)
            s = self._fa3.splits(count, max_n, max_nr)
            if r_lo == r_hi:
                span = -(-(s * bt) // cap) * cap
                a1 = span * r_hi / s
                a2 = a1 if r_hi > knee else 0.0
            else:
                a1, a2 = self._waves(blocks, cap, knee, s)
                a1, a2 = a1 / s, a2 / s
        elif not cap:
            a1, a2 = nr, nh
        elif r_lo == r_hi:  # one prefix length (e.g. no cache hits): every wave is alike
            span = -(-bt // cap) * cap
            a1 = span * r_hi
            a2 = span * r_hi if r_hi > knee else 0.0
        else:
            a1, a2 = self._waves(blocks, cap, knee)
        cold = 0
        more = extra.resident if extra is not None else ()
        if resident or more:  # one cold read per cold wave, of the longest prefixes (all if K >= their count)
            k = cold_waves(count, self._heads, prefill_sms)
            if k >= len(resident) + len(more):
                cold = sum(resident) + (extra.resident_sum if more else 0)
            else:  # only the k longest of ``more`` (sorted) can be among the k longest
                cold = sum(heapq.nlargest(k, [*resident, *more[:k]]))
        lin = self._lin(t, prefill_sms, n)
        floor = t.launch_floor
        return (t.sum_new_sq * sq + t.sum_new_reused_waves * a1 + t.sum_new_spill_waves * a2
                + t.sum_reused_resident * cold + (lin if lin > floor else floor))

    def decode_rows(self, contexts: Sequence[int]) -> DecodeRows:
        """One-token rows on ``contexts`` (tokens) for `prefill_ms`'s ``extra``: what `_accumulate`
        would add up for them, with builtins (a fused iteration prices 300 of them a dozen times)."""
        rs = sorted((int(c) for c in contexts), reverse=True)
        knee = self._knee_or_inf
        resident = tuple(r for r in rs if 0 < r <= knee)
        return DecodeRows(tuple(rs), sum(rs), sum(r for r in rs if r > knee), tuple((r, self._blk) for r in rs),
                          resident, sum(resident))

    def _accumulate(self, reqs: Sequence[PrefillReq], qmax: int) -> tuple:
        """One pass over a batch: (rows, Σn, Σn² with padding, Σ query rows × prefix, the same over
        prefixes past the L2 knee, block-rounded tokens, max n, max n + r, min r, max r,
        [(r, block-rounded tokens)], [prefixes that stay in L2: read cold once])."""
        blk, knee = self._blk, self._knee_or_inf
        b1 = blk - 1
        sq = nr = n = nh = bt = max_n = max_nr = 0
        r_lo = r_hi = reqs[0].r if reqs else 0
        blocks = []
        resident = []
        for q in reqs:
            qn = q.n
            qr = q.r
            tok = (qn + b1) // blk * blk
            dead = qmax - tok if qmax > tok else 0
            n += qn
            sq += qn * qn + 2 * dead * qn
            e = qn + dead  # query rows that sweep the prefix
            nr += e * qr
            if qr > knee:
                nh += e * qr
            elif qr:
                resident.append(qr)
            tok += dead
            bt += tok
            blocks.append((qr, tok))
            if qn > max_n:
                max_n = qn
            if qn + qr > max_nr:
                max_nr = qn + qr
            if qr > r_hi:
                r_hi = qr
            elif qr < r_lo:
                r_lo = qr
        return len(reqs), n, sq, nr, nh, bt, max_n, max_nr, r_lo, r_hi, blocks, resident

    def _lin(self, t: PrefillTheta, sms: int, n: float) -> float:
        """The token-linear work of an n-token batch: θ3·g·n + θ4 + θ8·(n − m_k)+ + θ9·(n − m_k2)+
        + θ10·G(n), n raised to the smallest batch the fit saw (``min_batch_tokens``)."""
        if n < self._nmin:
            n = self._nmin
        lin = t.sum_new * n * (self._gemm_g(sms, n) if self._gemm_lo else 1.0) + t.one
        if self._mk and n > self._mk:
            lin += t.sum_new_past_knee * (n - self._mk)
            if self._mk2 and n > self._mk2:
                lin += t.sum_new_past_knee2 * (n - self._mk2)
        if t.gemm_curve_ms:
            lin += t.gemm_curve_ms * self.gemm_curve.at(sms, n)
        return lin

    def _gemm_g(self, sms: int, tokens: float) -> float:
        """g = 1 + (Q−1)·φ(Σn): the token-linear work's factor for GEMM waves."""
        q = gemm_excess(self.prefill_hyper.gemm_device_sms, sms)
        return 1.0 + q * gemm_share(tokens, self._gemm_lo, self._gemm_hi) if q else 1.0

    @staticmethod
    def _waves(blocks, cap: int, knee: float, mult: int = 1) -> tuple[float, float]:
        """Wave-quantized attention work: blocks packed longest prefix first into waves of
        ``cap`` query tokens, each wave as long as its longest block (r of its first block).
        Equals W·Σn·r (and W·Σn·r·[r > r0]) on a uniform batch; on a mixed one a wave is never
        averaged down by short blocks, and adding a request never lowers the estimate. ``mult``:
        every block's tokens taken that many times (FA3's splits)."""
        a1 = a2 = 0.0
        pos = nxt = 0  # tokens packed so far; where the next wave begins
        for r, tok in sorted(blocks, reverse=True):
            pos += tok * mult
            if pos > nxt:  # waves begin at nxt, nxt + cap, ... below pos
                starts = (pos - nxt - 1) // cap + 1
                nxt += starts * cap
                a1 += starts * cap * r
                if r > knee:
                    a2 += starts * cap * r
        return a1, a2

    def prefill_ms_sums(self, prefill_sms: int, sum_new_sq: float, sum_new_reused: float, sum_new: float,
                        bs: int = 1) -> float:
        """Prefill latency from sums only: taken as a uniform batch of ``bs`` requests of
        Σn/bs new and Σn·r/Σn reused tokens each (how the profiled CSV rows are made)."""
        if sum_new <= 0:
            return 0.0
        t = self._prefill(prefill_sms)
        r = sum_new_reused / sum_new
        spill = r if self._knee and r > self._knee else 0.0
        cap = self._tau * prefill_sms
        if cap:  # uniform: ⌈bs·k·B / cap⌉ waves, each as long as one block (k·B tokens per request)
            k_tok = -(-(sum_new / bs) // self._blk) * self._blk
            s = self._fa3.splits(bs, int(sum_new / bs), int(sum_new / bs + r)) if self._fa3 is not None else 1
            span = -(-(s * bs * k_tok) // cap) * cap
            a1, a2 = span * r / s, span * spill / s
        else:
            a1, a2 = sum_new_reused, sum_new * spill
        lin = self._lin(t, prefill_sms, sum_new)
        cold = 0.0 if spill else cold_waves(bs, self._heads, prefill_sms) * r
        floor = t.launch_floor
        return (t.sum_new_sq * sum_new_sq + t.sum_new_reused_waves * a1 + t.sum_new_spill_waves * a2
                + t.sum_reused_resident * cold + (lin if lin > floor else floor))

    def decode_ms(self, decode_sms: int, bs: int, sum_reused: int, max_reused: float | None = None) -> float:
        """Solo latency (ms) of one decode iteration; 0 for an empty batch.

        ``max_reused``: the longest context in the batch; None = Σr/bs (a uniform batch, the
        smallest possible — pass the real one where it is known)."""
        if bs <= 0:
            return 0.0
        t = self._decode(decode_sms)
        a = t.sum_reused * sum_reused
        beta = t.occupancy_floor
        if beta:
            if self._waves_on:
                f = beta * key_waves(self.decode_hyper, decode_sms, bs, sum_reused, max_reused, t.fa3_block_share)
            else:
                f = beta * (sum_reused / bs if max_reused is None else max_reused)
            if f > a:
                a = f
        c = t.gemm_compute * bs - t.gemm_weight_read  # the projections' compute past their weight read
        return a + t.bs * bs + t.one + (c if c > 0.0 else 0.0)

    # -- frames (uniform-batch CSV rows), vectorized; equal to the hot path on those batches

    def predict_prefill_frame(self, df):
        """Prefill latency of each solo_prefill.csv row (numpy array, ms; `design`)."""
        from .design import predict_prefill_frame

        return predict_prefill_frame(self, df)

    def predict_decode_frame(self, df):
        """Decode latency of each solo_decode.csv row (numpy array, ms): the hot path row by row."""
        from .design import predict_decode_frame

        return predict_decode_frame(self, df)

    def pooled_terms(self) -> dict:
        """The extension terms shared by all partitions, as fitted (fit.json ``pooled``; for
        reading only — prediction uses the per-partition θs)."""
        pre = [self._prefill.profiled[s] for s in self._prefill.sms]
        dec = [self._decode.profiled[s] for s in self._decode.sms]
        kappa = next((t.sum_new_spill_waves / t.sum_new_reused_waves for t in pre if t.sum_new_reused_waves > 0), 0.0)
        scales = [t.gemm_curve_ms for t in pre]
        return {"wave_tokens_per_sm": self._tau, "l2_knee_tokens": self._knee,
                "gemm_waves_tokens": [self._gemm_lo, self._gemm_hi], "gemm_knee_tokens": [self._mk, self._mk2],
                "cold_prefix_ms_per_token": max((t.sum_reused_resident for t in pre), default=0.0),
                "l2_spill_ratio": round(kappa, 9), "launch_floor_ms": max((t.launch_floor for t in pre), default=0.0),
                "decode_floor_ms_per_token": max((t.occupancy_floor for t in dec), default=0.0),
                "decode_blocks_per_sm": self.decode_hyper.blocks_per_sm,
                "decode_fa3_gamma": {str(s): self._decode.profiled[s].fa3_block_share for s in self._decode.sms}
                if self.decode_hyper.fa3 else None,
                "decode_compute_knee_bs": {str(s): t.gemm_weight_read / t.gemm_compute
                                           for s, t in zip(self._decode.sms, dec) if t.gemm_compute > 0},
                "gemm_curve_scale": [round(min(scales, default=0.0), 4), round(max(scales, default=0.0), 4)]}

    # -- fitting / (de)serialization

    def to_dict(self) -> dict:
        """fit.json's core: {"format": 11, "prefill_hyper": {...}, "decode_hyper": {...},
        "prefill": {"<sms>": {"theta": [...]}}, "decode": {...}, "gemm_curve": {...} or null}."""
        return {
            "format": FORMAT,
            "prefill_features": list(PREFILL_FEATURES),
            "decode_features": list(DECODE_FEATURES),
            "prefill_hyper": asdict(self.prefill_hyper),
            "decode_hyper": asdict(self.decode_hyper),
            "pooled": self.pooled_terms(),
            "prefill": {str(s): {"theta": list(self._prefill.profiled[s])} for s in self._prefill.sms},
            "decode": {str(s): {"theta": list(self._decode.profiled[s])} for s in self._decode.sms},
            "gemm_curve": self.gemm_curve.to_dict() if self.gemm_curve is not None else None,
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> "SoloLatencyModel":
        """Format 11; 10 (its decode θ without the compute roofline); or 8 (10 without FA3's
        grids: the triton tables). Other formats are refused with the command that refits them:
        no shipped table has one."""
        fmt = d.get("format", 1)
        if fmt not in READ_FORMATS:
            raise ValueError(f"fit.json format {fmt!r} is not supported (this version reads "
                             f"{' and '.join(map(str, READ_FORMATS))}); {REFIT}")
        # format 8's decode θ has no FA3 γ, format 10's no compute roofline (then 0)
        widths = {"prefill": len(PREFILL_FEATURES), "decode": DECODE_WIDTHS[fmt]}

        def thetas(kind):
            out = {}
            for s, v in d[kind].items():
                th = v["theta"] if isinstance(v, Mapping) else v
                if len(th) != widths[kind]:
                    raise ValueError(f"format-{fmt} {kind} θ for {s} SMs must have {widths[kind]} values, "
                                     f"got {len(th)}; {REFIT}")
                out[int(s)] = th
            return out

        hp, dh = d.get("prefill_hyper") or {}, d.get("decode_hyper") or {}  # no decode_hyper: floor β·r_max
        if not isinstance(hp, Mapping) or not isinstance(dh, Mapping):
            raise ValueError("prefill_hyper and decode_hyper must be objects")
        fa3 = sorted(k for k in hp if k in ("split_kv_device_sms", "kv_heads")) + sorted(k for k in dh if k == "fa3")
        if fmt == 8 and fa3:
            raise ValueError(f"fit.json format 8 has no FA3 grid, but its hyper-parameters name {fa3}: "
                             f"a malformed file; {REFIT}")
        curve = None
        if d.get("gemm_curve") is not None:
            if not isinstance(d["gemm_curve"], Mapping):
                raise ValueError("gemm_curve must be an object or null")
            curve = GemmCurves.from_dict(d["gemm_curve"])
        return cls(thetas("prefill"), thetas("decode"), PrefillHyper(**hp), DecodeHyper(**dh), gemm_curve=curve)
