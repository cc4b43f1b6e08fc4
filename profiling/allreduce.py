"""All-reduce at tensor parallelism on green-context partitions (issue 44): what it costs on each
lane and partition, and whether its kernels stay on their lane's SMs.

    python -m profiling.allreduce --tp-size 2 --out bench/results/<dir>/allreduce.json \\
        [--model-config launch/models/tiny-llama/config.json] [--hidden 8192] [--tokens 1,16,256,4096]

One process per rank, on GPU r, each building the profiling harness at that rank: SGLang's own
distributed set-up (its TP group, pdmux's prefill TP group, the all-reduce implementation it
picks) and the server's green-context partitions. Every rank runs the same all-reduces in the same
order; the JSON holds every rank's numbers.

- ``time``: per partition, lane and token count, an all-reduce of a [tokens, hidden] bf16 tensor as
  the server issues it (decode: SGLang's TP group on the decode stream; prefill: the pdmux prefill
  group on the prefill stream, ``set_pdmux_status(True)``), CUDA events, ``--warmup`` first, the
  median of ``--repeats``. ``--hidden``: the model whose all-reduce is priced (8192 for 70B); the
  harness's own model only sets up SGLang.
- ``confinement``: per partition, a compute-bound matmul loop on the prefill lane's stream, timed
  alone, beside all-reduces on the decode lane (its own SMs), and beside the same all-reduces on
  an ordinary full-GPU stream. Kernels kept on the decode lane's SMs leave the matmul nearly as
  fast as alone; beside the full-GPU stream they take SMs from it. Per ``--confinement-tokens``
  (default a decode batch's 256 and a prefill chunk's 16,384), as many all-reduces as last twice
  the loop alone (the largest count of any rank). Session 39's run (1,024 tokens only, 2 x H200:
  bench/results/h200x2_s39_2026-11-27/allreduce/) could not tell: all-reduces that small slowed
  the matmul 1.035x (median) on the lane and 1.05x on the full GPU.
"""

from __future__ import annotations

import json
import math
import socket
import statistics
import sys
import time
from pathlib import Path
from typing import Sequence

from sglang_mux import cli
from sglang_mux import cli_io as _cli_io

TINY = "launch/models/tiny-llama/config.json"
TOKENS = (1, 8, 32, 128, 512, 1024, 2048, 4096, 8192)


def summarize(samples: Sequence[float]) -> dict:
    """Median, min and max (ms) of one cell's repeats."""
    return {"ms": round(statistics.median(samples), 4), "min_ms": round(min(samples), 4),
            "max_ms": round(max(samples), 4), "n": len(samples)}


def confinement(alone_ms: float, beside_lane_ms: float, beside_full_ms: float,
                lane_ar_ms: float, full_ar_ms: float) -> dict:
    """The matmul's slowdown beside the lane's all-reduces and beside a full-GPU stream's. Only
    where the all-reduces outlasted the matmul (``covered``) was it beside them throughout."""
    return {"alone_ms": round(alone_ms, 3),
            "slowdown_beside_lane": round(beside_lane_ms / alone_ms, 3),
            "slowdown_beside_full_gpu": round(beside_full_ms / alone_ms, 3),
            "covered": lane_ar_ms >= beside_lane_ms and full_ar_ms >= beside_full_ms}


def covering_count(matmul_ms: float, all_reduce_ms: float, cover: float = 2.0, least: int = 10) -> int:
    """All-reduces that last ``cover`` x the matmul loop alone (so that they sit beside it
    throughout, slowed or not), at least ``least``."""
    return max(least, math.ceil(cover * matmul_ms / max(all_reduce_ms, 1e-3)))


def _rank(rank: int, a, port: int, q) -> None:
    """One rank: the harness, then every timing in the same order as the other ranks."""
    try:
        q.put((rank, _measure(rank, a, port)))
    except BaseException as e:  # noqa: BLE001 - the parent reports it, naming the rank
        q.put((rank, {"error": f"{type(e).__name__}: {e}"}))
        raise


