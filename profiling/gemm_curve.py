"""`python -m profiling.gemm_curve`: the prefill projections' time per partition and batch size.

    python -m profiling.gemm_curve --model-config launch/models/llama-3.1-8b/config.json \\
        --out contention_tables/llama-3.1-8b__nvidia-h100-80gb-hbm3__triton

cuBLAS picks its GEMM kernel by the batch's token count M, and some choices are far off
their neighbours: on every partition of the H100 and the H200 the four projections of a
448-token batch take 1.35-1.51x the time of a 512-token one, and on 20 SMs 320 tokens take 1.6x
384 (contention_tables/*/gemm_curve.csv; a whole 448-token prefill took 1.41x a 512-token one
on 84 SMs of the H100). No smooth function of M follows that, so the estimator's prefill model
takes the projections' time from this curve (latency_model, θ10) and fits the rest
(attention, element-wise work) around it.

Writes ``gemm_curve.csv`` (prefill_sms, tokens, gemm_ms, spread_pct) into the table directory:
``gemm_ms`` is the whole model's projections (qkv, o, gate_up, down of one layer, the median of
CUDA-event times on the partition's prefill stream, times the layer count). Resumable:
(prefill_sms, tokens) pairs already in the file are skipped. Each layer call rotates over the
weights of 4 layers so L2 (50 MiB) never holds them, as in a real forward. ``profiling.run``
measures the missing points on its harness's prefill streams before its cells (the H100
table's run with only the 560 curve points to do took 160 s, model start-up included).
"""

from __future__ import annotations

import csv
import time
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from sglang_mux import cli_io as _cli_io
from profiling.stats import median, spread_pct
from sglang_mux import cli

FILE = "gemm_curve.csv"
COLUMNS = ["prefill_sms", "tokens", "gemm_ms", "spread_pct"]
HOLD_MS = 20.0  # GPU held ahead of the timed repeats (torch_layer_timer)
# Every 32 tokens to 1024 (cuBLAS's choices change within tens of tokens there), every 128 to
# 4096, then coarser: from a few thousand tokens the curve is close to linear.
TOKENS = tuple(sorted(set(range(32, 1025, 32)) | set(range(1152, 4097, 128))
                      | {100, 200, 300, 500, 1000, 2000, 3000, 5120, 6144, 8192, 12288, 16384, 24576, 32768}))
WEIGHT_SETS = 4


