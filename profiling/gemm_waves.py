"""GPU check: do the model's GEMMs on a partition run in ⌈device SMs / partition SMs⌉ waves?

    python -m profiling.gemm_waves --model-config launch/models/llama-3.1-8b/config.json \
        --out bench/results/gemm_waves_<gpu>.json

The solo-prefill table shows small prefills (n ≤ 2048 tokens) costing about ⌈132/S⌉ times
their full-GPU cost on an S-SM partition, as if the kernels sized their grid for the whole
GPU. This times one layer's four projections (qkv, o, gate_up, down; ``F.linear`` in bf16,
as SGLang's unquantized layers run them) at M tokens on every partition's prefill stream,
with cuBLAS left alone and with torch's SM carveout set so that cuBLAS targets the
partition's SM count (``torch._C._set_sm_carveout_experimental``: device SMs − S). Medians of
CUDA-event times over rotated inputs (the weights of 4 layers, so L2 does not hold them).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import statistics
import sys

from sglang_mux import cli_io as _cli_io
from profiling.gemm_curve import layer_shapes, prefill_streams, torch_layer_timer
from sglang_mux import cli

TOKENS = (128, 512, 1024, 2048, 4096, 8192)


def main(argv=None) -> int:
    ap = cli.ArgumentParser(prog="python -m profiling.gemm_waves", description=__doc__.splitlines()[0])
    ap.add_argument("--model-config", required=True, type=_cli_io.model_config_arg,
                    help="the model's Hugging Face config.json")
    ap.add_argument("--out", default=None, help="also write the rows here as JSON")
    ap.add_argument("--tokens", default=",".join(map(str, TOKENS)), type=_cli_io.numbers(int, example="128,512"),
                    help="comma list of batch token counts M")
    ap.add_argument("--repeats", type=cli.positive(int), default=15, help="timed layers per point")
    ap.add_argument("--carveout", action=argparse.BooleanOptionalAction, default=True,
                    help="also time each partition with cuBLAS targeting its SM count (--no-carveout: halves the run)")
    args = ap.parse_args(argv)
    cfg = _cli_io.model_config(args.model_config)
    _cli_io.need_gpu("profiling.gemm_waves")
    import torch

    from sglang_mux.green_ctx import GreenPartitionSet

    if not hasattr(torch._C, "_set_sm_carveout_experimental"):
        return cli.print_error(f"this torch ({torch.__version__}) has no _set_sm_carveout_experimental: "
                                  "run it with a torch that has it")
    shapes = layer_shapes(cfg)
    tokens = args.tokens
    parts = GreenPartitionSet(0, 16)
    total = parts.total_sms
    dev = torch.cuda.get_device_name(0)
    streams = prefill_streams(parts)
    time_layer = torch_layer_timer(cfg, streams, args.repeats)  # weights of 4 layers rotated: far above L2
    rows = []
    for m in tokens:
        for sms in sorted(streams):
            for carve in (None, total - sms) if sms < total and args.carveout else (None,):
                torch._C._set_sm_carveout_experimental(carve)
                try:
                    t = time_layer(sms, m)  # warm-up (heuristics, workspace), then the repeats
                finally:
                    torch._C._set_sm_carveout_experimental(None)
                rows.append({"tokens": m, "prefill_sms": sms, "cublas_sm_target": None if carve is None else sms,
                             "layer_gemms_ms": round(statistics.median(t), 4),
                             "spread": round((max(t) - min(t)) / statistics.median(t), 3)})
        torch.cuda.synchronize()
    full = {r["tokens"]: r["layer_gemms_ms"] for r in rows if r["prefill_sms"] == total}
    for r in rows:
        r["vs_full_gpu"] = round(r["layer_gemms_ms"] / full[r["tokens"]], 3)
        r["ceil_waves"] = math.ceil(total / r["prefill_sms"])
        r["ideal"] = round(total / r["prefill_sms"], 3)
    res = {"device": dev, "sm_count": total, "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
           "torch": torch.__version__, "model_config": args.model_config, "shapes": shapes,
           "command": "python -m profiling.gemm_waves " + " ".join(argv if argv is not None else sys.argv[1:]),
           "rows": rows}
    print(f"{'M':>6} {'SMs':>4} {'target':>6} {'ms':>8} {'x full':>7} {'D/S':>6} {'ceil':>4}")
    for r in rows:
        print(f"{r['tokens']:>6} {r['prefill_sms']:>4} {str(r['cublas_sm_target']):>6} {r['layer_gemms_ms']:>8.3f} "
              f"{r['vs_full_gpu']:>7.2f} {r['ideal']:>6.2f} {r['ceil_waves']:>4}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    cli.run(main)
