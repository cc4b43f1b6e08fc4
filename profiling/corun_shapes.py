"""Decode slowdown beside prefills of one shape or another, on one partition of this GPU.

The contention table's co-runs are one-request prefills (``profiling/grid.py``: n new tokens,
r reused), and the guard looks a batch up by its total new and reused tokens. Serving's
prefills are batches of several requests. This times the same decode batch beside each given
prefill, one request or several, with the profiler's own co-run (``Harness.corun_detailed``)
and layers per launch, so the two can be compared on one host:

    python -m profiling.corun_shapes --model-config launch/models/llama-3.1-8b/config.json \\
        --decode-sms 48 --decode 32x8192,64x8192 --prefill 8192+0 12800+1024 4x3200+256 --out OUT.json

A prefill is ``[K x]N+R``: K requests (default 1) of N new tokens on R reused ones each. Every
shape runs twice, the list forwards then backwards, so that a drift (the GPU warming) shows.
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from sglang_mux import cli_io as _cli_io
from sglang_mux import cli

_PREFILL = re.compile(r"^(?:(\d+)x)?(\d+)\+(\d+)$")
_DECODE = re.compile(r"^(\d+)x(\d+)$")


def parse_prefill(s: str) -> list[tuple[int, int]]:
    """'4x3200+256' -> four (3200, 256) requests; '8192+0' -> one."""
    m = _PREFILL.match(s.strip())
    if not m or int(m.group(2)) <= 0 or (m.group(1) is not None and int(m.group(1)) <= 0):
        raise argparse.ArgumentTypeError(f"prefill {s!r}: expected [K x]N+R with K, N > 0, e.g. 8192+0 or 4x3200+256")
    return [(int(m.group(2)), int(m.group(3)))] * int(m.group(1) or 1)


def parse_decode(s: str) -> list[tuple[int, int]]:
    """'32x8192,64x8192' -> [(bs, reused per request), ...]."""
    out = []
    for part in s.split(","):
        m = _DECODE.match(part.strip())
        if not m or int(m.group(1)) <= 0:
            raise argparse.ArgumentTypeError(f"decode {part!r}: expected BSxREUSED with BS > 0, e.g. 32x8192")
        out.append((int(m.group(1)), int(m.group(2))))
    return out


def label(reqs: list[tuple[int, int]]) -> str:
    n, r = reqs[0]
    return f"{len(reqs)}x{n}+{r}" if len(reqs) > 1 else f"{n}+{r}"


def main(argv=None) -> int:
    ap = cli.ArgumentParser(prog="python -m profiling.corun_shapes", description=__doc__.splitlines()[0])
    ap.add_argument("--model-config", required=True, type=_cli_io.model_config_arg,
                    help="the model's Hugging Face config.json")
    ap.add_argument("--decode-sms", type=cli.positive(int), default=48, help="SMs of the decode partition")
    ap.add_argument("--decode", type=parse_decode, default="32x8192",
                    help="decode batches, comma list of BSxREUSED (reused tokens per request)")
    ap.add_argument("--prefill", type=parse_prefill, nargs="+", required=True,
                    help="prefill shapes, each [K x]N+R, e.g. 8192+0 4x3200+256")
    ap.add_argument("--attention-backend", default=None, help="default: SGLang's choice (FA3 on H100/H200)")
    ap.add_argument("--granularity", type=cli.positive(int), default=16, help="SMs per partition step")
    ap.add_argument("--out", type=Path, help="write the rows here as JSON")
    a = ap.parse_args(argv)
    _cli_io.need_gpu("profiling.corun_shapes")

    from profiling import grid as G
    from profiling.harness import CellSkipped, Harness, HarnessError
    from sglang_mux.tables import ModelShape

    bss = sorted({bs for bs, _ in a.decode})
    try:
        h = Harness(a.model_config, granularity=a.granularity, attention_backend=a.attention_backend, decode_bs=bss)
    except HarnessError as e:
        return cli.print_error(str(e))
    facts = h.facts()
    model = ModelShape.from_config(a.model_config)
    gpu = G.GpuSpec(total_sms=h.total_sms, granularity=a.granularity, mem_gib=facts["gpu_memory_gib"])
    cfg = h.config(a.decode_sms, h.total_sms - a.decode_sms)
    rows = []
    for rnd, order in enumerate((a.prefill, a.prefill[::-1])):
        for reqs in order:
            lpl = G.layers_per_launch(model, gpu, cfg.prefill_sms, reqs, target_ms=4.0)  # as the profiler
            for bs, reused in a.decode:
                row = {"round": rnd, "prefill": label(reqs), "prefill_new": sum(n for n, _ in reqs),
                       "prefill_reused": sum(r for _, r in reqs), "decode_bs": bs, "decode_reused": reused,
                       "layers_per_launch": lpl}
                try:
                    res = h.corun_detailed(reqs, bs, reused, cfg, layers_per_launch=lpl)
                    row.update(solo_ms=round(res.decode_solo_ms, 4), corun_ms=round(res.decode_corun_ms, 4),
                               slowdown=round(res.decode_corun_ms / res.decode_solo_ms, 4))
                except CellSkipped as e:
                    row["skipped"] = str(e)
                rows.append(row)
                print(json.dumps(row), flush=True)
    if a.out:
        a.out.write_text(json.dumps({"device": facts["gpu_name"], "versions": facts["versions"],
                                     "attention_backend": facts["attention_backend"],
                                     "partition": cfg.label(), "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    cli.run(main)
