"""The short markdown table of a run's ``summary.json``.

    python -m bench.report bench/results/<run>/            # or .../summary.json

The table gains a TTFT-per-prompt-token column (P50/P90/P99, ms/token) when the summary has
it, and a P99 (TTFT − K × prompt tokens) column when the run's goodput check was length-aware
(``slo.ttft_ms_per_token`` K > 0; older summaries have none and were flat). A goodput that no
failing rate bounds above (the system passed every rate it ran) reads "≥ X". Two comparisons
follow when their systems are both in the run, at every rate they share:

- ``mux-off`` vs ``sglang`` (``throughput_comparison``): the ratio of output tok/s and of total
  tok/s (mux-off / sglang) and whether both are within 2 %. Throughput is over the makespan,
  so at a rate both sustain it is the offered load and the ratio is ~1 by construction; a
  rate that saturates both (TTFT drifting up) is the point that measures the launcher's cost.
- ``mux`` vs the baselines (``goodput_comparison``): the issue's claim is mux goodput ≥ 2x the
  best chunked-prefill budget (any ``sglang-chunked-*``) and ≥ the best fixed partition (any
  ``mux-fixed-*``). Each claim gets two verdicts. "tested" is the issue's own definition:
  goodput = the highest tested rate that passes, compared as numbers (so it depends on the
  rates tested; a baseline that passed none has no such number, and the interval's verdict
  stands in). "interval" is the robust one: a sweep only brackets goodput in [highest
  passing rate, lowest failing rate above it) — open-ended when nothing above failed, below
  the lowest rate when nothing passed — and a family's goodput (any budget) lies in [its best
  member's lo, its largest hi), so the claim "holds", "fails" or is "open" whatever lies
  between the tested rates.
- ``mux`` vs ``mux-nopreempt`` (``preemption_comparison``): TTFT per prompt token P50/P90/P99
  with preemption on and off (and P99 per subset of the ``mixed`` workload), the preemptions
  fired, and whether the P99 is lower with preemption on.
"""
from __future__ import annotations

from sglang_mux import cli

from sglang_mux import cli_io as _cli_io
from bench.metrics import SHORT_PROMPT_TOKENS


def _f(x, fmt: str = "{:.0f}") -> str:
    return "—" if x is None else fmt.format(x)


def _pts(s: dict, name: str) -> dict:
    return {p["rate"]: p for p in (s["systems"].get(name) or {}).get("points", [])}


def _ratio(a, b):
    return None if a is None or b is None or not b else a / b


def throughput_comparison(s: dict, base: str = "sglang", other: str = "mux-off",
                          tol: float = 0.02) -> list[dict]:
    """Per common rate: output and total tok/s of both, ``other / base`` ratios, ``within``
    (both ratios within ``tol`` of 1; None when a throughput is missing). [] unless both ran."""
    a, b = _pts(s, base), _pts(s, other)
    rows = []
    for rate in sorted(set(a) & set(b)):
        ma, mb = a[rate]["summary"], b[rate]["summary"]
        row = {"rate": rate}
        for key in ("output_tok_s", "total_tok_s"):
            row[f"{base}_{key}"], row[f"{other}_{key}"] = ma.get(key), mb.get(key)
            row[f"{key}_ratio"] = _ratio(mb.get(key), ma.get(key))
        ratios = [row["output_tok_s_ratio"], row["total_tok_s_ratio"]]
        row["within"] = None if None in ratios else all(abs(r - 1) <= tol for r in ratios)
        row["n_failed"] = {base: ma.get("n_failed"), other: mb.get("n_failed")}
        rows.append(row)
    return rows


def _p(m: dict | None, key: str, pct: str = "p99"):
    return ((m or {}).get(key) or {}).get(pct)


