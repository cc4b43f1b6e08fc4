"""The latency model's vocabulary: named coefficients, hyper-parameters and the terms'
features, as plain-float functions (no numpy; the prediction path and the fit share them).

- ``PrefillTheta`` / ``DecodeTheta``: one partition's coefficients, fields = PREFILL_FEATURES /
  DECODE_FEATURES (fit.json's ``theta`` lists, in that order). Units: ms per unit of the
  feature (ms per token, per token², per key, per request), ms for ``one`` and ``launch_floor``;
  ``gemm_curve_ms`` is a ratio, ``fa3_block_share`` (γ) a share in [0, 1]. All >= 0 and finite.
  The paper's terms come first and are required; the extensions default to 0 (Eq. 1 / Eq. 2).
- ``PrefillHyper`` / ``DecodeHyper``: what all partitions share (fit.json ``prefill_hyper`` /
  ``decode_hyper``): non-negative ints; inconsistent combinations raise ValueError.
- ``key_waves``, ``cold_waves``, ``gemm_excess``, ``gemm_share``, ``l2_knee_tokens``: the
  features of the extension terms (docs/latency_model.md says why each exists).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Iterable, NamedTuple, Sequence

from .fa3_kernels import Fa3Grid, decode_keys as fa3_decode_keys
from .triton_kernels import MIN_BLOCK_KV, decode_head_groups, decode_keys as triton_decode_keys


class PrefillTheta(NamedTuple):
    """One partition's prefill coefficients (ms per unit of each feature):
    T = sum_new_sq·Σn² + sum_new_reused_waves·A1 + sum_new_spill_waves·A2
        + sum_reused_resident·C + max(launch_floor, lin),
    lin = sum_new·g·m + one + sum_new_past_knee·(m − m_k)+ + sum_new_past_knee2·(m − m_k2)+
        + gemm_curve_ms·G_S(m)   (A1, A2: wave-quantized Σn·r and its L2-spilled part)."""

    sum_new_sq: float  # θ1 (Eq. 1)
    sum_new_reused_waves: float  # θ2 (Eq. 1, wave-quantized)
    sum_new: float  # θ3 (Eq. 1)
    one: float  # θ4 (Eq. 1)
    sum_new_spill_waves: float = 0.0  # θ5 = κ·θ2: extra cost of L2-spilled (query, key) pairs
    launch_floor: float = 0.0  # L: the host's launch floor (0 for tables that time the GPU alone)
    sum_reused_resident: float = 0.0  # θ7: cold read of each L2-resident prefix, per cached token
    sum_new_past_knee: float = 0.0  # θ8: extra per batch token past m_k
    sum_new_past_knee2: float = 0.0  # θ9: extra per batch token past m_k2
    gemm_curve_ms: float = 0.0  # θ10: scale of the measured projections' time G_S(m)


class DecodeTheta(NamedTuple):
    """One partition's decode coefficients:
    T = max(sum_reused·Σr, occupancy_floor·K) + bs·bs + one + max(0, gemm_compute·bs − gemm_weight_read),
    K = ``key_waves`` (γ = fa3_block_share); the last term: the projections turn compute-bound."""

    sum_reused: float  # θ1 (Eq. 2), ms per cached token
    bs: float  # θ2 (Eq. 2), ms per request
    one: float  # θ3 (Eq. 2), ms
    occupancy_floor: float = 0.0  # β: ms per key of the busiest SM's sweep
    fa3_block_share: float = 0.0  # γ: FA3, a second block on an SM costs γ of one (0 for triton)
    gemm_compute: float = 0.0  # c: ms per request once the projections are compute-bound (0: never)
    gemm_weight_read: float = 0.0  # W = c·b_c, ms: what their compute must exceed first (the weight read, in θ3)


PREFILL_FEATURES: tuple[str, ...] = PrefillTheta._fields
DECODE_FEATURES: tuple[str, ...] = DecodeTheta._fields
PAPER_PREFILL, PAPER_DECODE = 4, 3  # the required (Eq. 1 / Eq. 2) coefficients
PREFILL_WIDTH, DECODE_WIDTH = len(PREFILL_FEATURES), len(DECODE_FEATURES)


def make_theta(cls, th: Sequence[float], kind: str, sms) -> tuple:
    """``cls`` (PrefillTheta or DecodeTheta) from the paper's coefficients and any leading
    extension terms (the rest 0). ValueError for another width or a negative / non-finite value."""
    vals = tuple(float(t) for t in th)
    width = len(cls._fields)
    paper = width - len(cls._field_defaults)
    if not paper <= len(vals) <= width or any(not (t >= 0.0) or t == float("inf") for t in vals):
        raise ValueError(f"{kind} θ for {sms} SMs must be {paper} to {width} finite non-negative floats "
                         f"({', '.join(cls._fields)}), got {th}")
    return cls(*vals)


BLOCK_TOKENS = 128  # query rows per extend-attention block (SGLang triton, sm90)
# Without a GEMM curve, batches of fewer tokens have their token-linear work charged as this many
# (an upper bound; below one 128-row tile the cost follows no line); the fit leaves their rows out.
MIN_BATCH_TOKENS = 128

# L2 cache per GPU (bytes) for the spill knee; unknown GPUs get DEFAULT_L2_BYTES.
L2_BYTES = {"H100": 50 << 20, "H200": 50 << 20, "H800": 50 << 20, "GH200": 50 << 20, "A100": 40 << 20,
            "A800": 40 << 20}
DEFAULT_L2_BYTES = 50 << 20


@dataclass(frozen=True)
class PrefillReq:
    n: int  # new tokens
    r: int = 0  # reused (cached) tokens


def fused_batch(pieces: Sequence[PrefillReq], decode_contexts: Sequence[int]) -> list[PrefillReq]:
    """A fused iteration's extend rows: the prompt pieces, then a one-token row per decode on its
    context."""
    return list(pieces) + [PrefillReq(1, int(c)) for c in decode_contexts]


@dataclass(frozen=True)
class PrefillHyper:
    """Prefill hyper-parameters shared by all partitions (fit.json ``prefill_hyper``)."""

    wave_tokens_per_sm: int = 0  # τ: query tokens per SM per attention wave; 0 = off
    block_tokens: int = BLOCK_TOKENS  # B: queries are rounded up to blocks of this many
    l2_knee_tokens: int = 0  # r0: cached tokens whose KV fits in L2; 0 = no spill term
    gemm_device_sms: int = 0  # D: the whole GPU's SMs, which small projections are tiled for; 0 = off
    gemm_waves_lo: int = 0  # m_lo: batch tokens up to which token-linear work runs in ⌈D/S⌉ waves
    gemm_waves_hi: int = 0  # m_hi: batch tokens from which it scales as 1/S
    gemm_knee_tokens: int = 0  # m_k: batch tokens past which the token-linear work costs θ8 more per token; 0 = off
    gemm_knee2_tokens: int = 0  # m_k2 > m_k: a second such knee (θ9); 0 = off
    min_batch_tokens: int = 0  # token-linear work of a smaller batch is charged as this many tokens; 0 = off
    cold_head_blocks: int = 0  # H: extend-attention blocks per request and query block (query heads); 0 = off
    padded_query_blocks: int = 0  # 1: every request runs the longest request's query blocks (triton extend grid)
    split_kv_device_sms: int = 0  # D: FA3's grid (packed GQA tiles, split-KV sized for D SMs); 0 = off (triton)
    kv_heads: int = 0  # H_kv: KV heads, FA3's tiles per request and query block

    def __post_init__(self):
        for k, v in asdict(self).items():
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"prefill hyper-parameter {k} must be a non-negative int, got {v!r}")
        if self.block_tokens < 1:
            raise ValueError("prefill hyper-parameter block_tokens must be >= 1")
        if self.gemm_waves_lo and (not self.gemm_device_sms or self.gemm_waves_hi < self.gemm_waves_lo):
            raise ValueError("prefill gemm_waves_lo > 0 needs gemm_device_sms > 0 and gemm_waves_hi >= gemm_waves_lo")
        if self.gemm_knee2_tokens and not 0 < self.gemm_knee_tokens < self.gemm_knee2_tokens:
            raise ValueError("prefill gemm_knee2_tokens > 0 needs 0 < gemm_knee_tokens < gemm_knee2_tokens")
        if self.split_kv_device_sms and not (self.kv_heads and self.cold_head_blocks and not self.padded_query_blocks):
            raise ValueError("prefill split_kv_device_sms > 0 (FA3) needs kv_heads > 0, cold_head_blocks > 0 "
                             "(the query heads) and no padded_query_blocks (triton's)")

    @property
    def fa3(self) -> Fa3Grid | None:
        """FA3's prefill grid (fa3_kernels), None for the triton grid."""
        if not self.split_kv_device_sms:
            return None
        return Fa3Grid(self.cold_head_blocks, self.kv_heads, self.split_kv_device_sms)

    @property
    def gemm_waves(self) -> tuple[int, int]:
        return (self.gemm_waves_lo, self.gemm_waves_hi) if self.gemm_device_sms else (0, 0)