def _measure(rank: int, a, port: int) -> dict:
    import torch
    from sglang.srt.distributed import tensor_model_parallel_all_reduce
    from sglang.srt.distributed.parallel_state import set_pdmux_status

    from profiling.harness import Harness

    h = Harness(a.model_config, granularity=a.granularity, decode_bs=(1,), mem_fraction_static=0.5,
                tp_rank=rank, tp_size=a.tp_size, nccl_port=port, device_index=rank)
    dev = torch.device("cuda", rank)
    hidden = a.hidden or int(h.model_runner.model_config.hidden_size)

    def all_reduces(x, stream, prefill_lane: bool, n: int) -> tuple[torch.cuda.Event, torch.cuda.Event]:
        set_pdmux_status(prefill_lane)
        try:
            with torch.cuda.stream(stream):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record(stream)
                for _ in range(n):
                    tensor_model_parallel_all_reduce(x)
                e.record(stream)
        finally:
            set_pdmux_status(False)
        return s, e

    def _consensus_max(n: int) -> int:  # every rank must issue as many all-reduces: the largest count
        import torch.distributed as dist
        from sglang.srt.distributed import get_tp_group

        t = torch.tensor([n], dtype=torch.long)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=get_tp_group().cpu_group)
        return int(t.item())

    def time_ar(x, stream, prefill_lane: bool) -> list[float]:
        all_reduces(x, stream, prefill_lane, a.warmup)[1].synchronize()
        out = []
        for _ in range(a.repeats):
            s, e = all_reduces(x, stream, prefill_lane, 1)
            e.synchronize()
            out.append(s.elapsed_time(e))
        return out

    def matmuls(stream, m, n: int):
        with torch.cuda.stream(stream):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(stream)
            for _ in range(n):
                torch.mm(m, m)
            e.record(stream)
        return s, e

    res = {"rank": rank, "device": torch.cuda.get_device_name(dev), "hidden": hidden,
           "harness_startup_s": round(h.timings.get("startup_s", 0.0), 1), "time": [], "confinement": []}
    for cfg in h.cfgs:
        p_stream, d_stream = h.parts.streams(cfg)
        for lane, stream, sms in (("decode", d_stream, cfg.decode_sms), ("prefill", p_stream, cfg.prefill_sms)):
            if sms == 0:
                continue
            for tokens in a.tokens:
                x = torch.randn(tokens, hidden, dtype=torch.bfloat16, device=dev)
                res["time"].append({"decode_sms": cfg.decode_sms, "prefill_sms": cfg.prefill_sms, "lane": lane,
                                    "sms": sms, "tokens": tokens, **summarize(time_ar(x, stream, lane == "prefill"))})
    full = torch.cuda.Stream(dev)
    m = torch.randn(a.matmul_size, a.matmul_size, dtype=torch.bfloat16, device=dev)
    for tokens in a.confinement_tokens:
        x = torch.randn(tokens, hidden, dtype=torch.bfloat16, device=dev)
        for cfg in h.parts.configs:  # the multiplexed partitions
            p_stream, d_stream = h.parts.streams(cfg)
            matmuls(p_stream, m, a.matmuls)[1].synchronize()  # warm-up
            s, e = matmuls(p_stream, m, a.matmuls)
            e.synchronize()
            alone = s.elapsed_time(e)
            one = statistics.median(time_ar(x, d_stream, False))
            n = covering_count(alone, one)  # the same on every rank: the collective counts must match
            n = _consensus_max(n)
            beside = {}
            for name, stream in (("lane", d_stream), ("full", full)):  # the decode lane's TP group on both
                ar = all_reduces(x, stream, False, n)
                mm = matmuls(p_stream, m, a.matmuls)
                ar[1].synchronize()
                mm[1].synchronize()
                beside[name] = (mm[0].elapsed_time(mm[1]), ar[0].elapsed_time(ar[1]))
            res["confinement"].append({"decode_sms": cfg.decode_sms, "prefill_sms": cfg.prefill_sms,
                                       "tokens": tokens, "all_reduces": n,
                                       **confinement(alone, beside["lane"][0], beside["full"][0],
                                                     beside["lane"][1], beside["full"][1])})
    torch.cuda.synchronize(dev)
    return res


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(argv: Sequence[str] | None = None) -> int:
    pos_i = cli.positive(int)
    ap = cli.ArgumentParser(prog="python -m profiling.allreduce", description=__doc__.split("\n\n")[0])
    ap.add_argument("--tp-size", type=pos_i, required=True, help="ranks, one GPU each (GPUs 0..N-1)")
    ap.add_argument("--out", required=True, type=Path, help="the JSON to write")
    ap.add_argument("--model-config", default=TINY, type=_cli_io.model_config_arg,
                    help="the model the harness loads (dummy weights) to set SGLang up; its heads must divide by N")
    ap.add_argument("--hidden", type=pos_i, default=None, help="the all-reduced width (default: that model's hidden size)")
    ap.add_argument("--tokens", default=",".join(map(str, TOKENS)), type=_cli_io.numbers(int, example="1,128,4096"),
                    help="token counts, comma list")
    ap.add_argument("--granularity", type=pos_i, default=16, help="SMs per partition step, as the server's")
    ap.add_argument("--repeats", type=pos_i, default=10)
    ap.add_argument("--warmup", type=pos_i, default=3)
    ap.add_argument("--matmul-size", type=pos_i, default=2048, help="the confinement check's square bf16 matmul")
    ap.add_argument("--matmuls", type=pos_i, default=400, help="matmuls in its timed loop")
    ap.add_argument("--confinement-tokens", default="256,16384", type=_cli_io.numbers(int, example="256,16384"),
                    help="tokens of its all-reduces, comma list: a decode batch's (SGLang's custom all-reduce) and "
                         "a prefill chunk's (bandwidth-bound, NCCL past the custom one's size); as many as last "
                         "twice the matmul loop")
    ap.add_argument("--timeout-s", type=pos_i, default=540, help="give up (and say which rank) after this")
    a = ap.parse_args(argv)
    if a.tp_size < 2:
        ap.error("--tp-size must be at least 2: an all-reduce needs two ranks")
    _cli_io.need_gpu("profiling.allreduce")
    import multiprocessing as mp

    import torch

    if torch.cuda.device_count() < a.tp_size:
        raise cli.UsageError(f"--tp-size {a.tp_size} needs {a.tp_size} GPUs; this host has {torch.cuda.device_count()}")
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_rank, args=(r, a, port, q), name=f"allreduce_rank{r}") for r in range(a.tp_size)]
    for p in procs:
        p.start()
    t0, got = time.time(), {}
    while len(got) < a.tp_size and time.time() - t0 < a.timeout_s:
        try:
            r, res = q.get(timeout=5)
            got[r] = res
        except Exception:  # noqa: BLE001 - queue.Empty: check who died
            dead = [p.name for p in procs if p.exitcode not in (None, 0)]
            if dead:
                break
    for p in procs:
        p.join(timeout=30)
        if p.is_alive():
            p.kill()
    missing = [r for r in range(a.tp_size) if r not in got or "error" in got[r]]
    out = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "command": "python -m profiling.allreduce " + " ".join(sys.argv[1:] if argv is None else argv),
           "tp_size": a.tp_size, "ranks": [got.get(r) for r in range(a.tp_size)]}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    if missing:
        why = "; ".join(f"rank {r}: {(got.get(r) or {}).get('error', 'no result (died or timed out)')}" for r in missing)
        return cli.print_error(f"profiling.allreduce: {why} (partial results in {a.out})")
    for c in got[0]["confinement"]:
        print(f"D{c['decode_sms']}/P{c['prefill_sms']}, {c['all_reduces']} all-reduces of {c['tokens']} tokens: "
              f"matmul {c['alone_ms']} ms alone, x{c['slowdown_beside_lane']} "
              f"beside the lane's all-reduces, x{c['slowdown_beside_full_gpu']} beside a full-GPU stream's"
              + ("" if c["covered"] else " (all-reduces ended first)"))
    print(f"{len(got[0]['time'])} timings a rank -> {a.out}")
    return 0


if __name__ == "__main__":
    cli.run(main)