def preemption_comparison(s: dict, on: str = "mux", off: str = "mux-nopreempt") -> list[dict]:
    """Per common rate: TTFT per prompt token P50/P90/P99 with preemption on and off (per
    subset too: P99), preemptions fired, ``lower`` (P99 on < P99 off). [] unless both ran."""
    a, b = _pts(s, on), _pts(s, off)
    rows = []
    for rate in sorted(set(a) & set(b)):
        ma, mb = a[rate]["summary"], b[rate]["summary"]
        row = {"rate": rate}
        for pct in ("p50", "p90", "p99"):
            row[f"on_{pct}"] = _p(ma, "ttft_ms_per_token", pct)
            row[f"off_{pct}"] = _p(mb, "ttft_ms_per_token", pct)
        subsets = sorted(set(ma.get("by_subset") or {}) & set(mb.get("by_subset") or {}))
        row.update({
            "p99_ratio": _ratio(row["on_p99"], row["off_p99"]),
            "lower": None if None in (row["on_p99"], row["off_p99"])
            else row["on_p99"] < row["off_p99"],
            "by_subset": {k: {"on_p99": _p(ma["by_subset"][k], "ttft_ms_per_token"),
                              "off_p99": _p(mb["by_subset"][k], "ttft_ms_per_token")}
                          for k in subsets},
            "preemptions": {on: a[rate].get("preemptions"), off: b[rate].get("preemptions")},
            "n_failed": {on: ma.get("n_failed"), off: mb.get("n_failed")}})
        rows.append(row)
    return rows


def goodput_interval(sysd: dict) -> tuple[float, float]:
    """[lo, hi) holding the goodput: lo = highest passing rate (0 if none), hi = lowest rate
    above lo that failed (inf if none)."""
    pts = sorted(sysd.get("points") or [], key=lambda p: p["rate"])
    lo = max((p["rate"] for p in pts if p["pass"]), default=0.0)
    hi = min((p["rate"] for p in pts if not p["pass"] and p["rate"] > lo), default=float("inf"))
    return float(lo), float(hi)


def _best(s: dict, prefix: str) -> tuple[str, tuple[float, float]] | None:
    """The family's best member (highest lo, then hi) and the family's goodput interval:
    [that lo, the largest hi of any member) — a member that passed less may still have the
    higher goodput between its tested rates (e.g. [1.5, 1.75) and < 2 give [1.5, 2))."""
    cands = [(goodput_interval(d), n) for n, d in s["systems"].items()
             if n.startswith(prefix) and d.get("points")]
    if not cands:
        return None
    (lo, _), name = max(cands, key=lambda c: c[0])
    return name, (lo, max(hi for (_, hi), _ in cands))


def goodput_comparison(s: dict, factor_chunked: float = 2.0) -> list[dict]:
    """The claims mux ≥ factor x best chunked and mux ≥ best fixed partition, each with
    verdict "holds" / "fails" / "open" from the goodput intervals. [] without a mux sweep."""
    mux = s["systems"].get("mux")
    if not mux or not mux.get("points"):
        return []
    m_lo, m_hi = goodput_interval(mux)
    rows = []
    for label, prefix, k in (("best chunked prefill", "sglang-chunked-", factor_chunked),
                             ("best fixed partition", "mux-fixed-", 1.0)):
        best = _best(s, prefix)
        if best is None:
            continue
        name, (b_lo, b_hi) = best
        # holds: even the smallest possible mux goodput beats k x the largest possible baseline
        # (goodput < b_hi); fails: even the largest possible mux goodput (< m_hi) cannot.
        if b_hi != float("inf") and m_lo >= k * b_hi:
            verdict = "holds"
        elif m_hi != float("inf") and m_hi <= k * b_lo:
            verdict = "fails"
        else:
            verdict = "open"
        # the definition: highest passing tested rates, compared as numbers; a baseline
        # that passed none of its rates has no tested goodput (0 would make any mux "hold"),
        # so there only the interval can say
        if m_lo <= 0:
            tested = "fails"
        elif b_lo <= 0:
            tested = verdict
        else:
            tested = "holds" if m_lo >= k * b_lo else "fails"
        rows.append({"claim": f"mux ≥ {k:g}x {label}", "baseline": name, "factor": k,
                     "mux": [m_lo, m_hi], "baseline_interval": [b_lo, b_hi], "verdict": verdict,
                     "tested": [m_lo, b_lo], "verdict_tested": tested})
    return rows