@dataclass(frozen=True)
class DecodeHyper:
    """Decode hyper-parameters (fit.json ``decode_hyper``): SGLang's triton decode grid, or FA3's.

    Triton: ``blocks_per_sm`` (k) is the kernel's measured occupancy (meta.json) or, without
    it, fitted; the others describe the kernel and come from the model and the GPU
    (``decode_kernel``, ``triton_kernels``). k = 0: no wave count, the floor is β·r_max."""

    blocks_per_sm: int = 0  # k: blocks per SM per wave; 0 = off
    head_groups: int = 0  # G: blocks per request and KV split
    max_kv_splits: int = 8  # SGLang's --triton-attention-num-kv-splits (default 8)
    device_sms: int = 0  # the whole GPU's SM count, which SGLang sizes the KV splits by
    min_block_kv: int = 0  # the stage-1 kernel's MIN_BLOCK_KV (32 in SGLang 0.5.16)
    # FA3's decode grid instead (fa3_kernels.decode_keys): head_groups = KV heads, and an SM
    # holding m blocks takes 1 + γ(m − 1) blocks' time, γ fitted per partition (θ5, δ/β)
    fa3: int = 0  # 1 = FA3's grid

    def __post_init__(self):
        for k, v in asdict(self).items():
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"decode hyper-parameter {k} must be a non-negative int, got {v!r}")
        if self.blocks_per_sm and not self.usable:
            raise ValueError("decode blocks_per_sm > 0 needs head_groups, device_sms and max_kv_splits > 0")
        if self.blocks_per_sm and not self.fa3 and not self.min_block_kv:
            raise ValueError("decode blocks_per_sm > 0 needs min_block_kv (the kernel's split rounding, 32 in "
                             "SGLang 0.5.16); refit the table: python -m sglang_mux.estimator fit DIR")

    @property
    def usable(self) -> bool:
        """Whether the kernel is described well enough to count waves."""
        return bool(self.head_groups and self.device_sms and self.max_kv_splits)

    @property
    def waves(self) -> bool:
        """Whether the floor counts the kernel's blocks (else it is β·r_max)."""
        return self.blocks_per_sm > 0 or bool(self.fa3)

    def with_choice(self, k: int) -> "DecodeHyper":
        """The kernel with the fit's pooled choice of k blocks per SM (triton). FA3's choice, γ,
        is per partition and goes into θ, so its kernel is returned as it is."""
        return self if self.fa3 else replace(self, blocks_per_sm=int(k))


