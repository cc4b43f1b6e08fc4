"""Disjoint SM partitions from ONE split of the device's SM resource (cuda-python).

Why not `torch.cuda.green_contexts.GreenContext.create` twice: two separately created contexts
overlap on the same SMs (measured on an H200: a copy slowed 4.1x next to a GEMM). A single
`cuDevSmResourceSplitByCount` gives a group and its remainder, which are disjoint by
construction (the same copy slowed 1.10-1.17x).

For every configuration (decode d SMs, prefill total-d SMs) we split the full SM resource into
one group of d SMs (decode) and the remainder (prefill), make a green context for each and a
non-blocking stream in each, and wrap the streams as torch ExternalStreams.
`install_stream_groups` hands them to SGLang's pdmux context (server and profiler alike).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sglang_mux.partitions import PartitionConfig, full_modes, partition_configs

logger = logging.getLogger(__name__)


class GreenContextError(RuntimeError):
    """The GPU or driver cannot give the requested SM partitions."""


def _check(result, what: str):
    """cuda-python returns (CUresult, *values); raise with the driver's name for the error."""
    from cuda.bindings import driver

    err, *values = result if isinstance(result, tuple) else (result,)
    if err != driver.CUresult.CUDA_SUCCESS:
        _, name = driver.cuGetErrorName(err)
        raise GreenContextError(
            f"{what} failed with {name.decode() if isinstance(name, bytes) else name}. Green "
            "contexts need an NVIDIA GPU of compute capability >= 9.0 (H100/H200) and a "
            "driver >= 550 with CUDA >= 12.4; run with --disable-mux otherwise."
        )
    if not values:
        return None
    return values[0] if len(values) == 1 else values


@dataclass
class _Pair:
    config: PartitionConfig
    prefill_stream: object  # torch.cuda.ExternalStream
    decode_stream: object
    decode_sms: int  # SMs the driver really gave (read back from the split)
    prefill_sms: int


class GreenPartitionSet:
    """Green-context stream pairs for every multiplexed configuration plus the two full modes."""

    def __init__(self, device_index: int = 0, granularity: int = 16):
        import torch
        from cuda.bindings import driver

        if not torch.cuda.is_available():
            raise GreenContextError("no CUDA device: PD multiplexing needs a GPU (or --disable-mux)")
        torch.cuda.set_device(device_index)
        torch.cuda.init()  # make the primary context current before creating green contexts
        _check(driver.cuInit(0), "cuInit")
        self.device = _check(driver.cuDeviceGet(device_index), "cuDeviceGet")
        sm_res = _check(
            driver.cuDeviceGetDevResource(self.device, driver.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM),
            "cuDeviceGetDevResource(SM)",
        )
        self.total_sms = int(sm_res.sm.smCount)
        self.granularity = granularity
        self.configs: list[PartitionConfig] = partition_configs(self.total_sms, granularity)
        self._keep = []  # green contexts must outlive their streams
        self._pairs: dict[PartitionConfig, _Pair] = {}
        for cfg in self.configs:
            self._pairs[cfg] = self._make_pair(driver, torch, sm_res, cfg, device_index)
        # Full modes run on ordinary streams of the primary context (all SMs).
        self.full_prefill, self.full_decode = full_modes(self.total_sms)
        full_p = torch.cuda.Stream(device_index)
        full_d = torch.cuda.Stream(device_index)
        for cfg in (self.full_prefill, self.full_decode):
            self._pairs[cfg] = _Pair(cfg, full_p, full_d, cfg.decode_sms, cfg.prefill_sms)
        logger.info(
            "green-context partitions on %d SMs: %s",
            self.total_sms,
            ", ".join(f"D{p.decode_sms}/P{p.prefill_sms}" for p in self._pairs.values()),
        )

    def _make_pair(self, driver, torch, sm_res, cfg: PartitionConfig, device_index: int) -> _Pair:
        groups, n_groups, remaining = _check(
            driver.cuDevSmResourceSplitByCount(1, sm_res, 0, cfg.decode_sms),
            f"cuDevSmResourceSplitByCount(decode={cfg.decode_sms})",
        )
        got_d = int(groups[0].sm.smCount)
        got_p = int(remaining.sm.smCount)
        if n_groups != 1 or got_d != cfg.decode_sms or got_d + got_p != self.total_sms:
            raise GreenContextError(
                f"the driver split {self.total_sms} SMs into decode={got_d}, prefill={got_p} "
                f"instead of {cfg.decode_sms}/{cfg.prefill_sms}: granularity {self.granularity} "
                "cannot be honoured on this device; try --mux-sm-granularity 16"
            )
        streams = []
        for res, role in ((remaining, "prefill"), (groups[0], "decode")):
            desc = _check(driver.cuDevResourceGenerateDesc([res], 1), f"cuDevResourceGenerateDesc({role})")
            gctx = _check(
                driver.cuGreenCtxCreate(desc, self.device, driver.CUgreenCtxCreate_flags.CU_GREEN_CTX_DEFAULT_STREAM),
                f"cuGreenCtxCreate({role})",
            )
            stream = _check(
                driver.cuGreenCtxStreamCreate(gctx, driver.CUstream_flags.CU_STREAM_NON_BLOCKING, 0),
                f"cuGreenCtxStreamCreate({role})",
            )
            self._keep.append((gctx, stream))
            streams.append(torch.cuda.ExternalStream(int(stream), device=torch.device("cuda", device_index)))
        return _Pair(cfg, streams[0], streams[1], got_d, got_p)

    def streams(self, cfg: PartitionConfig):
        """(prefill_stream, decode_stream) of a configuration."""
        try:
            p = self._pairs[cfg]
        except KeyError:
            raise ValueError(f"{cfg} is not one of this device's partitions: {list(self._pairs)}") from None
        return p.prefill_stream, p.decode_stream

    def all_configs(self) -> list[PartitionConfig]:
        """Stream-group order used by SGLang's pdmux graph capture: prefill-only, multiplexed
        configs ascending in prefill SMs (SGLang's order: larger prefill first), decode-only."""
        return [self.full_prefill, *sorted(self.configs, key=lambda c: -c.prefill_sms), self.full_decode]


def install_stream_groups(parts: GreenPartitionSet, server_args) -> list[PartitionConfig]:
    """Write one stream group per partition configuration into SGLang's pdmux context, in
    `parts.all_configs()` order, so its decode graph runner captures one graph set per partition;
    sets ``server_args.sm_group_num`` (one decode attention backend per stream group).
    The server (scheduler_loop.MuxLoop.build) and the profiler (profiling/harness.py) both call
    this: profiled timings are only valid for the server if the stream groups are the same.
    Returns the configurations in stream-group order (index = SGLang's stream index)."""
    from sglang.srt.multiplex import pdmux_context

    cfgs = parts.all_configs()
    pdmux_context.STREAM_GROUPS = [parts.streams(c) for c in cfgs]
    pdmux_context.SM_COUNTS = [(c.prefill_sms, c.decode_sms) for c in cfgs]
    pdmux_context.set_current_stream_idx(0)
    server_args.sm_group_num = len(cfgs)  # one decode attention backend per stream group
    return cfgs
