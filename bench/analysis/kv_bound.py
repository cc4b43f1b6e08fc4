"""The KV pool's bound on a workload's goodput, and how long a point takes to drain (CPU, seconds).

    python -m bench.analysis.kv_bound [--workload openthoughts] [--n 2000] [--seed 0]
        [--gaps 15,20,30] [--pools 358800,423494]          (repository root)

A request holds its prompt and the tokens it has decoded in the KV pool for as many token gaps as
it has output tokens, so by Little's law a pool of P tokens sustains at most
P / (gap x mean(n L + L^2 / 2)) requests a second (n prompt tokens, L output tokens; prefill time
left out, so a bound for every system alike). And a point ends only when its longest request has
decoded: its output at the token gap after the last arrival. ``--pools``: the KV pools of
``bench.analysis.sim_hybrid_map``'s H100 8B servers (the mux at --mem-fraction-static 0.75,
chunked prefill at 0.85). Why the openthoughts cell does not fit a 30-minute lease:
bench/results/openthoughts_bound_2026-11-28/.
"""
from __future__ import annotations

import numpy as np

from sglang_mux import cli
from sglang_mux import cli_io

from bench import workloads


def lengths(name: str, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(prompt tokens, output tokens) of ``n`` requests of bench.workloads' ``name``."""
    wl = workloads.build(name, rate=1.0, duration_s=float(n), n=n, seed=seed, salt="bound")
    return (np.array([r.prompt_len for r in wl.requests], float),
            np.array([r.max_new_tokens for r in wl.requests], float))


def rate_bound(prompt: np.ndarray, output: np.ndarray, pool_tokens: float, gap_ms: float) -> float:
    """Requests a second that a pool of ``pool_tokens`` holds at ``gap_ms`` a token (Little's law)."""
    token_seconds = gap_ms * 1e-3 * float((prompt * output + output ** 2 / 2).mean())
    return pool_tokens / token_seconds


def render(prompt: np.ndarray, output: np.ndarray, gaps, pools) -> str:
    top = float(output.max())
    lines = [f"{len(prompt)} requests: prompt mean {prompt.mean():.0f}, output mean {output.mean():.0f}, "
             f"P99 {np.percentile(output, 99):.0f}, max {top:.0f}, at the max: {(output >= top).mean():.1%}", "",
             f"| token gap (ms) | KV pool (tokens) | rate bound (req/s) | drain of a {top / 1000:.0f}K-token output (s) |",
             "|---:|---:|---:|---:|"]
    for gap in gaps:
        for pool in pools:
            lines.append(f"| {gap:g} | {pool:,.0f} | {rate_bound(prompt, output, pool, gap):.2f} | {top * gap * 1e-3:.0f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = cli.ArgumentParser(prog="python -m bench.analysis.kv_bound", description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", default="openthoughts", choices=workloads.WORKLOADS, help="a bench.workloads generator or trace")
    ap.add_argument("--n", type=cli.positive(int), default=2000, help="requests drawn")
    ap.add_argument("--seed", type=cli.seed, default=0)
    ap.add_argument("--gaps", default="15,20,30", type=cli_io.numbers(example="15,20,30"), help="token gaps (ms), comma list")
    ap.add_argument("--pools", default="358800,423494", type=cli_io.numbers(example="358800"),
                    help="KV pools (tokens), comma list")
    a = ap.parse_args(argv)
    prompt, output = lengths(a.workload, a.n, a.seed)
    print(render(prompt, output, a.gaps, a.pools))
    return 0


if __name__ == "__main__":
    cli.run(main)
