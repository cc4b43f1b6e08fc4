"""Solo-run latency model (MuxWise §3.3.2, Equations 1 and 2, with extension terms), one fit
per SM partition: T in ms of a whole-model prefill forward or decode iteration.

    prefill (Eq. 1):  T = θ1·Σn_i² + θ2·Σn_i·r_i + θ3·Σn_i + θ4
    decode  (Eq. 2):  T = θ1·Σr_i  + θ2·bs       + θ3

n_i = new tokens, r_i = reused (cached) tokens of request i. The extensions (attention waves,
L2 spill, cold prefix reads, GEMM waves / knees / measured GEMM curve, launch floor, decode
occupancy floor) are named in ``PrefillTheta`` / ``DecodeTheta``; docs/latency_model.md says
why each exists and what it was measured on.

Modules: ``terms`` (named coefficients, hyper-parameters, features), ``model`` (the prediction
path and fit.json; no numpy), ``design`` (the rows' feature columns and whole-frame predictions),
``fit`` (NNLS, hyper-parameter search, held-out errors; numpy,
scipy), ``fa3_kernels`` / ``triton_kernels`` (the attention kernels' grids), ``gemm_curve`` (the
measured projection times), ``fused`` (a fused iteration's time, fitted on a table's fused rows). Importing this package does not import numpy: the fitting names
below are loaded on first use.
"""

import importlib

from .fa3_kernels import Fa3Grid
from .gemm_curve import GemmCurves, UnprofiledCurve
from .model import FORMAT, DecodeRows, SoloLatencyModel
from .terms import (BLOCK_TOKENS, DECODE_FEATURES, MIN_BATCH_TOKENS, PREFILL_FEATURES, DecodeHyper, DecodeTheta,
                    PrefillHyper, PrefillReq, PrefillTheta, UnprofiledPartition, cold_waves, decode_kernel,
                    gemm_excess, gemm_share, key_waves, l2_knee_tokens, min_batch_tokens, prefill_features)

# numpy/scipy only when fitting is asked for: these load on first use
_LAZY = {"fit_nonneg": "fit", "fit_prefill_frame": "fit", "fit_decode_frame": "fit", "heldout_errors": "fit",
         "fit_solo": "fit", "prefill_domain": "design", "predict_prefill_frame": "design",
         "predict_decode_frame": "design"}

__all__ = ["BLOCK_TOKENS", "DECODE_FEATURES", "FORMAT", "MIN_BATCH_TOKENS", "PREFILL_FEATURES", "DecodeHyper",
           "DecodeRows", "DecodeTheta", "Fa3Grid", "GemmCurves", "PrefillHyper", "PrefillReq", "PrefillTheta",
           "SoloLatencyModel", "UnprofiledCurve", "UnprofiledPartition", "cold_waves", "decode_kernel",
           "gemm_excess", "gemm_share", "key_waves", "l2_knee_tokens", "min_batch_tokens", "prefill_features",
           *sorted(_LAZY)]


def __getattr__(name: str):
    if name in _LAZY:
        module = importlib.import_module(f"{__name__}.{_LAZY[name]}")
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
