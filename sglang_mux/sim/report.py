"""The one table both simulators print (``sim`` and ``sim_chunked``), with its legend."""

from __future__ import annotations

import math
from typing import Sequence

from sglang_mux.sim.summary import SimResult

# (header, summary key, format); a key a result lacks prints "-"
COLUMNS = (
    ("system", "policy", "{}"),
    ("reqs", "requests", "{:d}"),
    ("TTFT p50 s", "ttft_p50_s", "{:.2f}"),
    ("TTFT p99 s", "ttft_p99_s", "{:.2f}"),
    ("TBT p50 ms", "tbt_p50_ms", "{:.1f}"),
    ("TBT p99 ms", "tbt_p99_ms", "{:.1f}"),
    ("TTFT ok", "ttft_attainment", "{:.1%}"),
    ("TBT ok", "tbt_attainment", "{:.1%}"),
    ("SLO ok", "slo_attainment", "{:.1%}"),
    ("tok/s", "throughput_tok_s", "{:.0f}"),
    ("drift", "ttft_drift", None),
    ("preempt", "preemptions", "{:d}"),
)

LEGEND = """\
system      the policy replayed, or chunked-<budget> (SGLang's chunked prefill; -nomix: no mixed chunks)
reqs        requests replayed
TTFT p50/99 time to first token, seconds (arrival to first token)
TBT p50/99  time between a request's tokens, ms (percentiles over tokens)
TTFT ok     share of requests whose TTFT met its SLO (--ttft-slo-ms + --ttft-ms-per-token x prompt)
TBT ok      share of tokens whose gap met --tbt-slo-ms
SLO ok      share of requests that met both, every gap of theirs within the TBT SLO
tok/s       output tokens per second, first arrival to last finish
drift       the benchmark's TTFT drift test: ok, or FAIL (TTFT grows over the run: a queue builds)
preempt     layer-wise prefills preempted (- for chunked prefill, which has none)"""


def _cell(r: SimResult, key: str, fmt: str | None) -> str:
    v = r.summary.get(key)
    if key == "ttft_drift":
        return "-" if v is None else ("ok" if v["ok"] else "FAIL")
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return fmt.format(v)


def table(results: Sequence[SimResult], legend: bool = True) -> str:
    """The results as aligned columns, each mux policy's plan shares below, then the legend."""
    rows = [[h for h, _, _ in COLUMNS]] + [[_cell(r, k, f) for _, k, f in COLUMNS] for r in results]
    width = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, width)))
             for row in rows]
    for r in results:
        shares = r.summary.get("partition_share")
        if shares:
            top = ", ".join(f"{k} {v:.0%}" for k, v in list(shares.items())[:5])
            lines.append(f"{r.policy}: time by plan: {top}")
    if legend:
        lines += ["", LEGEND, "time by plan: share of busy time on each decode/prefill SM split (D<decode>/P<prefill>) "
                  "or fused (mixed chunks on the whole GPU)" if any(r.summary.get("partition_share") for r in results)
                  else ""]
    return "\n".join(lines).rstrip()


def setup_line(setup: dict) -> str:
    """The replay's settings on one line (``--verbose``)."""
    return " ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in setup.items())
