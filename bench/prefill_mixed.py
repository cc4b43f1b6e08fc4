"""GPU check: the prefill estimate on mixed batches, which no table row is.

    python -m bench.prefill_mixed --model-config launch/models/llama-3.1-8b/config.json \\
        --table contention_tables/llama-3.1-8b__nvidia-h200__triton --out bench/results/prefill_mixed_h200.json
    python -m bench.prefill_mixed --rescore bench/results/prefill_mixed_h200.json   # CPU: today's estimator

The profiler measures uniform batches (bs requests of n new and r cached tokens each) at chosen
token counts; the server prefills batches of requests with different n and r, at any token
count. This times seeded random conversation-like batches (2-8 requests, 30-3000 new tokens
each, half of them over a cached prefix of up to 12000 tokens) on several prefill partitions
with the profiler's harness (GPU time, host held ahead) and compares them with the table's
solo estimate (no online correction), and with the same estimate without padded query blocks
(``padded_query_blocks = 0``: each request charged only its own query blocks). ``--rescore``
recomputes both estimates of a result file's measured rows with the table as it is now.

``--fused`` times fused iterations instead, as SGLang's ``--enable-mixed-chunk`` runs them: one
extend batch on the whole GPU of a prompt chunk (256-4096 tokens in 1-3 pieces, the first often
over the earlier chunks of its request) and 1-128 decode rows (one new token each on a context of
200-8000 tokens); the estimate is ``Estimator.fused_ms``'s price (the solo prefill fit on the
whole GPU), which no table row was fitted on. ``python -m sglang_mux.estimator add-fused TABLE
FILE`` puts its rows into the table, whose fit then prices fused iterations with them.
``--fused-grid`` and ``--fused-sizes`` time fixed grids instead (`fused_grid`, `fused_size_grid`).
"""

from __future__ import annotations

import datetime as dt
import json
import random
import statistics
import sys

from sglang_mux import cli

from sglang_mux import cli_io as _cli_io


def batches(seed: int, count: int) -> list[list[tuple[int, int]]]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        out.append([(rng.randint(30, 3000), rng.choice([0, rng.randint(500, 12000)]))
                    for _ in range(rng.randint(2, 8))])
    return out


CHUNKS = (256, 512, 1024, 2048, 4096)
DECODE_ROWS = (1, 4, 16, 32, 64, 128)