def interval_text(lo: float, hi: float) -> str:
    if lo == 0 and hi != float("inf"):
        return f"< {hi:g}"
    return f"≥ {lo:g}" if hi == float("inf") else f"[{lo:g}, {hi:g})"


def render_goodput(rows: list[dict]) -> list[str]:
    if not rows:
        return []
    lines = ["### Goodput claims", "",
             "tested: goodput = highest passing tested rate (the issue's definition). interval: "
             "goodput lies between the highest passing and the lowest failing rate tested, a "
             "family's between its best lo and its largest hi.", "",
             "| claim | best baseline | tested: mux vs baseline | verdict (tested) | "
             "interval: mux | interval: baseline family | verdict (interval) |",
             "|---|---|---:|---|---:|---:|---|"]
    for r in rows:
        m, b = r["tested"]
        b_txt = interval_text(*r["baseline_interval"]) if b <= 0 else f"{b:g}"
        lines.append(f"| {r['claim']} | {r['baseline']} | {m:g} vs {b_txt} | {r['verdict_tested']} | "
                     f"{interval_text(*r['mux'])} | {interval_text(*r['baseline_interval'])} | {r['verdict']} |")
    return lines + [""]


def _has_per_token(s: dict) -> bool:
    return any(_p(p["summary"], "ttft_ms_per_token") is not None
               for sysd in s["systems"].values() for p in sysd["points"])


def _mux_line(s: dict) -> str | None:
    parts = []
    for name, sysd in s["systems"].items():
        m = sysd.get("mux")
        for x in (m if isinstance(m, list) else [m]):
            if x:
                parts.append(f"{name} {x['ttft_slo_ms']:g} ms + {x['ttft_ms_per_token']:g} "
                             f"ms/token, preemption {'on' if x['preemption'] else 'off'}")
    if not parts:
        return None
    return ("Mux length-aware TTFT SLO (what preemption decides on; SLO + K × prompt tokens): "
            + "; ".join(parts) + ".")


