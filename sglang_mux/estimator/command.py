"""``python -m sglang_mux.estimator fit|check|add-fused|predict``: fit, check and query a
contention table."""

from __future__ import annotations

import json
import sys
import time
from typing import Callable, Sequence

from sglang_mux import cli, cli_io
from sglang_mux.estimator.table_check import check_table, predict
from sglang_mux.estimator.table_fit import add_fused, fit_table
from sglang_mux.latency_model import UnprofiledPartition
from sglang_mux.tables import FIT, FUSED_ROWS, GUARD, TableError, resolve_table


def _progress(start: float) -> Callable[[str], None]:
    """``check``'s progress lines: to stderr (stdout stays the report), with the time so far."""
    def say(line: str) -> None:
        print(f"check: {line} ({time.monotonic() - start:.0f} s so far)", file=sys.stderr, flush=True)

    return say


def main(argv: Sequence[str] | None = None) -> int:
    """fit | check | predict. Returns 0, 1 (check: bounds missed) or 2 (a bad table or
    partition, said on one ``error:`` line on stderr); bad arguments exit with status 2."""
    table_help = ("a shipped table's name (e.g. llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3) or a "
                  "contention_tables/<model>__<gpu>__<backend>/ dir")
    nonneg = cli.positive(int, allow_zero=True)
    ap = cli.ArgumentParser(prog="python -m sglang_mux.estimator", description="Fit, check and query a contention table (the estimator's latency model and guard).")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("fit", help="(re)write fit.json and guard.json from the CSVs").add_argument("dir", help=table_help)
    sub.add_parser("check", help="held-out fit accuracy and guard bound; rc 0 ok, 1 bounds missed, 2 malformed"
                   ).add_argument("dir", help=table_help)
    p = sub.add_parser("add-fused", help=f"add bench.prefill_mixed --fused outputs to the table's {FUSED_ROWS} "
                       "and refit it")
    p.add_argument("dir", help=table_help)
    p.add_argument("files", nargs="+", help="bench.prefill_mixed --fused --out files (GPU, attention backend and "
                   "SM count of the table's)")
    p = sub.add_parser("predict", help="solo and worst-case estimates as JSON")
    p.add_argument("dir", help=table_help)
    p.add_argument("--prefill-new", type=nonneg, required=True, help="new tokens of the prefill (0 = none)")
    p.add_argument("--prefill-reused", type=nonneg, default=0, help="reused (cached) tokens of the prefill")
    p.add_argument("--decode-bs", type=nonneg, required=True, help="requests in the decode batch")
    p.add_argument("--decode-reused", type=nonneg, default=0,
                   help="reused (context) tokens per decode request, as in contention.csv")
    p.add_argument("--decode-max-reused", type=nonneg, default=None,
                   help="longest context in the decode batch (default: --decode-reused, a uniform batch)")
    p.add_argument("--decode-sms", type=cli.positive(int), required=True, help="SMs of the decode partition")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "fit":
            d = resolve_table(a.dir)
            fit, guard = fit_table(d)
            fz = f", fused model on {fit['fused']['rows']} rows" if "fused" in fit else ""
            print(f"wrote {d / FIT} ({len(fit['prefill'])} prefill, {len(fit['decode'])} decode "
                  f"partitions{fz}) and {d / GUARD} ({len(guard['cells'])} partitions)")
            return 0
        if a.cmd == "add-fused":
            d = resolve_table(a.dir)
            outputs = {f: cli_io.read_json(f, "bench.prefill_mixed --fused output") for f in a.files}
            for line in add_fused(d, outputs):
                print(line)
            print(f"check it: python -m sglang_mux.estimator check {d}")
            return 0
        if a.cmd == "check":
            return 0 if check_table(resolve_table(a.dir), progress=_progress(time.monotonic())) else 1
        # The CLI speaks per request (like the table and `dispatch plan`); predict() takes the sum.
        if a.decode_max_reused is not None and a.decode_max_reused < a.decode_reused:
            p.error("--decode-max-reused is the longest context: it cannot be below --decode-reused")
        mx = a.decode_reused if a.decode_max_reused is None else a.decode_max_reused
        print(json.dumps(predict(a.dir, a.prefill_new, a.prefill_reused, a.decode_bs,
                                 a.decode_reused * a.decode_bs, a.decode_sms, mx), indent=1))
        return 0
    except (TableError, UnprofiledPartition) as e:
        print("error: " + " ".join(str(e).split()), file=sys.stderr)
        return 2
