"""Per-request latency metrics, SLO attainment and goodput (pandas).

From the client's records (``bench.client``):

- TTFT = first token arrival - send; E2E = end - send; TBT gaps = differences of consecutive
  token arrivals (a chunk of k tokens gives one real gap and k-1 zero gaps, see
  ``bench.client``); TPOT = (last token - first token) / (output tokens - 1).
- Percentiles (P50/P90/P99, numpy linear interpolation) are over FINISHED requests; TBT
  percentiles pool every gap of every finished request (the paper's P99 TBT). Failed
  requests are never dropped: they are counted in ``n_failed`` (by reason) and as not
  attaining the SLO, and one failure fails the goodput check.
- SLO attainment: a request attains iff it finished, TTFT (less K x its prompt tokens with a
  length-aware SLO) <= ``ttft_slo_ms`` and the P99 of
  its own TBT gaps <= ``tbt_slo_ms`` (a request with < 2 tokens has no gaps and passes the
  TBT part). The per-request P99 (not the max) tolerates one hiccup in a long answer; for
  answers under ~100 tokens it is within one gap of the max. ``ttft_attainment`` and
  ``tbt_attainment`` give the two parts alone.
- TTFT per prompt token (``ttft_ms_per_token``, ms/token; the paper's Figure 20 metric):
  TTFT / the request's prompt tokens (the server's count, else the client's), per finished
  request with a prompt; P50/P90/P99 as above. It puts short and long prompts on one scale:
  a short request stuck behind a long prefill shows as a large value.
- Per subset (``by_subset``, when records carry ``subset``, e.g. the ``mixed`` workload's
  ``sharegpt``/``loogle``): n, n_ok and the TTFT and TTFT-per-token percentiles of each class.
- Throughput over the makespan (first send -> last finished end): ``output_tok_s``,
  ``total_tok_s`` (prompt + output of finished requests), ``req_s``.
- Goodput (``goodput``): the highest tested rate whose point passes ALL of
    1. no failed request (every request finished before the deadline, no errors);
    2. P99 TBT <= TBT SLO (default 50 ms) -- vacuous if no request produced a gap;
    3. P99 TTFT <= TTFT SLO (default 5000 ms); with a length-aware SLO (K > 0 ms per prompt
       token), P99 over finished requests of ``TTFT - K x prompt tokens`` <= the TTFT SLO
       instead (``ttft_length_adjusted_ms``): a long prompt's prefill alone takes seconds,
       so a flat P99 TTFT judges a long-prompt workload by its longest prompts;
    4. no growing queue: ordering finished requests by scheduled send time, the median TTFT
       of the last 10% (at least one request) <= 2 x the median TTFT of the first half
       + 250 ms. A queue that grows through the run shows as the last arrivals waiting
       longest (TTFT rising linearly from ~0 puts the tail at ~4x the first half); the factor
       and slack keep one burst or a handful of long prompts from tripping it.
  ``goodput_rps`` is None when no rate passes; ``monotone`` says whether every lower tested
  rate passed too.
"""
from __future__ import annotations

import json
import lzma
import math
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

# The drift tests live in the package (the simulator judges its points by them too).
from sglang_mux.drift import (DRIFT_FACTOR, DRIFT_SLACK_MS, DRIFT_TAIL, QUEUE_MIN_NEW,  # noqa: F401
                              drift, queue_drift)

DEFAULT_TBT_SLO_MS = 50.0
DEFAULT_TTFT_SLO_MS = 5000.0
PCTS = (50, 90, 99)


def load_jsonl(path: str | Path) -> list[dict]:
    """The records of a JSONL file, or of ``<path>.xz`` where only that is left (results keep their
    per-request records compressed). FileNotFoundError for ``path`` where neither is."""
    path = Path(path)
    xz = path.with_name(path.name + ".xz")
    with (lzma.open(xz, "rt") if not path.exists() and xz.exists() else open(path)) as f:
        return [json.loads(line) for line in f if line.strip()]