def layer_shapes(cfg: Mapping) -> dict[str, tuple[int, int]]:
    """(in, out) features of one decoder layer's projections (Llama-style, fused qkv and gate_up
    as SGLang runs them)."""
    h, heads = int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
    kv = int(cfg.get("num_key_value_heads") or heads)
    hd = int(cfg.get("head_dim") or h // heads)
    inter = int(cfg["intermediate_size"])
    return {"qkv": (h, (heads + 2 * kv) * hd), "o": (heads * hd, h), "gate_up": (h, 2 * inter), "down": (inter, h)}


def prefill_streams(parts) -> dict[int, object]:
    """{prefill SMs: that partition's prefill stream} of a GreenPartitionSet."""
    return {c.prefill_sms: parts.streams(c)[0] for c in parts.all_configs() if c.prefill_sms > 0}


def done_pairs(path: Path) -> set[tuple[int, int]]:
    """(prefill_sms, tokens) already in ``path`` (a missing file: none)."""
    if not path.is_file():
        return set()
    with path.open() as f:
        return {(int(r["prefill_sms"]), int(r["tokens"])) for r in csv.DictReader(f)}


def todo(path: Path, sms_list: Iterable[int], tokens: Iterable[int]) -> list[tuple[int, int]]:
    """(prefill_sms, tokens) pairs of the curve not yet in ``path``, in measuring order."""
    done = done_pairs(path)
    sms_list = list(sms_list)
    return [(s, m) for m in tokens for s in sms_list if (s, m) not in done]


def measure(time_layer: Callable[[int, int], Sequence[float]], sms_list: Iterable[int], tokens: Iterable[int],
            layers: int, path: Path, progress: bool = True, deadline: float | None = None,
            clock: Callable[[], float] = time.monotonic) -> int:
    """Time every (partition, M) pair not yet in ``path`` and append its row; returns how many.

    ``time_layer(sms, m)`` gives one layer's projection times (ms) on that partition. Rows are
    appended and flushed one by one, so an interrupted run keeps what it measured; past
    ``deadline`` (``clock`` time) no further point is started."""
    from tqdm import tqdm

    pairs = todo(path, sms_list, tokens)
    new = not path.is_file() or path.stat().st_size == 0
    with path.open("a", newline="") as f:
        w = csv.writer(f)
        if new:
            w.writerow(COLUMNS)
        done = 0
        for s, m in tqdm(pairs, desc="gemm curve", unit="pt", disable=not progress):
            if deadline is not None and clock() > deadline:
                break
            xs = list(time_layer(s, m))
            w.writerow([s, m, round(median(xs) * layers, 5), round(spread_pct(xs), 2)])
            f.flush()
            done += 1
    return done


def torch_layer_timer(cfg: Mapping, streams: Mapping[int, object], repeats: int = 15, warmup: int = 3):
    """time_layer(sms, m) for ``measure``: F.linear in bf16 (SGLang's unquantized layers) on
    the partition's stream, a fresh input per M, weights rotated over WEIGHT_SETS layers."""
    import torch
    import torch.nn.functional as F

    from profiling.harness import SLEEP_CYCLES_PER_MS
    from sglang_mux.probe import event_times

    shapes = layer_shapes(cfg)
    weights = [{k: torch.randn(o, i, device="cuda", dtype=torch.bfloat16) * 0.02 for k, (i, o) in shapes.items()}
               for _ in range(WEIGHT_SETS)]
    state = {"m": 0, "xs": None, "i": 0}

    def layer():
        w = weights[state["i"] % WEIGHT_SETS]
        state["i"] += 1
        for k, x in state["xs"].items():
            F.linear(x, w[k])

    def time_layer(sms: int, m: int) -> list[float]:
        if state["m"] != m:
            state["xs"] = None
            torch.cuda.empty_cache()
            state["xs"] = {k: torch.randn(m, i, device="cuda", dtype=torch.bfloat16) for k, (i, _) in shapes.items()}
            state["m"] = m
        event_times(streams[sms], layer, warmup)  # cuBLAS heuristics and workspace
        # Hold the GPU while the host enqueues every repeat: small batches launch slower than
        # they run, and without the hold the events time the host's gaps (spreads up to 190 %,
        # single points 2-5x their neighbours on the H100's first FA3 table).
        with torch.cuda.stream(streams[sms]):
            torch.cuda._sleep(int(HOLD_MS * SLEEP_CYCLES_PER_MS))
        return event_times(streams[sms], layer, repeats)

    return time_layer


def main(argv: Sequence[str] | None = None) -> int:
    ap = cli.ArgumentParser(prog="python -m profiling.gemm_curve", description=__doc__.splitlines()[0])
    ap.add_argument("--model-config", required=True, type=_cli_io.model_config_arg, help="HF config.json of the model")
    ap.add_argument("--out", required=True, help="the table directory (gemm_curve.csv goes there)")
    ap.add_argument("--tokens", default=",".join(map(str, TOKENS)), type=_cli_io.numbers(int, example="128,512"),
                    help="comma list of batch token counts M")
    ap.add_argument("--granularity", type=cli.positive(int), default=16,
                    help="SMs per partition step (as profiling.run)")
    ap.add_argument("--repeats", type=cli.positive(int), default=15, help="timed layers per point")
    args = ap.parse_args(argv)
    tokens = args.tokens
    cfg = _cli_io.model_config(args.model_config)
    layers = int(cfg["num_hidden_layers"])
    _cli_io.need_gpu("profiling.gemm_curve")

    from sglang_mux.green_ctx import GreenPartitionSet

    parts = GreenPartitionSet(0, args.granularity)
    streams = prefill_streams(parts)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    n = measure(torch_layer_timer(cfg, streams, args.repeats), sorted(streams), tokens, layers, out / FILE)
    print(f"gemm curve: {n} points measured into {out / FILE} "
          f"({len(streams)} partitions x {len(tokens)} token counts)")
    return 0


if __name__ == "__main__":
    cli.run(main)
