"""Why issue 43's openthoughts cell cannot be served in a 30-minute lease (CPU, seconds):

    python bench/results/openthoughts_bound_2026-11-28/bound.py > bench/results/openthoughts_bound_2026-11-28/bound.txt

bench.workloads' openthoughts requests (2,000 of them, seed 0): a request holds its prompt plus
the tokens it has decoded in the KV pool for its output's length of token gaps, so by Little's law
a pool of P tokens sustains at most P / (gap x mean(n L + L^2 / 2)) requests a second (n prompt
tokens, L output tokens; prefill time left out: a bound). And a point runs until its longest
request has decoded: its output at the token gap, after the arrivals.
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from bench import workloads  # noqa: E402

wl = workloads.build("openthoughts", rate=1.0, duration_s=2000, seed=0, salt="bound")
n = np.array([r.prompt_len for r in wl.requests], float)
L = np.array([r.max_new_tokens for r in wl.requests], float)
print(f"{len(n)} requests: prompt mean {n.mean():.0f}, output mean {L.mean():.0f}, "
      f"P99 {np.percentile(L, 99):.0f}, max {L.max():.0f}, at the cap: {(L >= 32000).mean():.1%}")
per = float((n * L + L ** 2 / 2).mean())
print("\n| token gap (ms) | KV pool (tokens) | rate bound (req/s) | drain of a 32K-token output (s) |")
print("|---:|---:|---:|---:|")
for gap in (15, 20, 30):
    for pool in (358_800, 423_494):  # sim_hybrid_map's H100 pools: the mux at --mem-fraction-static 0.75, chunked at 0.85
        print(f"| {gap} | {pool:,} | {pool / (gap * 1e-3 * per):.2f} | {32000 * gap * 1e-3:.0f} |")
