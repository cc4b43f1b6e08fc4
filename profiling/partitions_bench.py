"""GPU check of the green-context partitions: disjoint SM sets, contention, switch cost.

    python -m profiling.partitions_bench --out bench/results/partitions.json

For every configuration:
  * which SMs each stream's blocks land on (%smid read by a Triton kernel): the two sets must be
    disjoint and of the configured sizes;
  * a memory-bound kernel (a 1 GiB copy) on the decode stream, alone and next to a GEMM loop on
    the prefill stream: slowdown = median co-run / median solo (must be <= 1.3x);
  * the host time of a partition switch as the engine does it (record an event on each old stream,
    make the new streams wait on them, flip the current index).
"""

from __future__ import annotations

import datetime as dt
import json
import statistics
import sys
import time

from sglang_mux import cli_io as _cli_io
from sglang_mux import cli
from sglang_mux.probe import event_times


def _smid_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def smid(out_ptr, spin: tl.constexpr):
        pid = tl.program_id(0)
        x = tl.full([1], 0, tl.int32) + pid
        sm = tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [x], dtype=tl.int32, is_pure=False, pack=1)
        # Spin a little so blocks stay resident and the scheduler spreads them over every SM.
        acc = x
        for i in range(spin):
            acc = (acc * 1103515245 + 12345) % 2147483647
        tl.store(out_ptr + pid + tl.arange(0, 1), sm + (acc & 0))

    return smid


def sm_set(stream, n_blocks=4096) -> set[int]:
    import torch

    k = _smid_kernel()
    out = torch.full((n_blocks,), -1, dtype=torch.int32, device="cuda")
    with torch.cuda.stream(stream):
        k[(n_blocks,)](out, spin=2000)
    stream.synchronize()
    vals = out.cpu().tolist()
    if min(vals) < 0:
        raise RuntimeError("smid kernel left unwritten outputs")
    return set(vals)


def time_copies(stream, src, dst, n=20) -> list[float]:
    return event_times(stream, lambda: dst.copy_(src), n)


def main(argv=None) -> int:
    ap = cli.ArgumentParser(prog="python -m profiling.partitions_bench", description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="also write the results here as JSON")
    ap.add_argument("--granularity", type=cli.positive(int), default=16, help="SMs per partition step")
    args = ap.parse_args(argv)
    _cli_io.need_gpu("profiling.partitions_bench")
    import torch

    from sglang_mux.green_ctx import GreenPartitionSet

    parts = GreenPartitionSet(0, args.granularity)
    dev = torch.cuda.get_device_name(0)
    src = torch.randn(256 * 1024 * 1024, device="cuda", dtype=torch.float32)  # 1 GiB
    dst = torch.empty_like(src)
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(8192, 8192, device="cuda", dtype=torch.bfloat16)
    rows = []
    for cfg in parts.configs:
        p, d = parts.streams(cfg)
        sp, sd = sm_set(p), sm_set(d)
        time_copies(d, src, dst, 3)  # warm-up
        solo = statistics.median(time_copies(d, src, dst))
        with torch.cuda.stream(p):  # GEMMs queued long enough to cover the copies
            for _ in range(60):
                torch.mm(a, b, out=c)
        corun = statistics.median(time_copies(d, src, dst))
        p.synchronize()
        # GEMM throughput alone on the prefill partition (for the roofline probe)
        ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(p):
            ev0.record(p)
            for _ in range(10):
                torch.mm(a, b, out=c)
            ev1.record(p)
        p.synchronize()
        gemm_tflops = 10 * 2 * 8192**3 / (ev0.elapsed_time(ev1) / 1e3) / 1e12
        rows.append({
            "decode_sms": cfg.decode_sms, "prefill_sms": cfg.prefill_sms,
            "decode_sm_set_size": len(sd), "prefill_sm_set_size": len(sp),
            "disjoint": not (sp & sd),
            "copy_solo_ms": round(solo, 4), "copy_corun_ms": round(corun, 4),
            "slowdown": round(corun / solo, 4),
            "decode_copy_tb_s": round(2 * src.numel() * 4 / (solo / 1e3) / 1e12, 3),
            "prefill_gemm_tflops": round(gemm_tflops, 1),
        })
        print(json.dumps(rows[-1]), flush=True)

    # Switch cost: what scheduler_loop._switch does on the host, alternating configurations.
    groups = [parts.streams(c) for c in parts.all_configs()]
    costs = []
    cur = 0
    for i in range(2000):
        nxt = (cur + 1 + i % 3) % len(groups)
        t0 = time.perf_counter()
        for old, new in zip(groups[cur], groups[nxt]):
            ev = torch.cuda.Event()
            ev.record(old)
            new.wait_event(ev)
        ev = torch.cuda.Event()
        ev.record(groups[cur][1])
        groups[nxt][0].wait_event(ev)
        cur = nxt
        costs.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    result = {
        "device": dev,
        "sm_count": parts.total_sms,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": "python -m profiling.partitions_bench " + " ".join(argv or sys.argv[1:]),
        "partitions": rows,
        "max_slowdown": max(r["slowdown"] for r in rows),
        "all_disjoint": all(r["disjoint"] for r in rows),
        "switch_host_us_median": round(statistics.median(costs[100:]), 2),
        "switch_host_us_p99": round(sorted(costs[100:])[int(0.99 * len(costs[100:]))], 2),
    }
    print(json.dumps({k: v for k, v in result.items() if k != "partitions"}))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    cli.run(main)
