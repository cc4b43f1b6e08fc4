"""Token-for-token comparison of the multiplexed server against plain SGLang, plus bad input.

    python tests/gpu/e2e_correctness.py --model-dir /tmp/tiny --out results.json

Workload (same schedule on both servers): single prompts of 16..32K tokens and multi-turn
sessions whose turns extend the previous prompt + answer (radix-cache hits), sent with staggered
starts so prefills overlap running decodes. Greedy decoding, ignore_eos. For every divergence
the top-2 logprob gap at the first differing position is reported: a gap at bf16 rounding level
means the two kernels' numerics (e.g. a partition-dependent split of attention) broke a near-tie.

``--burst`` adds a preemption scenario: long prompts, each followed by short ones while its
prefill runs (and a second one whose long prompts are over the mux server's layer-wise cap, where
a short prompt yields into the fused chunks: `burst`); with a tight length-aware TTFT SLO for the mux server (measured on H200 with
``--mux-args "--mux-ttft-slo-ms 20 --mux-ttft-ms-per-token 0.1" --common-args "--cuda-graph-max-bs
16"``: one preemption) the dispatcher preempts the long batch, which must resume with its KV and
give the same tokens. The mux server's timeline counts the preemptions, and its
``/metrics`` page (``--enable-metrics`` is added) is kept in the result.

``--control-args`` runs the same schedule on a third server, plain SGLang with those arguments
(e.g. ``--max-running-requests 8``: other batches), and compares it with the reference as the
mux is compared (``control``): whether plain SGLang alone breaks near-ties as often when its
batches differ, which is what a mux divergence at a near-tie would be.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import Server, post, tail  # noqa: E402

COMMON = ["--sampling-backend", "pytorch", "--grammar-backend", "none",
          "--mem-fraction-static", "0.75", "--disable-overlap-schedule", "--chunked-prefill-size", "-1"]


def workload(vocab: int, seed: int = 0):
    rng = random.Random(seed)
    singles = []
    lengths = [int(16 * (2048 ** (i / 39))) for i in range(40)]  # 16 .. 32768, geometric
    for i, n in enumerate(lengths):
        ids = [rng.randrange(300, vocab - 300) for _ in range(min(n, 32768))]
        singles.append({"name": f"single{i}_{len(ids)}", "ids": ids, "max_new": 256 if i % 8 == 0 else 24,
                        "delay": 0.15 * i})
    sessions = []
    for s in range(6):
        base = [rng.randrange(300, vocab - 300) for _ in range(rng.choice([256, 1024, 4096]))]
        turns = [[rng.randrange(300, vocab - 300) for _ in range(rng.randrange(32, 512))] for _ in range(4)]
        sessions.append({"name": f"session{s}", "base": base, "turns": turns, "delay": 0.4 * s})
    return singles, sessions


# The second burst's prompts are longer than the layer-wise cap token_check.sh gives the mux server
# (--mux-layerwise-max-tokens 35000), so they run as fused chunks and the short ones behind them
# yield; the first burst's (30K) stay layer-wise and are preempted. Both under the tiny model's
# 40,960 positions. A 30K-token layer-wise prefill of the tiny model took ~20 ms on an H100
# (2026-12-06: short prompts sent 30 ms after it found it done, no preemption), so each of the
# first burst's long prompts comes alone on an idle server, its first short one 8 ms behind it.
FUSED_LONG_TOKENS = 38000
FIRST_SHORT_S = 0.008


def burst(vocab: int, start_s: float, seed: int = 1):
    """3 long prompts 0.5 s apart, each followed by 4 short ones 25 ms apart from FIRST_SHORT_S
    (while its layer-wise prefill runs); 2 s after the first, 2 prompts of FUSED_LONG_TOKENS at
    once and 12 short ones 25 ms apart from 30 ms."""
    rng = random.Random(seed)

    def ids(n):
        return [rng.randrange(300, vocab - 300) for _ in range(n)]

    out = []
    for i in range(3):
        at = start_s + 0.5 * i
        out.append({"name": f"burst_long{i}", "ids": ids(30000), "max_new": 16, "delay": at})
        out += [{"name": f"burst_short{4 * i + j}", "ids": ids(64 + 16 * (4 * i + j)), "max_new": 16,
                 "delay": at + FIRST_SHORT_S + 0.025 * j} for j in range(4)]
    at = start_s + 2.0
    out += [{"name": f"burst_fused_long{i}", "ids": ids(FUSED_LONG_TOKENS), "max_new": 16, "delay": at}
            for i in range(2)]
    out += [{"name": f"burst_fused_short{i}", "ids": ids(64 + 16 * i), "max_new": 16, "delay": at + 0.03 + 0.025 * i}
            for i in range(12)]
    return out


LOGPROBS = True  # --no-logprobs: SGLang mixes a chunk with the decode rows only when no request asks them
# The tiny model answers every request of the workload within seconds: a request unanswered this long
# means the server hung (a TP-2 server did, session 39), and the check stops instead of waiting out its budget.
REQUEST_TIMEOUT_S = 120.0


def generate(url, ids, max_new, logprobs=None):
    """``logprobs``: ask the top 2 at each output position (None: as --no-logprobs says)."""
    want = LOGPROBS if logprobs is None else logprobs
    lp = {"return_logprob": True, "top_logprobs_num": 2, "logprob_start_len": -1} if want else {}
    return post(url + "/generate", {
        "input_ids": ids,
        "sampling_params": {"temperature": 0, "max_new_tokens": max_new, "ignore_eos": True}, **lp,
    }, timeout=REQUEST_TIMEOUT_S)


def run_workload(url, singles, sessions, prompts=None):
    """Every request's response by name (and, into ``prompts``, the prompt it was sent)."""
    out = {}
    prompts = {} if prompts is None else prompts
    lock = threading.Lock()

    def one(spec):
        time.sleep(spec["delay"])
        r = generate(url, spec["ids"], spec["max_new"])
        with lock:
            out[spec["name"]], prompts[spec["name"]] = r, spec["ids"]

    def session(spec):
        time.sleep(spec["delay"])
        prompt = list(spec["base"])
        for k, t in enumerate(spec["turns"]):
            prompt = prompt + t
            r = generate(url, prompt, 32)
            with lock:
                out[f'{spec["name"]}_turn{k}'], prompts[f'{spec["name"]}_turn{k}'] = r, list(prompt)
            if r.get("error") == "timeout":
                break  # a hung server: its next turn would wait as long again
            if "output_ids" in r:
                prompt = prompt + r["output_ids"]

    threads = [threading.Thread(target=one, args=(s,)) for s in singles]
    threads += [threading.Thread(target=session, args=(s,)) for s in sessions]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    hung = sorted(k for k, r in out.items() if r.get("error") == "timeout")
    if hung:
        raise RuntimeError(f"the server stopped answering: {len(hung)} requests unanswered after "
                           f"{REQUEST_TIMEOUT_S:g} s (a hang?), first {hung[:3]}")
    return out, time.time() - t0


