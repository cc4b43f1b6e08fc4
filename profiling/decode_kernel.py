"""`python -m profiling.decode_kernel`: SGLang's triton decode-attention kernel, measured.

    python -m profiling.decode_kernel --model-config launch/models/llama-3.1-8b/config.json \\
        --table contention_tables/llama-3.1-8b__nvidia-h200__triton --probe-out bench/results/decode_tail_h200.json

Two things the decode model (``latency_model.key_waves``) needs from the GPU:

- **Occupancy** (``occupancy``): how many blocks of the stage-1 kernel, as compiled for this
  model's head shape, one SM holds at once — the CUDA occupancy API on the compiled kernel
  (registers, shared memory, warps). This is k, the blocks per SM per wave. It is a property of
  the kernel, not of any timing, so it is written into the table's meta.json
  (``profiler.decode_blocks_per_sm``) and the fit uses it instead of choosing k from the rows,
  where one held-out fold could pick k = 12.
- **The split tail** (``tail_probe``, optional): the kernel alone (SGLang's split rule
  ``get_num_kv_splits_triton``, then ``decode_attention_fwd``) on every decode partition, for
  uniform batches at a context r and r - 1. SGLang attends to L = r + 1 keys and rounds a split's
  keys up to 32, so r = 8192 gives splits of 1056 keys with an 801-key last one, while r = 8191
  gives 1024 keys with no short split. Where the last splits are what spills past one wave (8
  requests on 80 SMs: 512 blocks, 480 slots) r - 1 is the slower one: 1.17x on the H200, 1.16x
  on the H100 (bench/results/decode_tail_*.json; the model says 1.28x for the attention alone).
  At r ≈ 2048 one call takes ~0.1 ms and the samples spread too much to tell.

Prints what it measured; ``--table`` merges the occupancy into meta.json, ``--probe-out`` writes
the probe's rows (device, date, command, medians of CUDA-event times).
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Mapping, Sequence

from sglang_mux import cli_io as _cli_io
from profiling.stats import median, spread_pct
from sglang_mux import cli
from sglang_mux.tables import ModelShape

MAX_KV_SPLITS = 8  # SGLang's --triton-attention-num-kv-splits default
KV_SETS = 4  # KV buffers rotated over, so L2 (50 MiB) does not keep one call's keys for the next
PROBE_BS = (8, 16)
PROBE_REUSED = (2048, 8192, 32768)  # each also at r - 1


class _Decode:
    """Inputs of one uniform decode batch, laid out as SGLang's triton backend lays them out."""

    def __init__(self, cfg: Mapping, bs: int, reused: int, sets: int = KV_SETS):
        import torch
        import triton
        from sglang.kernels.ops.attention.metadata import get_num_kv_splits_triton

        m = ModelShape.from_hf_config(cfg)
        heads, kv, hd = m.num_heads, m.num_kv_heads, m.head_dim
        n = reused + 1  # the step's own token is written to the cache before attending
        dev = torch.device("cuda")
        self.q = torch.randn(bs, heads, hd, device=dev, dtype=torch.bfloat16)
        self.o = torch.empty_like(self.q)
        self.kv = [(torch.randn(bs * n, kv, hd, device=dev, dtype=torch.bfloat16),
                    torch.randn(bs * n, kv, hd, device=dev, dtype=torch.bfloat16)) for _ in range(sets)]
        self.indptr = torch.arange(0, bs * n + 1, n, device=dev, dtype=torch.int32)
        self.indices = torch.arange(bs * n, device=dev, dtype=torch.int64)
        self.logits = torch.empty(bs, heads, MAX_KV_SPLITS, hd, device=dev, dtype=torch.float32)
        self.lse = torch.empty(bs, heads, MAX_KV_SPLITS, device=dev, dtype=torch.float32)
        self.splits = torch.empty(bs, device=dev, dtype=torch.int32)
        seq = torch.full((bs,), n, device=dev, dtype=torch.int32)
        sms = torch.cuda.get_device_properties(dev).multi_processor_count  # the whole GPU, as SGLang
        get_num_kv_splits_triton[(1,)](self.splits, seq, bs, 1, heads, kv, MAX_KV_SPLITS, sms,
                                       MAX_NUM_SEQ=max(256, triton.next_power_of_2(bs)))
        self.scale = hd ** -0.5
        self.i = 0

    def __call__(self) -> None:
        from sglang.kernels.ops.attention.decode_attention import decode_attention_fwd

        k, v = self.kv[self.i % len(self.kv)]
        self.i += 1
        decode_attention_fwd(self.q, k, v, self.o, self.indptr, self.indices, self.logits, self.lse, self.splits,
                             MAX_KV_SPLITS, self.scale, 1.0, 1.0, use_pdl=_use_pdl())


def _use_pdl() -> bool:
    """What SGLang's triton backend passes on CUDA (programmatic dependent launch from sm90)."""
    from sgl_kernel.utils import is_arch_support_pdl

    return bool(is_arch_support_pdl())