def decode_kernel(num_heads: int, num_kv_heads: int, device_sms: int, max_kv_splits: int = 8,
                  min_block_kv: int = MIN_BLOCK_KV) -> DecodeHyper:
    """The triton decode kernel's description (k = 0, for the fit to choose) of a model on a GPU
    (``triton_kernels``)."""
    return DecodeHyper(0, decode_head_groups(num_heads, num_kv_heads), int(max_kv_splits), int(device_sms),
                       int(min_block_kv))


def key_waves(h: DecodeHyper, sms: int, bs: int, sum_reused: float, max_reused: float | None = None,
              gamma: float = 0.0) -> float:
    """K: the keys one SM sweeps until the step's last block ends, of the decode grid ``h``
    describes: FA3's (``fa3_kernels.decode_keys`` of the longest context, with the partition's
    ``gamma``, θ5) or triton's (``triton_kernels.decode_keys``). ``max_reused`` None: a uniform
    batch of Σr/bs."""
    r = max(1, math.ceil(sum_reused / bs if max_reused is None else max_reused))
    if h.fa3:  # FA3 sizes a batch by its longest context: exact for a uniform batch, else a bound
        return fa3_decode_keys(h.head_groups, h.device_sms, sms, bs, r + 1, gamma)
    uniform = max_reused is None or bs * max_reused <= sum_reused * (1 + 1e-9)
    return triton_decode_keys(h.head_groups, h.max_kv_splits, h.device_sms, h.min_block_kv, h.blocks_per_sm,
                              sms, bs, sum_reused, r, uniform)