def probe_gaps(url, prompts, outs, ref) -> dict:
    """Without logprobs in the workload (--no-logprobs), the top-2 gap at each divergence from the
    reference, asked afterwards of the reference server alone: its prompt and its output up to the
    divergence, one token, logprobs on. {name: gap}."""
    gaps = {}
    for name, r in ref.items():
        ia, ib = (outs.get(name) or {}).get("output_ids"), r.get("output_ids")
        div = next((i for i, (x, y) in enumerate(zip(ia or [], ib or [])) if x != y), None)
        if div is not None and name in prompts:
            gaps[name] = top2_gap(generate(url, prompts[name] + ib[:div], 1, logprobs=True), 0)
    return gaps


def top2_gap(resp, pos):
    try:
        tops = resp["meta_info"]["output_top_logprobs"][pos]
        return abs(tops[0][0] - tops[1][0])
    except Exception:
        return None


def compare(a: dict, b: dict):
    rows = []
    for name in sorted(a):
        ra, rb = a[name], b.get(name, {})
        ia, ib = ra.get("output_ids"), rb.get("output_ids")
        row = {"name": name, "ok_mux": ia is not None, "ok_ref": ib is not None,
               "cached_tokens": (ra.get("meta_info") or {}).get("cached_tokens"),
               "prompt_tokens": (ra.get("meta_info") or {}).get("prompt_tokens")}
        if ia is not None and ib is not None:
            div = next((i for i, (x, y) in enumerate(zip(ia, ib)) if x != y), None)
            row["identical"] = ia == ib
            if div is not None:
                row["first_divergence"] = div
                row["top2_gap_mux"] = top2_gap(ra, div)
                row["top2_gap_ref"] = top2_gap(rb, div)
        rows.append(row)
    return rows


def with_probed_gaps(rows, gaps: dict):
    """Fill the reference's top-2 gap at each divergence from ``probe_gaps`` where the workload
    itself asked no logprobs."""
    for r in rows:
        if r.get("top2_gap_ref") is None and r["name"] in gaps:
            r["top2_gap_ref"] = gaps[r["name"]]
    return rows


