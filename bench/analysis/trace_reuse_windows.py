"""How much prefix reuse a benchmark window of the Mooncake synthetic trace can show, and what
warming the cache with its history would take. For windows of n requests at several offsets:
the share of its blocks that an earlier request of the window also had (what a cold cache can
hit); the share of its prompt tokens in a leading run of blocks some request BEFORE the window had
(what a cache warmed with the window's history could hit), the distinct prompts and tokens that
warm-up would prefill (longest shared prefixes, deduplicated), and the mean prompt. CPU, seconds:

    python bench/results/synthetic_h200_s23/reuse_windows.py > bench/results/synthetic_h200_s23/reuse_windows.md
"""
import json

from bench.workloads import BLOCK, TRACES, hash_block_reuse, shared_traces

# the whole trace, not the shipped 500-request slice: the history before a window is the point
rows = [json.loads(line) for line in open(shared_traces() / TRACES["mooncake-synthetic"][0])]
print(f"Mooncake synthetic trace, {len(rows)} requests; a 90 s point at 0.75-1.5 req/s sends 68-135.\n")
print("| offset | n | reuse within the window | history-reusable tokens | warm-up prompts | warm-up tokens | mean prompt |")
print("|---:|---:|---:|---:|---:|---:|---:|")
for off in (0, 500, 1000, 2000, 3000, 3500):
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