def fused_batches(seed: int, count: int) -> list[list[tuple[int, int]]]:
    """Seeded fused iterations [(new, reused), ...]: the chunk's pieces, then the decode rows (1, c)."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        total, k = rng.choice(CHUNKS), rng.randint(1, 3)
        cuts = sorted(rng.sample(range(1, total), k - 1)) if k > 1 else []
        sizes = [b - a for a, b in zip([0, *cuts], [*cuts, total])]
        pieces = [(n, rng.choice([0, rng.randint(500, 8000)]) if i == 0 else 0) for i, n in enumerate(sizes)]
        rows = rng.choice(DECODE_ROWS)
        ctx_max = max(200, min(8000, 200_000 // rows))
        out.append(pieces + [(1, rng.randint(200, ctx_max)) for _ in range(rows)])
    return out


def fused_grid() -> list[list[tuple[int, int]]]:
    """A grid of fused iterations: a chunk of c new tokens (one request, no prefix) beside B decode
    rows of ctx tokens each, c in CHUNKS, B in GRID_ROWS, ctx in GRID_CONTEXTS, B x ctx <= 256K."""
    return [[(c, 0)] + [(1, ctx)] * rows for c in CHUNKS for rows in GRID_ROWS for ctx in GRID_CONTEXTS
            if rows * ctx <= 256_000]


GRID_ROWS = (1, 8, 32, 64, 128)
GRID_CONTEXTS = (1000, 4000)


def fused_size_grid() -> list[list[tuple[int, int]]]:
    """Fused iterations filling each size SGLang's prefill graph captures from 256 to 1,024 tokens,
    as the hybrid fills them (``dispatch.HybridPolicy.sizes``): a chunk of size - B new tokens over
    a prefix of p beside B decode rows of 4,000 context, B in SIZE_ROWS, p in SIZE_PREFIXES. The
    grids above have no batch between 385 and 512 or 641 and 1,024 tokens, where cuBLAS has slow
    counts (448, 832) that the token bands cannot see (bench/results/cap30_lone_h100_s46_2026-11-28/)."""
    from sglang_mux.fused_price import sglang_graph_tokens

    sizes = [s for s in sglang_graph_tokens(1024) if s >= 256]
    return [[(s - rows, p)] + [(1, 4000)] * rows for s in sizes for rows in SIZE_ROWS for p in SIZE_PREFIXES]


SIZE_ROWS = (8, 32)
SIZE_PREFIXES = (0, 4000)


def summary(errs: list[float]) -> dict:
    a = sorted(abs(e) for e in errs)
    return {"rows": len(a), "median_abs": round(statistics.median(a), 4),
            "p90_abs": round(a[int(0.9 * (len(a) - 1))], 4),
            "max_abs": round(a[-1], 4), "within_10pct": round(sum(e <= 0.10 for e in a) / len(a), 3),
            "mean_signed": round(statistics.fmean(errs), 4)}


def score(rows: list[dict], table: str) -> dict:
    """Both estimates of every measured row, and their relative-error summaries."""
    from sglang_mux.estimator import Estimator
    from sglang_mux.latency_model import PrefillReq, SoloLatencyModel

    solo = Estimator.from_table(table).solo
    d = solo.to_dict()
    unpadded = SoloLatencyModel.from_dict({**d, "prefill_hyper": {**d["prefill_hyper"], "padded_query_blocks": 0}})
    for r in rows:
        q = [PrefillReq(n, x) for n, x in r["reqs"]]
        r["estimate_ms"] = round(solo.prefill_ms(r["prefill_sms"], q), 4)
        r["estimate_unpadded_ms"] = round(unpadded.prefill_ms(r["prefill_sms"], q), 4)
    return {"estimate": summary([r["estimate_ms"] / r["measured_ms"] - 1 for r in rows]),
            "estimate_unpadded": summary([r["estimate_unpadded_ms"] / r["measured_ms"] - 1 for r in rows])}


def main(argv=None) -> int:
    ap = cli.ArgumentParser(prog="python -m bench.prefill_mixed", description=__doc__.splitlines()[0])
    ap.add_argument("--rescore", metavar="FILE", help="recompute the estimates of FILE's rows (no GPU)")
    ap.add_argument("--model-config", help="the model's Hugging Face config.json")
    ap.add_argument("--table", help="a table directory or a shipped table's name")
    ap.add_argument("--out", help="write the measured rows here (JSON)")
    ap.add_argument("--partitions", default="20,52,84,116", help="prefill partitions (SMs), comma list")
    ap.add_argument("--batches", type=cli.positive(int), default=30, help="random batches per partition")
    ap.add_argument("--seed", type=cli.seed, default=0, help="a whole number >= 0")
    ap.add_argument("--attention-backend", default="triton", help="SGLang attention backend")
    ap.add_argument("--fused-grid", action="store_true",
                    help="with --fused: the grid of fused_grid() (chunk x decode rows x context) instead of "
                         "--batches random ones")
    ap.add_argument("--fused-sizes", action="store_true",
                    help="with --fused: fused_size_grid(), a batch filling each prefill-graph size from 256 to "
                         "1,024 tokens, instead of --batches random ones")
    ap.add_argument("--fused", action="store_true",
                    help="time fused iterations (a prompt chunk and decode rows in one extend batch) on the "
                         "whole GPU instead of mixed prefill batches on --partitions")
    args = ap.parse_args(argv)
    if (args.fused_grid or args.fused_sizes) and not args.fused:
        ap.error("--fused-grid and --fused-sizes are kinds of --fused run: add --fused")
    if args.fused_grid and args.fused_sizes:
        ap.error("give --fused-grid or --fused-sizes, not both (one run each)")
    if args.rescore:
        res = _cli_io.read_json(args.rescore, "bench.prefill_mixed result",
                                "give a file that bench.prefill_mixed --out wrote")
        if not isinstance(res, dict) or not isinstance(res.get("rows"), list) or not res["rows"]:
            raise cli.UsageError(f"{args.rescore} has no measured rows: give a file that bench.prefill_mixed --out wrote")
        if not (args.table or res.get("table")):
            ap.error(f"{args.rescore} names no table: give --table")
        res.update(score(res["rows"], str(_cli_io.table_dir(args.table or res["table"]))))
        res["rescored"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        print(json.dumps({k: res[k] for k in ("device", "estimate", "estimate_unpadded")}, indent=1))
        with open(args.rescore, "w") as f:
            json.dump(res, f, indent=1)
        return 0
    if not (args.model_config and args.table and args.out):
        ap.error("--model-config, --table and --out are needed to measure (or --rescore FILE)")
    _cli_io.model_config(args.model_config)
    args.table = str(_cli_io.table_dir(args.table))
    partitions = _cli_io.number_list(args.partitions, "--partitions", int, example="20,52,84,116")
    make = ((lambda seed, count: fused_grid()) if args.fused_grid else (lambda seed, count: fused_size_grid())
            if args.fused_sizes else fused_batches if args.fused else batches)
    _cli_io.need_gpu("bench.prefill_mixed")

    from profiling.harness import CellSkipped, Harness

    h = Harness(args.model_config, attention_backend=args.attention_backend)
    rows = []
    for sms in ([h.total_sms] if args.fused else partitions):
        cfg = h.config(h.total_sms - sms if sms < h.total_sms else 0, sms)
        for reqs in make(args.seed, args.batches):
            try:
                xs = h.prefill_samples(reqs, cfg, repeats=3)
            except CellSkipped as e:  # the KV pool or the host hold: a skipped row, said, not a crash
                print(f"{sms:4d} SMs {len(reqs)} reqs: skipped ({e})")
                continue
            ms = statistics.median(xs)
            rows.append({"prefill_sms": sms, "reqs": reqs, "measured_ms": round(ms, 4)})
            print(f"{sms:4d} SMs {len(reqs)} reqs {sum(n for n, _ in reqs):6d} new: measured {ms:8.2f} ms")
    res = {"device": h.facts()["gpu_name"], "kind": "fused" if args.fused else "mixed prefill",
           "attention_backend": args.attention_backend,
           "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
           "command": "python -m bench.prefill_mixed " + " ".join(argv if argv is not None else sys.argv[1:]),
           "table": args.table, **score(rows, args.table), "rows": rows}
    print(json.dumps({k: res[k] for k in ("device", "estimate", "estimate_unpadded")}, indent=1))
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    cli.run(main)