def agreement(rows) -> dict:
    """How far the first server of ``compare`` agrees with the reference: requests, identical
    outputs, its failed requests, and the largest top-2 logprob gap where outputs diverge."""
    gaps = [r["top2_gap_ref"] for r in rows if r.get("top2_gap_ref") is not None]
    return {"n_requests": len(rows), "n_identical": sum(1 for r in rows if r.get("identical")),
            "n_failed": sum(1 for r in rows if not r["ok_mux"]),
            "max_top2_gap_at_divergence": max(gaps) if gaps else None}


def bad_input_checks(url, vocab, ctx_len):
    res = {}
    r = generate(url, [500] * (ctx_len + 10), 8)
    res["too_long_prompt"] = {"got_error": "error" in r or "output_ids" not in r, "resp": str(r)[:300]}
    # A client that disconnects mid-stream: read one chunk, drop the connection.
    import http.client

    conn = http.client.HTTPConnection(url.split("//")[1].split(":")[0], int(url.rsplit(":", 1)[1]), timeout=60)
    body = json.dumps({"input_ids": [400] * 64, "stream": True,
                       "sampling_params": {"max_new_tokens": 2000, "ignore_eos": True, "temperature": 0}})
    conn.request("POST", "/generate", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    first = resp.readline()
    conn.close()
    time.sleep(1.0)
    after = generate(url, [600] * 100, 8)
    res["disconnect_mid_stream"] = {"first_chunk": first[:80].decode(errors="replace"),
                                    "server_ok_after": "output_ids" in after}
    return res


def scrape_mux_metrics(url: str) -> list[str]:
    """The sglang_mux sample lines of /metrics (bench.client's scrape, HELP/TYPE lines left out)."""
    from bench.client import scrape_metrics

    page = scrape_metrics(url)
    if page is None:
        return ["error: no /metrics page (the mux server is started with --enable-metrics)"]
    return [ln for ln in page.splitlines() if not ln.startswith("#")]


def count_preemptions(timeline: str) -> int | None:
    """Preempting decisions in the whole timeline file (bench.run's count over all its bytes)."""
    from pathlib import Path

    from bench.run import count_preemptions as count

    p = Path(timeline)
    return count(p, [0, p.stat().st_size]) if p.exists() else None


def count_fused(timeline: str) -> dict | None:
    """Fused iterations in the mux timeline: all, those with decode rows mixed in, the yields
    (a chunked prompt sitting out an iteration for whole waiting prompts, "yield+fused") and the
    parks (a chunked prompt parked for the queue's head, "park+fused")."""
    if not os.path.exists(timeline):
        return None
    rows = [json.loads(line) for line in open(timeline) if 'fused"' in line]
    fused = [r for r in rows if r.get("reason") == "fused"]
    return {"n": len(fused), "with_decode_rows": sum(1 for r in fused if r.get("decode_bs", 0) > 0),
            "yields": sum(1 for r in rows if r.get("reason") == "yield+fused"),
            "parks": sum(1 for r in rows if r.get("reason") == "park+fused")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--logdir", default="/tmp")
    ap.add_argument("--port", type=int, default=31000)
    ap.add_argument("--burst", action="store_true", help="add the preemption burst (module docstring)")
    ap.add_argument("--mux-args", default="", help="extra arguments for the mux server only")
    ap.add_argument("--common-args", default="", help="extra arguments for both servers (e.g. --cuda-graph-max-bs 16)")
    ap.add_argument("--control-args", default=None,
                    help="also run plain SGLang with these arguments and compare it with the reference (docstring)")
    ap.add_argument("--attention-backend", default=None,
                    help="both servers' backend (default: SGLang's own, FA3 on H100/H200; the mux log names it)")
    ap.add_argument("--no-logprobs", action="store_true",
                    help="ask no logprobs (no top-2 gaps at divergences): with --mux-policy hybrid the fused "
                         "iterations then mix decode rows into the prompt chunk, as SGLang does only without them")
    args = ap.parse_args()
    # a run whose --out folder did not exist lost its result after the servers had run
    os.makedirs(args.logdir, exist_ok=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    global LOGPROBS
    LOGPROBS = not args.no_logprobs
    cfg = json.load(open(os.path.join(args.model_dir, "config.json")))
    vocab = cfg["vocab_size"]
    singles, sessions = workload(vocab)
    if args.burst:
        singles += burst(vocab, start_s=0.15 * len(singles) + 1.0)
    backend = ["--attention-backend", args.attention_backend] if args.attention_backend else []
    base = ["--model-path", args.model_dir] + COMMON + backend + args.common_args.split()
    timeline = os.path.join(args.logdir, "mux_timeline.jsonl")
    if os.path.exists(timeline):
        os.remove(timeline)
    mux_extra = args.mux_args.split() + ["--mux-timeline", timeline, "--enable-metrics"]
    import shlex
    import subprocess

    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    result = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "device": gpu,
              "command": shlex.join(["python", *sys.argv])}

    # Invalid mux arguments are rejected before anything starts.
    p = subprocess.run([sys.executable, "-m", "sglang_mux.launch_server", "--model-path", args.model_dir,
                        "--mux-tbt-slo-ms", "-5"], capture_output=True, text=True, timeout=120)
    result["invalid_mux_arg"] = {"returncode": p.returncode, "stderr_tail": p.stderr.strip()[-300:]}
    p = subprocess.run([sys.executable, "-m", "sglang_mux.launch_server", "--model-path", args.model_dir,
                        "--enable-mixed-chunk", "--chunked-prefill-size", "512"], capture_output=True, text=True, timeout=120)
    result["incompatible_sglang_arg"] = {"returncode": p.returncode, "stderr_tail": p.stderr.strip()[-300:]}

    outs, prompts, gaps = {}, {}, {}
    servers = [("mux", True, mux_extra)]
    if args.control_args is not None:
        servers.append(("control", False, args.control_args.split()))
    servers.append(("ref", False, []))  # last: divergences are probed on it while it is up
    for label, mux, extra in servers:
        srv = Server(base + extra, args.port,
                     os.path.join(args.logdir, f"server_{label}.log"), mux=mux)
        try:
            result[f"{label}_start_s"] = round(srv.start(), 1)
            prompts[label] = {}
            outs[label], result[f"{label}_wall_s"] = run_workload(srv.url, singles, sessions, prompts[label])
            if label == "ref" and not LOGPROBS:
                gaps = {other: probe_gaps(srv.url, prompts["ref"], outs[other], outs["ref"])
                        for other in ("mux", "control") if other in outs}
            if mux:
                result["mux_metrics"] = scrape_mux_metrics(srv.url)
                result["bad_input"] = bad_input_checks(srv.url, vocab, cfg.get("max_position_embeddings", 40960))
                result["mux_log_tail"] = tail(srv.log_path, 15)
                with open(srv.log_path, errors="replace") as f:  # what the server says it runs
                    said = re.search(r"sglang_mux: .*attention backend (\S+),.*estimator: (.*)", f.read())
                result["mux_attention_backend"], result["mux_estimator"] = said.groups() if said else (None, None)
        except Exception as e:
            result[f"{label}_error"] = str(e)[-3000:]
            print(result[f"{label}_error"], flush=True)
        finally:
            srv.stop()
        if label == "mux" and "mux" not in outs:
            break  # nothing to compare the reference with: save the device time
    if "mux" in outs and "ref" in outs:
        rows = with_probed_gaps(compare(outs["mux"], outs["ref"]), gaps.get("mux", {}))
        result["rows"] = rows
        a = agreement(rows)
        result.update(n_requests=a["n_requests"], n_identical=a["n_identical"], n_failed_mux=a["n_failed"],
                      max_top2_gap_at_divergence=a["max_top2_gap_at_divergence"])
        result["n_cache_hits"] = sum(1 for r in rows if (r.get("cached_tokens") or 0) > 0)
        result["preemptions"] = count_preemptions(timeline)
        result["fused_iterations"] = count_fused(timeline)
        burst_rows = [r for r in rows if r["name"].startswith("burst_")]
        if burst_rows:
            result["burst"] = {"n": len(burst_rows), "identical": sum(1 for r in burst_rows if r.get("identical"))}
    if "control" in outs and "ref" in outs:
        rows = with_probed_gaps(compare(outs["control"], outs["ref"]),  # (its "mux" columns are the control's)
                                gaps.get("control", {}))
        result["control"] = {"args": args.control_args, **agreement(rows),
                             "divergent": [r for r in rows if r.get("identical") is False]}
    json.dump(result, open(args.out, "w"), indent=1)
    print(json.dumps({k: v for k, v in result.items() if k not in ("rows", "mux_log_tail")}, indent=1))


if __name__ == "__main__":
    main()