def _num(x) -> float | None:
    """JSON-safe float (NaN/inf -> None)."""
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) or math.isinf(x) else round(x, 6)


def _stats(x: Iterable[float], with_max: bool = False) -> dict:
    a = np.asarray(list(x), dtype=float)
    out = {"mean": _num(a.mean()) if len(a) else None}
    for p in PCTS:
        out[f"p{p}"] = _num(np.percentile(a, p)) if len(a) else None
    if with_max:
        out["max"] = _num(a.max()) if len(a) else None
    return out


def _per_token(k: float | None) -> float:
    k = float(k or 0.0)
    if not k >= 0:
        raise ValueError(f"the TTFT SLO's ms per prompt token must be >= 0, got {k}")
    return k


def per_request(records: Sequence[dict], tbt_slo_ms: float = DEFAULT_TBT_SLO_MS,
                ttft_slo_ms: float = DEFAULT_TTFT_SLO_MS, ttft_slo_ms_per_token: float = 0.0) -> pd.DataFrame:
    """One row per record; ``ttft_adjusted_ms`` = TTFT - ``ttft_slo_ms_per_token`` x prompt tokens
    (a record without a prompt count gets no allowance), which the TTFT attainment judges."""
    k = _per_token(ttft_slo_ms_per_token)
    rows = []
    for r in records:
        tok = np.asarray(r.get("tok_ms") or [], dtype=float)
        gaps = np.diff(tok)
        ok = bool(r.get("ok"))
        ttft = tok[0] if len(tok) else np.nan
        send, end = r.get("send"), r.get("end")
        tbt_p99 = float(np.percentile(gaps, 99)) if len(gaps) else np.nan
        prompt = r.get("prompt_tokens")
        adjusted = ttft - k * float(prompt or 0)
        rows.append(dict(
            rid=r.get("rid"), ok=ok, error=r.get("error"), scheduled=r.get("scheduled"),
            send=send, end=end, ttft_ms=ttft,
            ttft_ms_per_token=ttft / prompt if prompt else np.nan, ttft_adjusted_ms=adjusted,
            e2e_ms=(end - send) * 1e3 if ok and send is not None and end is not None else np.nan,
            tpot_ms=(tok[-1] - tok[0]) / (len(tok) - 1) if len(tok) >= 2 else np.nan,
            tbt_p99_ms=tbt_p99, tbt_max_ms=gaps.max() if len(gaps) else np.nan,
            n_gaps=len(gaps), output_tokens=int(r.get("output_tokens") or 0),
            prompt_tokens=prompt, cached_tokens=r.get("cached_tokens"), subset=r.get("subset"),
            lateness_ms=(send - r["scheduled"]) * 1e3
            if send is not None and r.get("scheduled") is not None else np.nan,
            attains=ok and adjusted <= ttft_slo_ms and (not len(gaps) or tbt_p99 <= tbt_slo_ms),
            ttft_attains=ok and adjusted <= ttft_slo_ms,
            tbt_attains=ok and (not len(gaps) or tbt_p99 <= tbt_slo_ms)))
    return pd.DataFrame(rows, columns=[
        "rid", "ok", "error", "scheduled", "send", "end", "ttft_ms", "ttft_ms_per_token",
        "ttft_adjusted_ms", "e2e_ms", "tpot_ms", "tbt_p99_ms", "tbt_max_ms", "n_gaps", "output_tokens",
        "prompt_tokens", "cached_tokens", "subset", "lateness_ms", "attains", "ttft_attains",
        "tbt_attains"])


def tbt_gaps(records: Sequence[dict]) -> np.ndarray:
    """Every TBT gap (ms) of every finished request."""
    parts = [np.diff(np.asarray(r["tok_ms"], float)) for r in records
             if r.get("ok") and len(r.get("tok_ms") or []) > 1]
    return np.concatenate(parts) if parts else np.zeros(0)


