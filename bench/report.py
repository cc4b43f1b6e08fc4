"""The short markdown table of a run's ``summary.json``.

    python -m bench.report bench/results/<run>/            # or .../summary.json
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def _f(x, fmt: str = "{:.0f}") -> str:
    return "—" if x is None else fmt.format(x)


def render(s: dict) -> str:
    slo, wl = s["slo"], s.get("workload") or {}
    unit = s.get("rate_unit", "requests/s")
    lines = [
        f"## Goodput — {wl.get('workload', '?')} ({unit})", "",
        f"SLOs: P99 TBT ≤ {slo['tbt_ms']:g} ms, P99 TTFT ≤ {slo['ttft_ms']:g} ms, no failed "
        f"request, no TTFT drift. Device: {s.get('device') or 'unknown'}. Date: {s.get('date')}.",
        "Workload: " + ", ".join(f"{k}={v}" for k, v in wl.items()
                                 if k not in ("distributions", "input_cap_note")
                                 and v not in (None, "")),
        "",
        "| system | goodput | P99 TTFT (ms) | P99 TBT (ms) | output tok/s | SLO attainment "
        "| rates (✓ pass, ✗ fail) |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for name, sysd in s["systems"].items():
        start = sysd.get("start") or {}
        pts = sysd["points"]
        if start.get("ok") is False and not pts:
            lines.append(f"| {name} | start failed: {start.get('reason', '?')} | | | | | |")
            continue
        at = next((p for p in pts if p["rate"] == sysd["goodput_rps"]), pts[0] if pts else None)
        m = at["summary"] if at else {}
        att = m.get("slo_attainment")
        rates = " ".join(f"{p['rate']:g}{'✓' if p['pass'] else '✗'}" for p in pts)
        lines.append(
            f"| {name} | {_f(sysd['goodput_rps'], '{:g}')}"
            f"{'' if sysd.get('monotone', True) else ' (non-monotone)'} | "
            f"{_f(m.get('ttft_ms', {}).get('p99'))} | "
            f"{_f(m.get('tbt_ms', {}).get('p99'), '{:.1f}')} | {_f(m.get('output_tok_s'))} | "
            f"{_f(None if att is None else 100 * att, '{:.1f}%')} | {rates} |")
    lines.append("")
    lines.append("Latency columns are at the goodput rate (else the lowest tested rate). "
                 + ("Budget stopped the sweep; not run: " + ", ".join(s["not_run"])
                    if s.get("budget_stopped") else
                    ("Not run: " + ", ".join(s["not_run"]) if s.get("not_run") else "")))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = Path((argv or sys.argv[1:] or ["."])[0])
    p = p / "summary.json" if p.is_dir() else p
    print(render(json.loads(p.read_text())))


if __name__ == "__main__":
    main()
