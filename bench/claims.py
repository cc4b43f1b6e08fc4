"""One goodput claim over several runs: ``python -m bench.claims RUN [RUN ...]``.

    python -m bench.claims RUN_DIR [RUN_DIR ...] [--factor 2] [--json OUT.json]

Issue 17 asks for every claim on two Poisson seeds and on each GPU type, each comparison from a
single run on one host. A run gives the claim "mux ≥ factor x best chunked prefill" an
interval verdict (``bench.report.goodput_comparison``). Across runs the claim holds only if it
holds in every run, fails if it fails in any, and is open otherwise. Listed per run: seed, GPU
(and its UUID when the run recorded it), the best chunked system, both goodput intervals, the
ratio's interval, and whether all eight chunked baselines (256-2048, with and without mixed
chunks) ran. Runs of different workloads or attention backends are refused: they are not the
same claim.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from sglang_mux import cli
from sglang_mux.cli import UsageError

from . import report, systems
from sglang_mux import cli_io as _cli_io

_NOT_THE_CLAIM = ("seed", "source")  # what may differ between runs of one claim
_DEFAULTS = {"session_sample": 1}  # a key a later bench.run writes, at the value that meant it before


def load(run: str | Path) -> dict:
    """A run's summary.json (the directory or the file); UsageError when it is missing or malformed."""
    return _cli_io.run_summary(run)[1]


def ratio_interval(mux: tuple[float, float], base: tuple[float, float]) -> tuple[float, float]:
    """mux / baseline from their goodput intervals [lo, hi): [m_lo / b_hi, m_hi / b_lo)."""
    (m_lo, m_hi), (b_lo, b_hi) = mux, base
    lo = m_lo / b_hi if b_hi not in (0, math.inf) else 0.0
    hi = m_hi / b_lo if b_lo > 0 else math.inf
    return lo, hi


def run_row(s: dict, factor: float, name: str = "") -> dict:
    comp = [r for r in report.goodput_comparison(s, factor) if "chunked" in r["claim"]]
    if not comp:
        raise UsageError(f"{name}: needs a mux and at least one sglang-chunked-* system")
    c = comp[0]
    ran = [n for n in systems.CHUNKED if (s["systems"].get(n) or {}).get("points")]
    return {"run": name, "seed": (s.get("workload") or {}).get("seed"), "device": s.get("device"),
            "gpu_uuids": (s.get("hardware") or {}).get("gpu_uuids"),
            "attention_backend": s.get("attention_backend"), "baseline": c["baseline"],
            "mux": c["mux"], "baseline_interval": c["baseline_interval"],
            "ratio": list(ratio_interval(tuple(c["mux"]), tuple(c["baseline_interval"]))),
            "verdict": c["verdict"], "chunked_ran": ran, "all_chunked": len(ran) == len(systems.CHUNKED)}


def claim(summaries: dict[str, dict], factor: float = 2.0) -> dict:
    """The claim over runs {name: summary}; UsageError when they are not one claim."""
    if not summaries:
        raise UsageError("give at least one run")
    keys = {n: json.dumps({k: v for k, v in (s.get("workload") or {}).items()
                           if k not in _NOT_THE_CLAIM and _DEFAULTS.get(k, object()) != v}, sort_keys=True)
            for n, s in summaries.items()}
    if len(set(keys.values())) > 1:
        raise UsageError("these runs measured different workloads, so they are not one claim: "
                         + "; ".join(f"{n}: {k}" for n, k in keys.items()))
    backends = {n: json.dumps(s.get("attention_backend")) for n, s in summaries.items()}
    if len(set(backends.values())) > 1:
        raise UsageError("these runs used different attention backends: "
                         + ", ".join(f"{n} {b}" for n, b in backends.items()))
    rows = [run_row(s, factor, n) for n, s in summaries.items()]
    verdicts = {r["verdict"] for r in rows}
    verdict = "fails" if "fails" in verdicts else "holds" if verdicts == {"holds"} else "open"
    seeds: dict[str, list] = {}
    for r in rows:
        s = seeds.setdefault(r["device"] or "unknown", [])
        if r["seed"] not in s:
            s.append(r["seed"])
    return {"claim": f"mux ≥ {factor:g}x best chunked prefill", "verdict": verdict, "runs": rows,
            "seeds_by_device": {d: sorted(v, key=str) for d, v in seeds.items()},
            "two_seeds_each": all(len(v) >= 2 for v in seeds.values()),
            "all_chunked_everywhere": all(r["all_chunked"] for r in rows),
            "ratio": [min(r["ratio"][0] for r in rows), max(r["ratio"][1] for r in rows)]}


def _finite(x):
    """Strict JSON: an unbounded interval end (inf) becomes null."""
    if isinstance(x, float) and math.isinf(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def render(c: dict) -> str:
    def ratio(lo, hi):
        return f"[{lo:.2f}, {'∞' if hi == math.inf else f'{hi:.2f}'})"
    lines = [f"## {c['claim']}: **{c['verdict']}** over {len(c['runs'])} run(s)", "",
             "| run | GPU | seed | best chunked | mux | best chunked | mux / best chunked | verdict | all 8 chunked ran |",
             "|---|---|---:|---|---:|---:|---:|---|---|"]
    for r in c["runs"]:
        gpu = (r["device"] or "?") + (f" ({', '.join(r['gpu_uuids'])})" if r["gpu_uuids"] else "")
        lines.append(f"| {r['run']} | {gpu} | {r['seed']} | {r['baseline']} | {report.interval_text(*r['mux'])} | "
                     f"{report.interval_text(*r['baseline_interval'])} | {ratio(*r['ratio'])} | {r['verdict']} | "
                     f"{'yes' if r['all_chunked'] else 'no: ' + ', '.join(r['chunked_ran'])} |")
    seeds = "; ".join(f"{d}: {', '.join(map(str, v))}" for d, v in c["seeds_by_device"].items())
    lines += ["", f"mux / best chunked over all runs: {ratio(*c['ratio'])}. Seeds per GPU: {seeds}"
              + ("" if c["two_seeds_each"] else " (issue 17 asks for two on each)")
              + ("" if c["all_chunked_everywhere"] else "; not every run had all eight chunked baselines") + "."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = cli.ArgumentParser(prog="python -m bench.claims", description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", help="bench.run output directories (or their summary.json)")
    p.add_argument("--factor", type=cli.positive(float), default=2.0,
                   help="the claim's factor: mux ≥ FACTOR x best chunked")
    p.add_argument("--json", default=None, help="also write the claim here as JSON")
    a = p.parse_args(argv)
    c = claim({r: load(r) for r in a.runs}, a.factor)
    if a.json:
        Path(a.json).write_text(json.dumps(_finite(c), indent=1))
    sys.stdout.write(render(c))
    return 0


if __name__ == "__main__":
    cli.run(main)