def occupancy(cfg: Mapping) -> dict:
    """The stage-1 kernel's resources and blocks per SM (CUDA occupancy API), compiled by one
    launch with this model's shapes."""
    import torch
    from cuda.bindings import driver
    from sglang.kernels.ops.attention import decode_attention as da

    fn = da._fwd_grouped_kernel_stage1
    seen = []
    run = fn.run

    def capture(*a, **kw):
        k = run(*a, **kw)
        seen.append(k)
        return k

    fn.run = capture
    try:
        _Decode(cfg, 1, 255, sets=1)()
        torch.cuda.synchronize()
    finally:
        del fn.run
    if not seen:
        raise RuntimeError("the grouped stage-1 kernel did not run: not a GQA model? (head groups must be > 1)")
    k = seen[-1]
    if getattr(k, "function", None) is None and hasattr(k, "_init_handles"):
        k._init_handles()
    warps = int(k.metadata.num_warps)
    shared = int(k.metadata.shared)
    err, blocks = driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(driver.CUfunction(int(k.function)),
                                                                     32 * warps, shared)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuOccupancyMaxActiveBlocksPerMultiprocessor failed: {err}")
    return {"kernel": "_fwd_grouped_kernel_stage1", "num_warps": warps, "shared_bytes": shared,
            "registers": int(getattr(k, "n_regs", -1)), "spills": int(getattr(k, "n_spills", -1)),
            "blocks_per_sm": int(blocks)}


def tail_probe(cfg: Mapping, streams: Mapping[int, object], bs_list: Sequence[int] = PROBE_BS,
               reused: Sequence[int] = PROBE_REUSED, calls: int = 8, repeats: int = 15, warmup: int = 3) -> list[dict]:
    """Per decode partition and uniform batch: the kernel's median µs per call (stage 1 + 2)."""
    import torch

    from sglang_mux.probe import event_times

    rows = []
    for bs in bs_list:
        for r in sorted({x for r in reused for x in (r - 1, r)}):
            d = _Decode(cfg, bs, r)
            splits = int(d.splits[0].item())

            def step(d=d):
                for _ in range(calls):
                    d()

            for sms, stream in sorted(streams.items()):
                event_times(stream, step, warmup)
                t = [x * 1e3 / calls for x in event_times(stream, step, repeats)]
                rows.append({"decode_sms": sms, "bs": bs, "reused": r, "seq_len": r + 1, "num_kv_splits": splits,
                             "us": round(median(t), 2), "spread_pct": round(spread_pct(t), 1)})
                print(f"decode {sms:4d} SMs bs={bs:3d} r={r:6d} splits={splits}: {rows[-1]['us']:9.2f} µs "
                      f"(spread {rows[-1]['spread_pct']}%)", flush=True)
            del d
            torch.cuda.empty_cache()
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    ap = cli.ArgumentParser(prog="python -m profiling.decode_kernel", description=__doc__.split("\n")[0])
    ap.add_argument("--model-config", required=True, type=_cli_io.model_config_arg,
                    help="the model's config.json (launch/models/*/config.json)")
    ap.add_argument("--table", type=_cli_io.table_arg,
                    help="a table directory (or a shipped table's name): merge the occupancy into its meta.json")
    ap.add_argument("--probe-out", help="also run the split-tail probe and write its rows to this JSON file")
    args = ap.parse_args(argv)
    if args.table:
        _cli_io.read_json(Path(args.table) / "meta.json", "table meta.json",
                          "give a table directory that profiling.run wrote")
    _cli_io.need_gpu("profiling.decode_kernel")
    import torch

    from sglang_mux.green_ctx import GreenPartitionSet

    cfg = json.loads(Path(args.model_config).read_text())
    occ = occupancy(cfg)
    print(f"decode stage-1 kernel: {occ}")
    gpu = torch.cuda.get_device_name()
    cmd = "python -m profiling.decode_kernel " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.table:
        path = Path(args.table) / "meta.json"
        meta = json.loads(path.read_text())
        if meta.get("gpu_name") != gpu:
            raise cli.UsageError(f"{path} is a table of {meta.get('gpu_name')!r}, this GPU is {gpu!r}: "
                             "measure the occupancy on the table's GPU")
        meta.setdefault("profiler", {})["decode_blocks_per_sm"] = occ["blocks_per_sm"]
        meta["profiler"]["decode_kernel"] = {**occ, "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                                             "command": cmd}
        path.write_text(json.dumps(meta, indent=1) + "\n")
        print(f"wrote profiler.decode_blocks_per_sm = {occ['blocks_per_sm']} into {path}")
    if args.probe_out:
        parts = GreenPartitionSet(granularity=16)
        streams = {c.decode_sms: parts.streams(c)[1] for c in parts.all_configs() if c.decode_sms > 0}
        rows = tail_probe(cfg, streams)
        out = {"device": gpu, "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "command": cmd,
               "model_config": args.model_config, "occupancy": occ, "calls_per_sample": 8, "repeats": 15,
               "rows": rows}
        Path(args.probe_out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.probe_out).write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {len(rows)} rows to {args.probe_out}")
    return 0


if __name__ == "__main__":
    cli.run(main)