def ttft_drift(df: pd.DataFrame) -> dict:
    ok = df[df.ok & df.ttft_ms.notna()].sort_values("scheduled", kind="stable")
    return drift(ok.ttft_ms.to_numpy(float))


def ttft_queue_drift(df: pd.DataFrame) -> dict | None:
    ok = df[df.ok & df.ttft_ms.notna() & df.prompt_tokens.notna()].sort_values("scheduled", kind="stable")
    if ok.empty:
        return None
    new = ok.prompt_tokens.astype(float) - ok.cached_tokens.fillna(0).astype(float)
    return queue_drift(ok.ttft_ms.to_numpy(float), new.to_numpy(float))


STAMP_PARTS = ["ttft_ms", "in_ms", "through_ms", "server_ms", "queue_ms", "to_tm_ms", "to_client_ms", "rest_ms"]


def stamp_parts(records: Sequence[dict], t0_wall: float | None = None) -> pd.DataFrame:
    """A TTFT cut at SGLang's stamps of the request (``bench.client.SERVER_STAMPS``, with
    ``--enable-metrics``), one row per finished request that has the tokenizer manager's receipt:
    ``send`` (s) and the `STAMP_PARTS` (ms; NaN where a stamp, or ``t0_wall``, the client's wall
    clock at send time 0, is missing). ``bench.analysis.ttft_parts`` says what each part is."""
    nan = float("nan")

    def ms(a, b):  # b - a in ms, NaN if either is unknown
        return nan if a is None or b is None else (b - a) * 1e3
    rows = []
    for r in records:
        st, tok = r.get("server") or {}, r.get("tok_ms") or []
        if not (r.get("ok") and tok and "request_received_ts" in st):
            continue
        ttft, got = tok[0], st["request_received_ts"]
        done, sent = st.get("prefill_finished_time"), st.get("response_sent_to_client_ts")
        in_ms = ms(t0_wall + r["send"] if t0_wall is not None else None, got)
        through, server = ms(got, sent), ms(got, done)
        queue = 1e3 * st["queue_time"] if st.get("queue_time") is not None and done is not None else nan
        rows.append(dict(send=r["send"], ttft_ms=ttft, in_ms=in_ms, through_ms=through, server_ms=server,
                         queue_ms=queue, to_tm_ms=ms(done, sent), to_client_ms=ttft - in_ms - through,
                         rest_ms=ttft - server))
    return pd.DataFrame(rows, columns=["send", *STAMP_PARTS])


def ttft_split(records: Sequence[dict]) -> dict | None:
    """P50 and P99 of a point's TTFT in the scheduler (``server_ms``: the tokenizer manager's
    receipt to the end of the request's prefill; ``queue_ms``: its wait for admission) and
    outside it (``rest_ms``: the way in and out, through SGLang's HTTP + tokenizer process).
    None without the scheduler's stamps (older records; ``--tokenizer-worker-num`` > 1)."""
    df = stamp_parts(records).dropna(subset=["server_ms"])
    if df.empty:
        return None
    return {q: {c: _num(df[c].quantile(v)) for c in ("server_ms", "queue_ms", "rest_ms")}
            for q, v in (("p50", 0.5), ("p99", 0.99))}


def by_subset(df: pd.DataFrame) -> dict | None:
    """TTFT and TTFT-per-token percentiles per ``subset`` (None when no record has one)."""
    if df.subset.isna().all():
        return None
    out = {}
    for name, g in df[df.subset.notna()].groupby("subset", sort=True):
        ok = g[g.ok]
        out[str(name)] = {"n": int(len(g)), "n_ok": int(len(ok)),
                          "ttft_ms": _stats(ok.ttft_ms.dropna()),
                          "ttft_ms_per_token": _stats(ok.ttft_ms_per_token.dropna())}
    return out


SHORT_PROMPT_TOKENS = 2048  # a prompt under this is short: who waits behind long ones shows in its TTFT


