"""Synthetic contention tables for CPU tests and the simulator.

``write_synthetic_table(dir)`` writes a complete table (meta.json, the three CSVs and, by
default, fit.json + guard.json) for the Llama-3.1-8B shape on a 132-SM GPU, granularity 16:
decode partitions 16..112 and 132 (decode alone), prefill partitions 116..20 and 132.

Ground truth ("roofline-ish"): per partition, compute time (FLOPs / probed GEMM rate) plus
memory time (bytes / probed copy bandwidth), which is exactly of the form of Eq. 1 / Eq. 2,
times lognormal noise of relative size ``noise``. ``solo_model="mux"`` instead measures uniform
batches (as the profiler does) of the extended model of sglang_mux.latency_model with the
known pooled terms of ``MUX_TRUTH`` (attention waves, L2 spill, launch floor, decode
occupancy floor, GEMM waves) on top of the same per-partition θs: ``mux_solo_frames``. Contention slowdowns lie in
[1, ``guard_max``] and reach ``guard_max`` exactly: corun/solo of the contention rows is the
slowdown, with no noise on the ratio.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from sglang_mux.partitions import partition_configs
from sglang_mux.roofline import DEFAULT_H100_PROBE, probe_at
from sglang_mux.tables import write_table

LLAMA_8B = {
    "architecture": "LlamaForCausalLM", "num_layers": 32, "hidden_size": 4096, "num_heads": 32,
    "num_kv_heads": 8, "head_dim": 128, "intermediate_size": 14336, "vocab_size": 128256,
}
# A directory name the table code accepts for this shape (tables.table_dirname).
TABLE_NAME = "llama-3.1-8b__nvidia-h200__triton"
TOTAL_SMS = 132
GRANULARITY = 16
DECODE_SMS = [16, 32, 48, 64, 80, 96, 112]
PREFILL_SMS = [TOTAL_SMS - d for d in DECODE_SMS]
# A subset of SGLang's captured CUDA-graph batch sizes.
CAPTURE_BS = [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256]
GRID_PREFILL_NEW = [2048, 8192, 32768, 131072]
GRID_PREFILL_REUSED = [0, 2048, 8192, 32768, 131072]
GRID_DECODE_REUSED = [512, 2048, 8192, 32768]
KV_CAPACITY_TOKENS = 1 << 19  # decode batches whose KV would not fit are not profiled


def true_prefill_theta(sms: int, m: dict = LLAMA_8B) -> tuple[float, float, float, float]:
    """Ground-truth Eq. 1 coefficients (ms) on ``sms`` SMs."""
    F, B = probe_at(DEFAULT_H100_PROBE, sms)
    L, h, hq, hkv, hd, it, V = (m[k] for k in ("num_layers", "hidden_size", "num_heads", "num_kv_heads",
                                                "head_dim", "intermediate_size", "vocab_size"))
    params = h * (hq + 2 * hkv) * hd + hq * hd * h + 3 * h * it
    attn_eff = 0.6  # attention runs below GEMM peak
    t1 = L * 2 * hq * hd / (F * attn_eff)  # causal n²/2 pairs x 4·hq·hd flops
    t2 = L * 4 * hq * hd / (F * attn_eff)
    t3 = L * (2 * params / F + 24 * h * 2 / B)
    t4 = (L * params * 2 + V * h * 2) / B + L * 20e-6
    return tuple(1e3 * t for t in (t1, t2, t3, t4))


def true_decode_theta(sms: int, m: dict = LLAMA_8B) -> tuple[float, float, float]:
    """Ground-truth Eq. 2 coefficients (ms) on ``sms`` SMs."""
    F, B = probe_at(DEFAULT_H100_PROBE, sms)
    L, h, hq, hkv, hd, it, V = (m[k] for k in ("num_layers", "hidden_size", "num_heads", "num_kv_heads",
                                                "head_dim", "intermediate_size", "vocab_size"))
    params = h * (hq + 2 * hkv) * hd + hq * hd * h + 3 * h * it
    t1 = L * 2 * hkv * hd * 2 / (0.8 * B)  # KV read per cached token, paged at 80% of copy BW
    t2 = L * (2 * params / F + 24 * h * 2 / B) + 2 * h * V / F
    t3 = (L * params * 2 + V * h * 2) / B + L * 12e-6 + 150e-6
    return tuple(1e3 * t for t in (t1, t2, t3))


# The extended model's pooled terms used by solo_model="mux" (all on the fit's grids, so a
# noiseless table is recovered exactly): τ = 4 query tokens per SM per wave, a spilled pair
# costs 1.5x an L2-resident one past r0 = 12800 (H200, Llama-3.1-8B), a 12 ms launch floor,
# a decode occupancy floor of 0.38 µs per token of the longest context, token-linear work in
# ⌈132/S⌉ waves up to 512 batch tokens, scaling as 1/S from 16384 (GEMM grids sized for 132 SMs),
# cold prefix reads in the waves of the extend grid's first query block (32 heads).
MUX_TRUTH = {"wave_tokens_per_sm": 4, "spill_ratio": 0.5, "l2_knee_tokens": 12800, "floor_ms": 12.0,
             "beta_ms_per_token": 3.8e-4, "gemm_waves": (512, 16384), "cold_ms_per_token": 6e-4,
             "gemm_knees": (1024, 4096), "past_knee_shares": (0.25, 0.1), "heads": 32}
# The measured-GEMM-curve variant ("mux-curve", a GPU-timed table: no launch floor, no GEMM
# waves or knees): 30 % of θ3 stays token-linear, the rest is the curve x θ10 = 0.9, and the
# curve has cuBLAS-like slow token counts (96 and 448 tokens: 1.4x their line).
CURVE_TOKENS = (32, 64, 96, 128, 192, 256, 384, 448, 512, 1024, 2048, 4096, 8192, 16384, 32768)
CURVE_SLOW = {96: 1.4, 448: 1.4}
CURVE_SCALE = 0.9
MUX_PREFILL_CELLS = [(bs, n, r) for bs, n in ((1, 128), (1, 512), (4, 512), (1, 2048), (4, 2048), (1, 8192))
                     for r in (0, 8192, 32768)] + [(16, 512, 2048), (1, 32768, 0), (1, 256, 0), (1, 1024, 0),
                                                   (1, 4096, 0)]
MUX_DECODE_CELLS = [(bs, r) for bs in (1, 8, 32, 64, 128, 256) for r in (2048, 8192, 32768, 130048)
                    if bs * r <= KV_CAPACITY_TOKENS]


def mux_true_prefill_theta(sms: int) -> tuple[float, ...]:
    """θ (latency_model.PREFILL_FEATURES order) of the "mux" ground truth."""
    t = true_prefill_theta(sms)
    return (t[0], t[1], t[2], t[3], MUX_TRUTH["spill_ratio"] * t[1], MUX_TRUTH["floor_ms"],
            MUX_TRUTH["cold_ms_per_token"], *(f * t[2] for f in MUX_TRUTH["past_knee_shares"]), 0.0)


def mux_true_decode_theta(sms: int) -> tuple[float, ...]:
    """θ (latency_model.DECODE_FEATURES order) of the "mux" ground truth."""
    return (*true_decode_theta(sms), MUX_TRUTH["beta_ms_per_token"], 0.0, 0.0, 0.0)  # no γ (triton), no compute roofline


def mux_truth_model():
    """The "mux" ground truth as a SoloLatencyModel (prefill on PREFILL_SMS + full GPU, ...)."""
    from sglang_mux.latency_model import PrefillHyper, SoloLatencyModel

    hp = PrefillHyper(MUX_TRUTH["wave_tokens_per_sm"], 128, MUX_TRUTH["l2_knee_tokens"], TOTAL_SMS,
                      *MUX_TRUTH["gemm_waves"], *MUX_TRUTH["gemm_knees"], cold_head_blocks=MUX_TRUTH["heads"])
    return SoloLatencyModel({s: mux_true_prefill_theta(s) for s in PREFILL_SMS + [TOTAL_SMS]},
                            {s: mux_true_decode_theta(s) for s in DECODE_SMS + [TOTAL_SMS]}, hp)


def mux_curve_frame():
    """gemm_curve.csv rows of the "mux-curve" truth: (prefill_sms, tokens, gemm_ms)."""
    rows = []
    for s in PREFILL_SMS + [TOTAL_SMS]:
        t = true_prefill_theta(s)
        rows += [(s, m, (0.7 / CURVE_SCALE) * t[2] * m * CURVE_SLOW.get(m, 1.0) + 0.2 * t[3]) for m in CURVE_TOKENS]
    return pd.DataFrame(rows, columns=["prefill_sms", "tokens", "gemm_ms"])


def mux_curve_truth_model():
    """The "mux-curve" ground truth: ``mux_truth_model`` with the projections on a measured
    curve (θ10 = CURVE_SCALE), GPU-timed (no floor), no GEMM waves or knees."""
    from sglang_mux.latency_model import GemmCurves
    from sglang_mux.latency_model import PrefillHyper, SoloLatencyModel

    hp = PrefillHyper(MUX_TRUTH["wave_tokens_per_sm"], 128, MUX_TRUTH["l2_knee_tokens"],
                      cold_head_blocks=MUX_TRUTH["heads"])
    pre = {}
    for s in PREFILL_SMS + [TOTAL_SMS]:
        t = mux_true_prefill_theta(s)
        pre[s] = (t[0], t[1], 0.3 * t[2], t[3], t[4], 0.0, t[6], 0.0, 0.0, CURVE_SCALE)
    return SoloLatencyModel(pre, {s: mux_true_decode_theta(s) for s in DECODE_SMS + [TOTAL_SMS]}, hp,
                            gemm_curve=GemmCurves.from_frame(mux_curve_frame()))


def mux_solo_frames(curve: bool = False):
    """Noiseless solo_prefill / solo_decode frames of uniform batches from ``mux_truth_model``
    (``curve``: from ``mux_curve_truth_model``, with 64, 96 and 448-token cells)."""
    from sglang_mux.latency_model import PrefillReq

    m = mux_curve_truth_model() if curve else mux_truth_model()
    cells = MUX_PREFILL_CELLS + ([(1, 64, 0), (1, 96, 0), (1, 448, 0)] if curve else [])
    pre = [(s, bs, bs * n * n, bs * n * r, bs * n, m.prefill_ms(s, [PrefillReq(n, r)] * bs))
           for s in PREFILL_SMS + [TOTAL_SMS] for bs, n, r in cells]
    dec = [(s, bs, bs * r, m.decode_ms(s, bs, bs * r, r)) for s in DECODE_SMS + [TOTAL_SMS]
           for bs, r in MUX_DECODE_CELLS]
    return (pd.DataFrame(pre, columns=["prefill_sms", "bs", "sum_new_sq", "sum_new_reused", "sum_new", "latency_ms"]),
            pd.DataFrame(dec, columns=["decode_sms", "bs", "sum_reused", "latency_ms"]))


def _prefill_rows(rng, sms, n_rows):
    rows = []
    for _ in range(n_rows):
        bs = int(rng.integers(1, 9))
        n = np.exp(rng.uniform(np.log(16), np.log(32768), bs)).astype(int)
        r = np.where(rng.random(bs) < 0.5, 0, np.exp(rng.uniform(np.log(64), np.log(65536), bs)).astype(int))
        rows.append((sms, bs, int((n * n).sum()), int((n * r).sum()), int(n.sum())))
    return rows


def write_synthetic_table(dir, gpu_name="NVIDIA H200", model="llama-3.1-8b", seed=0, noise=0.01, attention_backend="triton",
                          guard_max=1.25, fitted: bool = True, solo_model: str = "eq", granularity: int = GRANULARITY,
                          decode_blocks_per_sm: int | None = None) -> Path:
    """Write a complete synthetic table into ``dir`` (created); returns its Path.

    ``model`` is recorded in meta.json's command only (the shape is Llama-3.1-8B's);
    ``fitted=False`` leaves out fit.json/guard.json (as the profiler writes it before fitting);
    ``solo_model``: "eq" (random batches of Eq. 1/2), "mux" (``mux_solo_frames``, noise applied)
    or "mux-curve" (the same with a measured GEMM curve, gemm_curve.csv, and a GPU-timed mark);
    ``granularity``: SMs per partition step ("eq" only): a coarser one profiles fewer partitions;
    ``decode_blocks_per_sm``: meta.json's measured decode occupancy (None: the fit chooses it).
    """
    if granularity != GRANULARITY and solo_model != "eq":
        raise ValueError(f"granularity={granularity}: only the 'eq' model is written at another granularity")
    total_sms = TOTAL_SMS
    decode_parts = [c.decode_sms for c in partition_configs(total_sms, granularity)]
    prefill_parts = [total_sms - d for d in decode_parts]
    rng = np.random.default_rng(seed)
    jitter = lambda k: np.exp(rng.normal(0.0, noise, k)) if noise > 0 else np.ones(k)  # noqa: E731

    # Solo prefill: random batches on every prefill partition, incl. the full GPU.
    pre = []
    for s in prefill_parts + [total_sms]:
        th = true_prefill_theta(s)
        for s_, bs, sq, nr, n in _prefill_rows(rng, s, 60):
            pre.append((s_, bs, sq, nr, n, th[0] * sq + th[1] * nr + th[2] * n + th[3]))
    sp = pd.DataFrame(pre, columns=["prefill_sms", "bs", "sum_new_sq", "sum_new_reused", "sum_new", "latency_ms"])
    sp["latency_ms"] *= jitter(len(sp))

    # Solo decode: captured batch sizes x random per-request context, incl. the full GPU.
    dec = []
    for s in decode_parts + [total_sms]:
        th = true_decode_theta(s)
        for bs in CAPTURE_BS:
            for _ in range(4):
                per = np.exp(rng.uniform(np.log(128), np.log(min(65536, KV_CAPACITY_TOKENS / bs))))
                sr = int(bs * per)
                dec.append((s, bs, sr, th[0] * sr + th[1] * bs + th[2]))
    sd = pd.DataFrame(dec, columns=["decode_sms", "bs", "sum_reused", "latency_ms"])
    sd["latency_ms"] *= jitter(len(sd))
    if solo_model in ("mux", "mux-curve"):
        sp, sd = mux_solo_frames(curve=solo_model == "mux-curve")
        sp["latency_ms"] *= jitter(len(sp))
        sd["latency_ms"] *= jitter(len(sd))
    elif solo_model != "eq":
        raise ValueError(f"solo_model must be 'eq', 'mux' or 'mux-curve', got {solo_model!r}")

    # Contention grid: partitions x prefill (new, reused) x decode (bs, reused per request).
    ct = []
    for d in decode_parts:
        th = true_decode_theta(d)
        for pn in GRID_PREFILL_NEW:
            for pr in GRID_PREFILL_REUSED:
                if pn == 131072 and pr == 131072:  # excluded in the paper too
                    continue
                for bs in CAPTURE_BS:
                    for rr in GRID_DECODE_REUSED:
                        if bs * rr > KV_CAPACITY_TOKENS:
                            continue
                        ct.append((d, pn, pr, bs, rr, th[0] * bs * rr + th[1] * bs + th[2]))
    ct = pd.DataFrame(ct, columns=["decode_sms", "prefill_new", "prefill_reused", "decode_bs",
                                   "decode_reused_per_req", "decode_solo_ms"])
    ct["decode_solo_ms"] *= jitter(len(ct))
    # Slowdown: larger with more prefill tokens, a memory-heavier decode and an irregular
    # per-partition factor (paper Fig. 11: not monotone in SMs), normalized to reach guard_max.
    part = dict(zip(decode_parts, rng.uniform(0.4, 1.0, len(decode_parts))))
    f = (ct["decode_sms"].map(part)
         * np.log2(ct["prefill_new"] + ct["prefill_reused"]) / 18.0
         * (0.5 + 0.5 * np.log2(ct["decode_bs"] * ct["decode_reused_per_req"]) / 19.0)
         * rng.uniform(0.7, 1.0, len(ct)))
    slow = 1.0 + (guard_max - 1.0) * f / f.max()
    ct["decode_corun_ms"] = ct["decode_solo_ms"] * slow

    meta = {
        "gpu_name": gpu_name, "sm_count": total_sms, "model": dict(LLAMA_8B),
        "versions": {"sglang": "0.5.16", "torch": "2.11.0", "cuda": "12.9"},
        "date": "2025-01-01T00:00:00Z",
        "command": f"tests/synth_tables.py write_synthetic_table(model={model!r}, seed={seed}, noise={noise})",
        "granularity": granularity, "attention_backend": attention_backend,
    }
    if solo_model == "mux-curve":
        meta["profiler"] = {"prefill_timing": "gpu"}
    if decode_blocks_per_sm is not None:
        meta.setdefault("profiler", {})["decode_blocks_per_sm"] = int(decode_blocks_per_sm)
    path = write_table(dir, meta, sp, sd, ct)
    if solo_model == "mux-curve":
        mux_curve_frame().to_csv(Path(path) / "gemm_curve.csv", index=False)
    if fitted:
        from sglang_mux.estimator import fit_table
        fit_table(path)
    return Path(path)


# The small table: every partition step of 32 SMs (decode 32/64/96 + the full GPU, prefill
# 100/68/36 + the full GPU) with the decode kernel's occupancy measured (k = 6, as the shipped
# triton tables), so the fit scans one k instead of DECODE_BLOCKS_GRID. A held-out
# `estimator check` of it is ~8x cheaper than of the full table, with the same margins (held-out
# max <= 3.5 %, mean <= 0.93 % against 10 % / 3 %). For tests that exercise the check and fit
# machinery rather than anything about the 7 partitions of granularity 16.
SMALL_GRANULARITY = 32
SMALL_DECODE_SMS = [32, 64, 96]
SMALL_BLOCKS_PER_SM = 6


def write_small_synthetic_table(dir, **kw) -> Path:
    """``write_synthetic_table`` at SMALL_GRANULARITY with the measured decode occupancy."""
    return write_synthetic_table(dir, granularity=SMALL_GRANULARITY, decode_blocks_per_sm=SMALL_BLOCKS_PER_SM, **kw)
