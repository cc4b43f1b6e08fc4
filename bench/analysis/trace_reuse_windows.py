"""How much prefix reuse a benchmark window of the Mooncake synthetic trace can show (CPU).

    python -m bench.analysis.trace_reuse_windows [--trace FILE]      (from the repository root)

Input: the whole Mooncake synthetic trace (default: mooncake_synthetic.jsonl under
bench.workloads.shared_traces(), i.e. $SGLANG_MUX_TRACES or shared/traces beside the checkout; the
shipped 500-request slice is not enough: the history before a window is the point). A missing
trace ends with one ``error:`` line (exit 2).

Output: a markdown table on stdout. For windows of n requests (68 and 135: a 90 s point at 0.75
and 1.5 req/s) at offsets 0-3500: the share of the window's blocks an earlier request of the window
also had (what a cold cache can hit); the share of its prompt tokens in a leading run of blocks some
request BEFORE the window had (what a cache warmed with the window's history could hit); the
distinct prompts and tokens that warm-up would prefill (longest shared prefixes, deduplicated); the
mean prompt. As in bench/results/synthetic_h200_s23/reuse_windows.md. Seconds.
"""
from __future__ import annotations

import json
from pathlib import Path

from bench.workloads import BLOCK, TRACES, hash_block_reuse, shared_traces
from sglang_mux import cli

OFFSETS = (0, 500, 1000, 2000, 3000, 3500)


def reuse_windows(trace: Path) -> None:
    rows = [json.loads(line) for line in open(trace)]
    if len(rows) < OFFSETS[-1] + 135:
        raise cli.UsageError(f"{trace} has {len(rows)} requests; the windows need {OFFSETS[-1] + 135} (the whole "
                             "Mooncake synthetic trace has 3,993)")
    print(f"Mooncake synthetic trace, {len(rows)} requests; a 90 s point at 0.75-1.5 req/s sends 68-135.\n")
    print("| offset | n | reuse within the window | history-reusable tokens | warm-up prompts | warm-up tokens | mean prompt |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for off in OFFSETS:
        hist = {h for r in rows[:off] for h in r["hash_ids"]}
        for n in (68, 135):
            win = rows[off:off + n]
            prefixes, tokens, reusable = set(), 0, 0
            for r in win:
                ids = r["hash_ids"]
                k = next((i for i, h in enumerate(ids) if h not in hist), len(ids))
                if k:
                    prefixes.add(tuple(ids[:k]))
                tokens += r["input_length"]
                reusable += min(k * BLOCK, r["input_length"])
            longest = sorted(prefixes, key=len, reverse=True)
            keep = []
            for p in longest:
                if not any(q[:len(p)] == p for q in keep):
                    keep.append(p)
            warm = len({h for p in keep for h in p}) * BLOCK
            print(f"| {off} | {n} | {hash_block_reuse(win, full_blocks_only=False):.1%} | {reusable / tokens:.1%} | {len(keep)} | {warm:,} | {tokens // n:,} |")
    print("\nKV pools measured: mux 358,800 (H100, 0.75) and 731,261 (H200, 0.75); chunked 423,047 (H100) and 845,617 (H200).")


def main(argv=None) -> int:
    ap = cli.ArgumentParser(prog="python -m bench.analysis.trace_reuse_windows", description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", type=Path, default=None,
                    help="the whole Mooncake synthetic trace (default: mooncake_synthetic.jsonl under $SGLANG_MUX_TRACES "
                         "or shared/traces beside the checkout)")
    a = ap.parse_args(argv)
    trace = a.trace or shared_traces() / TRACES["mooncake-synthetic"][0]
    if not trace.is_file():
        raise cli.UsageError(f"no trace at {trace}: give --trace FILE or set SGLANG_MUX_TRACES to the folder "
                             "holding mooncake_synthetic.jsonl (the shipped slices are too short)")
    reuse_windows(trace)
    return 0


if __name__ == "__main__":
    cli.run(main)