def ttft_by_length(df: pd.DataFrame) -> dict:
    """TTFT percentiles of finished requests apart for short prompts (< SHORT_PROMPT_TOKENS) and
    long ones: whether short prompts wait behind long ones."""
    ok = df[df.ok & df.ttft_ms.notna() & df.prompt_tokens.notna()]
    short = ok.prompt_tokens.astype(float) < SHORT_PROMPT_TOKENS
    return {"split_tokens": SHORT_PROMPT_TOKENS,
            "short": {"n": int(short.sum()), **_stats(ok.ttft_ms[short])},
            "long": {"n": int((~short).sum()), **_stats(ok.ttft_ms[~short])}}


def summarize(records: Sequence[dict], tbt_slo_ms: float = DEFAULT_TBT_SLO_MS,
              ttft_slo_ms: float = DEFAULT_TTFT_SLO_MS, ttft_slo_ms_per_token: float = 0.0) -> dict:
    """A point's summary. With ``ttft_slo_ms_per_token`` K > 0 it also has
    ``ttft_length_adjusted_ms`` (percentiles of TTFT - K x prompt tokens over finished requests)
    and ``slo.ttft_ms_per_token`` = K, which ``check_point`` judges by."""
    k = _per_token(ttft_slo_ms_per_token)
    df = per_request(records, tbt_slo_ms, ttft_slo_ms, k)
    ok = df[df.ok]
    n = len(df)
    failures: dict[str, int] = {}
    for e in df.error[~df.ok]:
        key = str(e).split(":")[0]
        failures[key] = failures.get(key, 0) + 1
    sends = df.send.dropna()
    makespan = float(ok.end.max() - sends.min()) if len(ok) and len(sends) else float("nan")
    prompt = ok.prompt_tokens.fillna(0).astype(float).sum()
    out_tok = float(ok.output_tokens.sum())
    cached = ok.cached_tokens.dropna().astype(float)
    sched = df.scheduled.dropna().to_numpy(float)
    offered = (len(sched) - 1) / np.ptp(sched) if len(sched) > 1 and np.ptp(sched) > 0 else None
    adjusted = {"ttft_length_adjusted_ms": _stats(ok.ttft_adjusted_ms.dropna())} if k else {}
    return {
        "n": n, "n_ok": int(len(ok)), "n_failed": int(n - len(ok)), "failures": failures,
        "ttft_ms": _stats(ok.ttft_ms.dropna()), **adjusted,
        "ttft_by_length": ttft_by_length(df),
        "ttft_ms_per_token": _stats(ok.ttft_ms_per_token.dropna()),
        "by_subset": by_subset(df),
        "tbt_ms": _stats(tbt_gaps(records), with_max=True),
        "tpot_ms": _stats(ok.tpot_ms.dropna()),
        "e2e_ms": _stats(ok.e2e_ms.dropna()),
        "slo_attainment": _num(df.attains.mean()) if n else None,
        "ttft_attainment": _num(df.ttft_attains.mean()) if n else None,
        "tbt_attainment": _num(df.tbt_attains.mean()) if n else None,
        "output_tokens": int(out_tok), "prompt_tokens": int(prompt),
        "output_tok_s": _num(out_tok / makespan) if makespan > 0 else None,
        "total_tok_s": _num((out_tok + prompt) / makespan) if makespan > 0 else None,
        "req_s": _num(len(ok) / makespan) if makespan > 0 else None,
        "offered_rate": _num(offered), "makespan_s": _num(makespan),
        "cache_hit_rate": _num(cached.sum() / prompt) if len(cached) and prompt else None,
        "send_lateness_ms": _stats(df.lateness_ms.dropna(), with_max=True),
        "ttft_drift": ttft_drift(df),
        "ttft_queue_drift": ttft_queue_drift(df),
        "ttft_split": ttft_split(records),
        "slo": {"tbt_ms": tbt_slo_ms, "ttft_ms": ttft_slo_ms, "ttft_ms_per_token": k},
    }