def render_throughput(rows: list[dict], base: str = "sglang", other: str = "mux-off",
                      tol: float = 0.02) -> list[str]:
    if not rows:
        return []
    lines = [f"### {other} vs {base} throughput (ratio {other} / {base}, within ±{tol:.0%}?)", "",
             f"| rate | output tok/s {base} | output tok/s {other} | ratio | total tok/s {base} "
             f"| total tok/s {other} | ratio | within {tol:.0%} |",
             "|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        flag = {True: "✓ yes", False: "✗ no", None: "—"}[r["within"]]
        nf = r["n_failed"]
        if nf.get(base) or nf.get(other):
            flag += f" (failed: {base} {nf.get(base)}, {other} {nf.get(other)})"
        lines.append(
            f"| {r['rate']:g} | {_f(r[f'{base}_output_tok_s'])} | {_f(r[f'{other}_output_tok_s'])} "
            f"| {_f(r['output_tok_s_ratio'], '{:.4f}')} | {_f(r[f'{base}_total_tok_s'])} | "
            f"{_f(r[f'{other}_total_tok_s'])} | {_f(r['total_tok_s_ratio'], '{:.4f}')} | {flag} |")
    lines += ["", "Throughput is over each point's makespan: at a rate both sustain it is the "
              "offered load (ratio ~1 by construction); a saturating rate measures the cost.", ""]
    return lines


def render_preemption(rows: list[dict], on: str = "mux", off: str = "mux-nopreempt") -> list[str]:
    if not rows:
        return []
    subsets = sorted({k for r in rows for k in r["by_subset"]})
    lines = [f"### Preemption: {on} (on) vs {off} (off), TTFT per prompt token (ms/token, "
             "on / off)", "",
             "| rate | P50 | P90 | P99 | P99 on÷off | "
             + "".join(f"P99 {k} | " for k in subsets) + "preemptions | P99 lower with preemption |",
             "|---:|---:|---:|---:|---:|" + "---:|" * len(subsets) + "---:|---|"]
    g = "{:.3g}"

    def pair(x, y):
        return f"{_f(x, g)} / {_f(y, g)}"
    for r in rows:
        sub = "".join(pair(r["by_subset"][k]["on_p99"], r["by_subset"][k]["off_p99"]) + " | "
                      if k in r["by_subset"] else "— | " for k in subsets)
        flag = {True: "✓ yes", False: "✗ no", None: "—"}[r["lower"]]
        nf = r["n_failed"]
        if nf.get(on) or nf.get(off):
            flag += f" (failed: {on} {nf.get(on)}, {off} {nf.get(off)})"
        lines.append(f"| {r['rate']:g} | {pair(r['on_p50'], r['off_p50'])} | "
                     f"{pair(r['on_p90'], r['off_p90'])} | {pair(r['on_p99'], r['off_p99'])} | "
                     f"{_f(r['p99_ratio'], '{:.3f}')} | {sub}"
                     f"{_f(r['preemptions'].get(on), '{:d}')} | {flag} |")
    lines += ["", "Preemptions: `\"preempt\":true` decisions in the dispatcher timeline while the "
              "point ran (— without a timeline). Failed requests are not in the percentiles. "
              "Preemption is non-recursive (a preemptor cannot be preempted), so "
              "P99 over a few dozen requests can stay put where P90 drops.", ""]
    return lines


def render_frontend(s: dict) -> list[str]:
    """Per system, the busy cores of the server's HTTP + tokenizer process at each point (bench.run's
    ``proc_cpu``; none before session 48). One Python process serves HTTP and every token's
    stream: near 1.0 it is saturated, and first tokens queue after the scheduler has them."""
    rows = []
    for name, sysd in s["systems"].items():
        got = [(p["rate"], (p.get("proc_cpu") or {}).get("http+tokenizer")) for p in sysd["points"]]
        got = [f"{r:g}: {c:.2f}" for r, c in got if c is not None]
        if got:
            rows.append(f"| {name} | {', '.join(got)} |")
    if not rows:
        return []
    return ["### The server's HTTP + tokenizer process: busy cores by rate", "",
            "| system | rate: cores |", "|---|---|", *rows]


def render_first_failures(s: dict) -> list[str]:
    """Per system, its lowest failing rate: why it failed (``check_point``'s reasons) and where
    its TTFT went (``metrics.ttft_split``: in the scheduler, of which its waiting queue, and
    outside it). A queue that grows in the scheduler is the GPU's limit; time outside it is SGLang's
    HTTP + tokenizer process (session 48's sharegpt), which every system of the cell shares."""
    rows = []
    for name, sysd in s["systems"].items():
        fails = [p for p in sysd["points"] if p.get("pass") is False]
        if not fails:
            continue
        p = min(fails, key=lambda q: q["rate"])
        m = p["summary"]
        sp = m.get("ttft_split")
        where = " | ".join(f"{_f(sp['p50'][k])} / {_f(sp['p99'][k])}" for k in ("server_ms", "queue_ms", "rest_ms")) \
            if sp else "— | — | —"
        rows.append(f"| {name} | {p['rate']:g} | {'; '.join(p.get('reasons') or [])} | "
                    f"{_f(m['ttft_ms'].get('p50'))} / {_f(m['ttft_ms'].get('p99'))} | {where} |")
    if not rows:
        return []
    return ["### Each system's first failing rate: why, and where its TTFT went (P50 / P99, ms)", "",
            "| system | rate | reasons | TTFT | in the scheduler | of which queued | outside the scheduler |",
            "|---|---:|---|---:|---:|---:|---:|", *rows, "",
            "In the scheduler: SGLang's receipt to the end of the request's prefill; outside: the way in "
            "and out through SGLang's HTTP + tokenizer process (— without SGLang's stamps: "
            "`--enable-metrics`, one tokenizer process)."]


def _hardware(s: dict) -> str:
    """' (GPU-…; CPU model x N)': which host, since P99 TBT moves from one to the next."""
    hw = s.get("hardware") or {}
    parts = [", ".join(hw.get("gpu_uuids") or [])]
    if hw.get("cpu_model"):
        parts.append(f"{hw['cpu_model']} x {hw.get('cpus')}")
    parts = [p for p in parts if p]
    return f" ({'; '.join(parts)})" if parts else ""


def queue_drift_disagrees(s: dict) -> list[str]:
    """``system @ rate: ok / drift`` for each point the two drift tests judge differently."""
    out = []
    for name, sysd in s["systems"].items():
        for p in sysd["points"]:
            d, q = p["summary"].get("ttft_drift"), p["summary"].get("ttft_queue_drift")
            if d and q and d["ok"] != q["ok"]:
                word = lambda x: "ok" if x["ok"] else "drift"  # noqa: E731
                out.append(f"{name} @ {p['rate']:g}: {word(d)} / {word(q)}")
    return out


def different_first_rates(s: dict) -> list[str]:
    """"<system> from <rate>" for each system with points, where their lowest tested rates differ
    (else []): a ratio of goodputs that climbed from different rates assumes each system's verdict
    is monotone in the rate. At a 70B's ~30 requests a point it was not: the hybrid, climbing from
    0.5, failed 0.6 on a drift test that chunked 512, climbing from 0.7, would have failed too
    (bench/results/h200x4_s52_2026-11-28/)."""
    firsts = {n: min(p["rate"] for p in d["points"]) for n, d in s["systems"].items() if d.get("points")}
    return [f"{n} from {r:g}" for n, r in firsts.items()] if len(set(firsts.values())) > 1 else []


def ttft_slo_text(slo: dict) -> str:
    """The goodput check's TTFT SLO in words: flat, or length-aware (a summary's ``slo`` with
    ``ttft_ms_per_token`` K > 0; summaries without the key are flat)."""
    k = slo.get("ttft_ms_per_token") or 0
    if not k:
        return f"P99 TTFT ≤ {slo['ttft_ms']:g} ms"
    return f"P99 of (TTFT − {k:g} ms × prompt tokens) ≤ {slo['ttft_ms']:g} ms (length-aware)"


def render(s: dict) -> str:
    slo, wl = s["slo"], s.get("workload") or {}
    unit = s.get("rate_unit", "requests/s")
    k = slo.get("ttft_ms_per_token") or 0
    lines = [
        f"## Goodput — {wl.get('workload', '?')} ({unit})", "",
        f"SLOs: P99 TBT ≤ {slo['tbt_ms']:g} ms, {ttft_slo_text(slo)}, no failed "
        f"request, no TTFT drift. Device: {s.get('device') or 'unknown'}{_hardware(s)}. Date: {s.get('date')}.",
        "Workload: " + ", ".join(f"{k}={v}" for k, v in wl.items()
                                 if k not in ("distributions", "input_cap_note")
                                 and v not in (None, "")),
    ]
    if s.get("unfair"):
        lines.append(f"**Not a fair comparison: {s['unfair']}.**")
    elif "attention_backend" in s:
        lines.append(f"Attention backend: {s['attention_backend']} (every system).")
    per_token = _has_per_token(s)
    mux_line = _mux_line(s)
    if mux_line:
        lines.append(mux_line)
    lines += [
        "",
        "| system | goodput | P99 TTFT (ms) | "
        + (f"P99 TTFT − {k:g}×prompt (ms) | " if k else "")
        + ("TTFT/token P50/P90/P99 (ms) | " if per_token else "")
        + "P99 TTFT short / long prompts (ms) | "
        + "P99 TBT (ms; requests within it) | output tok/s | SLO attainment | rates (✓ pass, ✗ fail) |",
        "|---|---:|---:|" + ("---:|" if k else "") + ("---:|" if per_token else "") + "---:|---:|---:|---:|---|",
    ]
    for name, sysd in s["systems"].items():
        start = sysd.get("start") or {}
        pts = sysd["points"]
        if start.get("ok") is False and not pts:
            lines.append(f"| {name} | start failed: {start.get('reason', '?')} | | | | | | |"
                         + (" |" if per_token else "") + (" |" if k else ""))
            continue
        at = next((p for p in pts if p["rate"] == sysd["goodput_rps"]), pts[0] if pts else None)
        m = at["summary"] if at else {}
        att = m.get("slo_attainment")
        rates = " ".join(f"{p['rate']:g}{'✓' if p['pass'] else '✗'}" for p in pts)
        tpt = m.get("ttft_ms_per_token") or {}
        tpt_col = ("/".join(_f(tpt.get(q), "{:.3g}") for q in ("p50", "p90", "p99")) + " | "
                   if per_token else "")
        adj_col = f"{_f((m.get('ttft_length_adjusted_ms') or {}).get('p99'))} | " if k else ""
        by_len = m.get("ttft_by_length") or {}  # absent from summaries written before it was kept
        len_col = " / ".join(_f((by_len.get(c) or {}).get("p99")) for c in ("short", "long")) + " | "
        # beside the pooled P99, the share of requests whose own P99 TBT met the SLO: a pooled tail
        # can hide a few requests that stalled throughout, or a few stalls spread over many
        tshare = m.get("tbt_attainment")
        tbt_share = "" if tshare is None else f" ({100 * tshare:.1f}%)"
        # no rate failed: the goodput is a lower bound (the climb never found its end)
        bound = "≥ " if pts and sysd["goodput_rps"] is not None and goodput_interval(sysd)[1] == float("inf") else ""
        lines.append(
            f"| {name} | {bound}{_f(sysd['goodput_rps'], '{:g}')}"
            f"{'' if sysd.get('monotone', True) else ' (non-monotone)'} | "
            f"{_f(m.get('ttft_ms', {}).get('p99'))} | {adj_col}{tpt_col}{len_col}"
            f"{_f(m.get('tbt_ms', {}).get('p99'), '{:.1f}')}{tbt_share} | {_f(m.get('output_tok_s'))} | "
            f"{_f(None if att is None else 100 * att, '{:.1f}%')} | {rates} |")
    lines.append("")
    lines.append(f"Latency columns are at the goodput rate (else the lowest tested rate); short prompts are "
                 f"those under {SHORT_PROMPT_TOKENS} tokens. "
                 + ("Budget stopped the sweep; not run: " + ", ".join(s["not_run"])
                    if s.get("budget_stopped") else
                    ("Not run: " + ", ".join(s["not_run"]) if s.get("not_run") else "")))
    firsts = different_first_rates(s)
    if firsts:
        lines.append("The systems climbed from different rates (" + ", ".join(firsts) + "): a ratio of their "
                     "goodputs assumes verdicts monotone in the rate, which short points need not give.")
    split = queue_drift_disagrees(s)
    if split:
        lines.append("Where the drift tests disagree (TTFT / wait beyond its own prefill, "
                     "`bench.metrics.queue_drift`; the rule uses the second where the TTFT SLO is length-aware, "
                     "else the first): " + ", ".join(split) + ".")
    extra = render_goodput(goodput_comparison(s)) + \
        render_throughput(throughput_comparison(s)) + \
        render_preemption(preemption_comparison(s))
    for part in (render_first_failures(s), render_frontend(s)):
        if part:
            extra += ([""] if extra else []) + part
    if extra:
        lines += [""] + extra
    return "\n".join(lines).rstrip("\n")


def main(argv: list[str] | None = None) -> int:
    ap = cli.ArgumentParser(prog="python -m bench.report",
                            description="Render a benchmark run's summary.json as the markdown report.")
    ap.add_argument("path", nargs="?", default=".", help="a bench.run --out directory or its summary.json")
    path = ap.parse_args(argv).path
    try:
        _, summary = _cli_io.run_summary(path)
    except cli.UsageError as e:  # SystemExit(2) for callers of main, as argparse's own errors
        cli.fail(str(e))
    print(render(summary))
    return 0


if __name__ == "__main__":
    cli.run(main)
