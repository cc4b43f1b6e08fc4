"""Start-up probe for the cold-start estimate: bf16 GEMM FLOP/s and copy bandwidth per partition.

Used only when no contention table matches the model and GPU: the roofline (roofline.py) then
runs on these per-partition rates instead of the built-in H200 numbers. Every stream of every
configuration is probed (prefill and decode sides, and the full GPU), a few milliseconds each.
"""

from __future__ import annotations

import logging
import statistics

logger = logging.getLogger(__name__)


def event_times(stream, fn, repeats: int) -> list[float]:
    """GPU milliseconds of `repeats` calls of fn() on `stream`, each between two CUDA events."""
    import torch

    pairs = []
    with torch.cuda.stream(stream):
        for _ in range(repeats):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(stream)
            fn()
            b.record(stream)
            pairs.append((a, b))
    stream.synchronize()
    return [a.elapsed_time(b) for a, b in pairs]


def probe_partitions(parts, gemm_n: int = 4096, copy_mib: int = 256, repeats: int = 5) -> dict[int, tuple[float, float]]:
    """{SM count: (FLOP/s, bytes/s)} for every stream of a GreenPartitionSet (medians)."""
    import torch

    a = torch.randn(gemm_n, gemm_n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(gemm_n, gemm_n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty_like(a)
    src = torch.randn(copy_mib * 2**20 // 4, device="cuda", dtype=torch.float32)
    dst = torch.empty_like(src)
    out: dict[int, tuple[float, float]] = {}
    for cfg in [*parts.configs, parts.full_decode]:
        p, d = parts.streams(cfg)
        for stream, sms in ((p, cfg.prefill_sms), (d, cfg.decode_sms)):
            if sms <= 0 or sms in out:
                continue
            event_times(stream, lambda: torch.mm(a, b, out=c), 1)  # warm-up (cuBLAS handle, clocks)
            gemm = statistics.median(event_times(stream, lambda: torch.mm(a, b, out=c), repeats))
            copy = statistics.median(event_times(stream, lambda: dst.copy_(src), repeats))
            out[sms] = (2 * gemm_n**3 / (gemm / 1e3), 2 * src.numel() * 4 / (copy / 1e3))
    del a, b, c, src, dst
    torch.cuda.empty_cache()
    return out


def safe_probe(parts):
    """The probe, or None (the roofline's built-in rates) with a warning if it fails: a probe
    problem must never stop the server from starting."""
    try:
        probe = probe_partitions(parts)
        logger.info("start-up probe (SMs: TFLOP/s, TB/s): %s",
                    ", ".join(f"{s}: {f / 1e12:.0f}, {bw / 1e12:.2f}" for s, (f, bw) in sorted(probe.items())))
        return probe
    except Exception as e:  # noqa: BLE001
        logger.warning("start-up probe failed (%s); the cold-start estimate uses built-in H200 rates", e)
        return None
