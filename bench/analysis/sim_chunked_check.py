"""The chunked-prefill simulator against every chunked point served on a lone H100 (CPU).

    python -m bench.analysis.sim_chunked_check [--host-ms 0,1,2]      (repository root)

``sim_chunked`` adds a fixed host time to every iteration. 2 ms reproduced the served chunked
points at TBT 30 when the table priced a mixed batch as a prefill of its tokens
(bench/results/sim_chunked_s21/). Since then the estimator prices it with its decode rows
(``latency_model/fused.py``: ~1.14x on the capped conversation's mixed batches), and served
fused iterations ran at 0.97-0.98 of that price (bench/results/profile_s45_2026-11-27/).
SGLang's overlap loop launches the next batch while the GPU runs this one. A mixed iteration long
enough to hide its launch therefore adds no host time. This replays each served point of
``SERVED`` with each ``--host-ms`` and sets the simulated verdict (P99 TTFT 5 s, P99 TBT, drift,
as ``sim_hybrid_map`` judges) beside the served one. The requests and arrivals are
``sim_hybrid_map.requests``', those of ``bench.run``'s points. Every run in ``SERVED`` had one
H100 and 16 cores to itself. CPU, ~1 minute.
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

from bench import metrics
from bench.analysis import sim_hybrid_map as M
from sglang_mux.policy import SLO
from sglang_mux import cli, cli_io
from sglang_mux.sim_chunked import simulate_chunked

# results directory -> sim_hybrid_map workload; each run on a lone H100 (16 cores), seed 0, 45-s points
SERVED = {
    "capped_tbt30_h100_2026-11-27": "capped conversation (<= 8000)",
    "cap30_lone_h100_s46_2026-11-28": "capped conversation (<= 8000)",
    "code_tbt30_h100_2026-11-27": "code",
    "capped_tbt50_h100_2026-11-27": "capped conversation (<= 8000)",
    "chat1k_h100_2026-11-27": "chat-1k",
    "overlap_fused_h100_2026-11-27/code": "code",
    "code_chat_h100_2026-11-27/code": "code",
    "code_chat_h100_2026-11-27/chat-1k": "chat-1k",
    "hybrid_code_h100_2026-11-27/baseline_and_hybrid_v1": "code",
}
RESULTS = Path(__file__).resolve().parents[1] / "results"


def served_points(run: str) -> list[dict]:
    """The chunked systems' points of ``run`` (a directory under bench/results): system, budget,
    rate, TBT SLO, the served verdict, P99 TTFT (s) and P99 TBT (ms)."""
    s = json.loads((RESULTS / run / "summary.json").read_text())
    tbt, ttft = float(s["slo"]["tbt_ms"]), float(s["slo"]["ttft_ms"])
    out = []
    for name, sysd in s["systems"].items():
        if not name.startswith("sglang-chunked-"):
            continue
        for p in sysd.get("points") or []:
            ps = p["summary"]
            out.append({"run": run, "system": name, "budget": int(name.rsplit("-", 1)[1]), "rate": float(p["rate"]),
                        "tbt_slo_ms": tbt, "ok": bool(metrics.check_point(ps, tbt, ttft)[0]),
                        "ttft_p99_s": round(ps["ttft_ms"]["p99"] / 1e3, 2), "tbt_p99_ms": round(ps["tbt_ms"]["p99"], 1)})
    return out


def simulated(est, point: dict, workload: str, host_ms: float, tmp: Path) -> dict:
    """``point`` replayed by sim_chunked with ``host_ms`` an iteration: verdict, P99 TTFT (s), P99
    TBT (ms), judged as sim_hybrid_map judges its points."""
    w = M.WORKLOADS[workload]
    reqs = M.requests(w, point["rate"], None, tmp)
    r = simulate_chunked(reqs, est, budget=point["budget"], host_ms=host_ms,
                         slo=SLO(point["tbt_slo_ms"], w["ttft"][1] * 1e3))
    tp = M.ttft_p99(r, reqs, w["ttft"])
    ok = tp <= w["ttft"][1] and r.summary["tbt_p99_ms"] <= point["tbt_slo_ms"] and r.summary["ttft_drift"]["ok"]
    return {"ok": bool(ok), "ttft_p99_s": round(tp, 2), "tbt_p99_ms": round(r.summary["tbt_p99_ms"], 1)}


def cell(p: dict) -> str:
    return f"{'✓' if p['ok'] else '✗'} {p['ttft_p99_s']:.2f} s, {p['tbt_p99_ms']:.1f} ms"


def main(argv=None) -> int:
    ap = cli.ArgumentParser(prog="python -m bench.analysis.sim_chunked_check", description=__doc__.split("\n\n")[0])
    ap.add_argument("--host-ms", type=cli_io.numbers(allow_zero=True, example="0,1,2"), default=[0.0, 1.0, 2.0],
                    help="host ms per iteration to try, comma list (default 0,1,2)")
    a = ap.parse_args(argv)
    hosts = a.host_ms
    est, *_ = M.simulator_inputs()
    agree = {h: 0 for h in hosts}
    per_budget: dict[int, dict[float, list[int]]] = {}  # budget -> host -> [reproduced, points]
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for run, workload in SERVED.items():
            for p in served_points(run):
                sims = [simulated(est, p, workload, h, Path(d)) for h in hosts]
                for h, s in zip(hosts, sims):
                    agree[h] += s["ok"] == p["ok"]
                    tally = per_budget.setdefault(p["budget"], {}).setdefault(h, [0, 0])
                    tally[0] += s["ok"] == p["ok"]
                    tally[1] += 1
                rows.append(f"| `{run}` | TBT {p['tbt_slo_ms']:g} | {p['system'].removeprefix('sglang-')} | {p['rate']:g} | "
                            f"{cell(p)} | " + " | ".join(map(cell, sims)) + " |")
    print("Each cell: pass (P99 TTFT 5 s, P99 TBT, no drift), P99 TTFT, P99 TBT.\n")
    print("| run | SLO | system | req/s | served | " + " | ".join(f"simulated, host {h:g} ms" for h in hosts) + " |")
    print("|---|---|---|---:|---|" + "---|" * len(hosts))
    print("\n".join(rows))
    print("\nVerdicts reproduced: " + ", ".join(f"host {h:g} ms {agree[h]} of {len(rows)}" for h in hosts))
    for b, by_host in sorted(per_budget.items()):
        print(f"- chunked {b}: " + ", ".join(f"host {h:g} ms {n} of {m}" for h, (n, m) in by_host.items()))
    return 0


if __name__ == "__main__":
    cli.run(main)