def gemm_excess(device_sms: int, sms: int) -> float:
    """Q − 1 = ⌈D/S⌉·S/D − 1: extra work of a D-block grid run in waves on S SMs (0 if S ≥ D)."""
    if not device_sms or sms >= device_sms:
        return 0.0
    return -(-device_sms // sms) * sms / device_sms - 1.0


def gemm_share(tokens: float, lo: int, hi: int) -> float:
    """φ: the share of the token-linear work that runs in whole-GPU grids at ``tokens`` batch
    tokens: 1 up to m_lo, 0 from m_hi, log-linear between (a step if m_lo = m_hi)."""
    if not lo or tokens <= lo:
        return 1.0 if lo else 0.0
    if tokens >= hi:
        return 0.0
    return math.log(hi / tokens) / math.log(hi / lo)


class UnprofiledPartition(ValueError):
    """Prediction asked for an SM count below every profiled partition."""


def cold_waves(bs: int, heads: int, sms: int) -> int:
    """K = min(bs, ⌈bs·H/S⌉): waves that read prefixes for the first time. The extend grid is
    (request, head, query block) with the request fastest, one block per SM per wave, so the
    first query block of every request and head comes first: ⌈bs·H/S⌉ waves, and requests
    whose blocks share a wave read their prefixes at once. H = 0: bs."""
    if not heads:
        return bs
    return min(bs, -(-bs * heads // sms))


def prefill_features(reqs: Iterable[PrefillReq]) -> tuple[int, int, int]:
    """(Σn², Σn·r, Σn) of a prefill batch (the paper's Eq. 1 features)."""
    sq = nr = n = 0
    for q in reqs:
        sq += q.n * q.n
        nr += q.n * q.r
        n += q.n
    return sq, nr, n


def l2_knee_tokens(gpu_name: str, num_kv_heads: int, head_dim: int, dtype_bytes: int = 2) -> int:
    """Cached tokens whose per-layer K and V fit in the GPU's L2 (the spill knee r0)."""
    name = str(gpu_name).upper()
    l2 = next((v for k, v in sorted(L2_BYTES.items(), key=lambda kv: -len(kv[0])) if k in name),
              DEFAULT_L2_BYTES)
    return int(l2 // (2 * int(num_kv_heads) * int(head_dim) * int(dtype_bytes)))


def min_batch_tokens(gemm_curve) -> int:
    """The smallest batch the prefill fit models: every batch with a measured GEMM curve (a
    ``GemmCurves``; it follows cuBLAS's choices below 128 tokens too), else MIN_BATCH_TOKENS."""
    return 0 if gemm_curve is not None else MIN_BATCH_TOKENS
