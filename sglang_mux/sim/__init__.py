"""Discrete-event simulator: a trace replayed with the estimator playing the GPU, under the
server's own policies (`replay`, `runs`), calibrated by served timelines (`calibration`), judged
as a served point is (`summary`); ``python -m sglang_mux.sim`` (`command`, `report`).
``sglang_mux.sim_chunked`` replays SGLang's chunked prefill on the same requests and metrics.
docs/sim.md gives each modelling choice and its reasons.
"""

from sglang_mux.sim.calibration import (Calibration, FusedJitter, cell_prefill_solo_ms, decode_jitter, fused_jitter,
                                        fused_jitter_by_size, served_host_ms, table_prefill_slowdown)
from sglang_mux.sim.command import add_trace_args, estimator_from_args, main, print_results, slo_from_args, trace_from_args
from sglang_mux.sim.replay import simulate
from sglang_mux.sim.runs import policy_names, run_policies
from sglang_mux.sim.summary import SimResult, drift_tests, weighted_percentile
from sglang_mux.traces import BLOCK, BUNDLED, TraceError, TraceReq, load_trace, trace_path

__all__ = ["BLOCK", "BUNDLED", "Calibration", "FusedJitter", "SimResult", "TraceError", "TraceReq", "add_trace_args",
           "cell_prefill_solo_ms", "decode_jitter", "drift_tests", "estimator_from_args", "fused_jitter",
           "fused_jitter_by_size", "load_trace", "main", "policy_names", "print_results", "run_policies",
           "served_host_ms", "simulate", "slo_from_args", "table_prefill_slowdown", "trace_from_args", "trace_path",
           "weighted_percentile"]