def summary_per_token(s: dict) -> float:
    """The K a point's summary was judged by (0: a flat TTFT SLO, and summaries older than K)."""
    return float((s.get("slo") or {}).get("ttft_ms_per_token") or 0.0)


def check_point(s: dict, tbt_slo_ms: float = DEFAULT_TBT_SLO_MS,
                ttft_slo_ms: float = DEFAULT_TTFT_SLO_MS,
                ttft_slo_ms_per_token: float | None = None) -> tuple[bool, list[str]]:
    """(passes, reasons it does not) for one rate point's summary. The TTFT SLO is length-aware
    with the K the summary was made with (``summary_per_token``); a different
    ``ttft_slo_ms_per_token`` needs the records (``summarize`` again): ValueError."""
    k = summary_per_token(s)
    if ttft_slo_ms_per_token is not None and _per_token(ttft_slo_ms_per_token) != k:
        raise ValueError(f"this summary's TTFT SLO has {k:g} ms per prompt token, not {ttft_slo_ms_per_token:g}: "
                         "summarize the point's records with that K to judge it so")
    why = []
    if s["n_ok"] == 0:
        why.append("no finished request")
    if s["n_failed"]:
        why.append(f"{s['n_failed']} failed {s['failures']}")
    tbt99 = s["tbt_ms"]["p99"]
    if tbt99 is not None and tbt99 > tbt_slo_ms:
        why.append(f"P99 TBT {tbt99:.1f} ms > {tbt_slo_ms:g}")
    if k:
        adj99 = s["ttft_length_adjusted_ms"]["p99"]
        if adj99 is not None and adj99 > ttft_slo_ms:
            why.append(f"P99 TTFT - {k:g} ms/token x prompt {adj99:.0f} ms > {ttft_slo_ms:g}")
    else:
        ttft99 = s["ttft_ms"]["p99"]
        if ttft99 is not None and ttft99 > ttft_slo_ms:
            why.append(f"P99 TTFT {ttft99:.0f} ms > {ttft_slo_ms:g}")
    # Length-aware: the wait beyond a request's own prefill drifts, not TTFT, which a tail of
    # long prompts doubles with no queue at all.
    d = s.get("ttft_queue_drift") if k and s.get("ttft_queue_drift") else s["ttft_drift"]
    if s["n_ok"] and not d["ok"]:
        n = d.get("tail_requests")  # absent from summaries written before it was recorded
        tail = f"the last {n} requests' median" if n else "last 10% median"
        what = "wait beyond its own prefill" if d is not s["ttft_drift"] else "TTFT"
        why.append(f"{what} drifting up ({tail} {d['tail_median_ms']:.0f} ms > {d['limit_ms']:.0f})")
    return not why, why


def goodput(points: Sequence[dict], tbt_slo_ms: float = DEFAULT_TBT_SLO_MS,
            ttft_slo_ms: float = DEFAULT_TTFT_SLO_MS, ttft_slo_ms_per_token: float | None = None) -> dict:
    """``points``: [{"rate": r, "summary": summarize(...)}, ...] -> goodput and per-rate checks
    (``check_point``: each summary's own K unless ``ttft_slo_ms_per_token`` is given)."""
    checked = []
    for p in sorted(points, key=lambda p: p["rate"]):
        ok, why = check_point(p["summary"], tbt_slo_ms, ttft_slo_ms, ttft_slo_ms_per_token)
        checked.append({"rate": p["rate"], "pass": ok, "reasons": why})
    passing = [c["rate"] for c in checked if c["pass"]]
    best = max(passing) if passing else None
    return {"goodput_rps": best, "tbt_slo_ms": tbt_slo_ms, "ttft_slo_ms": ttft_slo_ms,
            "ttft_slo_ms_per_token": ttft_slo_ms_per_token if ttft_slo_ms_per_token is not None
            else max((summary_per_token(p["summary"]) for p in points), default=0.0),
            "monotone": best is None or all(c["pass"] for c in checked if c["rate"] <= best),
            "points": checked}
