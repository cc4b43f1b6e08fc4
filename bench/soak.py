"""Soak a running server: load for a long time, sample what could creep, lose no request.

    python -m bench.soak --server-url http://127.0.0.1:30000 --server-pid PID --rate 3 \\
        --piece-s 540 --out bench/results/soak_x [--timeline FILE] [--chat-share 0.5]

One invocation is one piece (``--piece-s`` of arrivals, then its requests' tails): a soak of
30 minutes is pieces against one server kept alive between them (started detached, e.g.
``setsid``), each appending to ``samples.jsonl`` and ``pieces.jsonl`` in ``--out``. Start the
next piece (``--piece N``) when the previous one's arrivals end, so the load never dips;
``python -m bench.soak --report OUT`` sums them up (minutes: first start to last end).

Load: the Mooncake conversation trace (Poisson at ``rate × (1 − chat-share)`` req/s; with
``--workload mixed`` MuxWise's mixed traffic instead, half sharegpt, half loogle) and
multi-turn chat sessions (``rate × chat-share`` sessions/s) at once, each piece with its own
salt so the radix cache sees new prompts. Every ``--sample-s`` seconds: GPU memory in use
(nvidia-smi), the server's process tree RSS and open file descriptors (/proc), the timeline
file's size (with its rotated ``.1``), and from its /metrics (with --enable-metrics) the running
and queued requests and the mux's allocator gauges: bytes in use by tensors, bytes cached, and
how often the cache was emptied to retry a cudaMalloc. Every request sent ends as completed or errored in the
client's records (bench/client.py never drops one); ``lost`` counts those that did neither.
"""
from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import numpy as np

from sglang_mux import cli

from . import client, workloads
from sglang_mux import cli_io as _cli_io

SAMPLES, PIECES = "samples.jsonl", "pieces.jsonl"


def proc_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (Linux /proc), those still alive."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        if not Path(f"/proc/{p}").exists():
            continue
        out.append(p)
        for t in Path(f"/proc/{p}/task").glob("*/children"):
            todo += [int(c) for c in t.read_text().split()]
    return out


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def gpu_mem_mib() -> float | None:
    """MiB used on the GPUs this process sees: nvidia-smi ignores CUDA_VISIBLE_DEVICES, and on a
    4-GPU host a soak beside three other cells summed all four (63 GB read as up to 298 GB)."""
    cmd = ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    if visible:
        cmd += ["-i", visible]  # indices or UUIDs, comma-separated: nvidia-smi -i takes both
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
        return sum(float(x) for x in r.stdout.split()) if r.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


SCRAPED = {"sglang:num_running_reqs": "num_running_reqs", "sglang:num_queue_reqs": "num_queue_reqs",
           "sglang_mux:cuda_allocated_bytes": "cuda_allocated_bytes",
           "sglang_mux:cuda_reserved_bytes": "cuda_reserved_bytes",
           "sglang_mux:cuda_alloc_retries": "cuda_alloc_retries",
           "sglang_mux:preemptions_total": "preemptions"}


def server_gauges(url: str) -> dict:
    """From the server's /metrics ({} without --enable-metrics): running and queued requests, and
    the mux's allocator gauges (what nvidia-smi's memory figure is made of)."""
    return parse_gauges(client.scrape_metrics(url, prefix="sglang") or "")


def parse_gauges(text: str) -> dict:
    got = {}
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in SCRAPED:
            key = SCRAPED[name]
            got[key] = got.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
    return got


def sample(url: str, pid: int | None, timeline: Path | None) -> dict:
    s: dict = {"time": time.time(), "gpu_mem_mib": gpu_mem_mib()}
    if pid:
        pids = proc_tree(pid)
        s.update(rss_mib=round(sum(_rss_mib(p) for p in pids), 1),
                 fds=sum(len(os.listdir(f"/proc/{p}/fd")) for p in pids), processes=len(pids))
    if timeline:
        s["timeline_bytes"] = sum(f.stat().st_size for f in (timeline, Path(f"{timeline}.1")) if f.exists())
    s.update(server_gauges(url))
    return s


def outcome(records: list[dict]) -> dict:
    """sent = completed + errored + lost (a record with neither ok nor an error)."""
    ok = sum(1 for r in records if r.get("ok"))
    err = sum(1 for r in records if not r.get("ok") and r.get("error"))
    return {"sent": len(records), "completed": ok, "errored": err, "lost": len(records) - ok - err}


SOAK_WORKLOADS = ("conversation", "mixed")  # what the non-chat share is: the trace (<= 8000 tokens) or
# MuxWise's mixed traffic (half sharegpt, half loogle: prompts up to 81K tokens)


def piece_workloads(rate: float, seconds: float, chat_share: float, piece: int, vocab,
                    think_s: float = 3.0, workload: str = "conversation") -> list:
    salt = f"soak-piece={piece}"
    wls = []
    if chat_share < 1 and workload == "mixed":
        wls.append(workloads.build("mixed", rate=rate * (1 - chat_share), duration_s=seconds, arrival="poisson",
                                   seed=piece, salt=salt, vocab=vocab))
    elif chat_share < 1:
        r = rate * (1 - chat_share)
        wl = workloads.build("conversation", rate=r, duration_s=seconds, arrival="poisson", seed=piece,
                             salt=salt, input_cap=8000, vocab=vocab)
        if wl.options["n"] < (wl.options["requested_n"] or 0):  # its arrivals would stop early
            raise ValueError(f"{seconds:.0f} s at {r:g} conversation req/s needs {wl.options['requested_n']} "
                             f"trace rows, the trace has {wl.options['n']}: use pieces of at most "
                             f"{int(wl.options['n'] / r)} s (or set SGLANG_MUX_TRACES to the full traces)")
        wls.append(wl)
    if chat_share > 0:
        n = max(1, round(rate * chat_share * seconds))
        wls.append(workloads.chat_workload(n_sessions=n, rate=rate * chat_share, seed=piece, salt=salt,
                                           think_s=think_s))
    return wls


def run_piece(url: str, out: Path, *, rate: float, seconds: float, pid: int | None = None,
              timeline: Path | None = None, chat_share: float = 0.5, sample_s: float = 10.0,
              drain_s: float = 60.0, vocab=workloads.VOCAB, think_s: float = 3.0, piece: int | None = None,
              workload: str = "conversation") -> dict:
    out.mkdir(parents=True, exist_ok=True)
    if piece is None:
        piece = sum(1 for _ in (out / PIECES).open()) if (out / PIECES).exists() else 0
    wls = piece_workloads(rate, seconds, chat_share, piece, vocab, think_s, workload)
    stop = threading.Event()

    def sampler():
        with (out / SAMPLES).open("a") as f:
            while True:
                f.write(json.dumps({"piece": piece, **sample(url, pid, timeline)}) + "\n")
                f.flush()
                if stop.wait(sample_s):
                    return

    results: list = [None] * len(wls)

    def load(i, wl):
        results[i] = client.run_workload(url, wl, wl.span_s + drain_s, progress=False)[0]

    t0 = time.time()
    th_s = threading.Thread(target=sampler, daemon=True)
    th_s.start()
    loads = [threading.Thread(target=load, args=(i, wl)) for i, wl in enumerate(wls)]
    for t in loads:
        t.start()
    for t in loads:
        t.join()
    stop.set()
    th_s.join()
    recs = [r for rs in results for r in (rs or [])]
    rec = {"piece": piece, "start": t0, "wall_s": round(time.time() - t0, 1), "arrival_s": seconds, "rate": rate,
           "chat_share": chat_share, "workloads": [wl.options for wl in wls], **outcome(recs),
           "errors": sorted({str(r.get("error")).split(":")[0] for r in recs if r.get("error")})}
    with (out / PIECES).open("a") as f:
        f.write(json.dumps(rec) + "\n")
    return rec


def _slope_per_min(ts, ys) -> float | None:
    pts = [(t, y) for t, y in zip(ts, ys) if y is not None]
    if len(pts) < 3:
        return None
    t, y = np.array(pts, dtype=float).T
    return float(np.polyfit((t - t[0]) / 60.0, y, 1)[0])


# A memory series has settled once it stays within this share of its last value: a plateau
# after an allocator's cache refills reads as growth on a whole-run slope, and is not a leak.
SETTLE_SHARE = 0.005
SETTLING = ("gpu_mem_mib", "rss_mib", "cuda_allocated_bytes", "cuda_reserved_bytes")


def _settled_min(ts, ys, t0: float) -> float | None:
    """Minutes from ``t0`` from which every sample stays within SETTLE_SHARE of the last one."""
    pts = [(t, y) for t, y in zip(ts, ys) if y is not None]
    if not pts:
        return None
    last, start = pts[-1][1], pts[-1][0]
    for t, y in reversed(pts):
        if abs(y - last) > SETTLE_SHARE * abs(last):
            break
        start = t
    return round((start - t0) / 60, 1)


def report(out: Path, warmup_s: float = 60.0) -> dict:
    """Totals over the pieces; each sampled quantity's range and linear slope per minute after
    the first ``warmup_s`` of the soak (flat memory: a slope near 0); for memory also its last
    value and the minute from which it stayed within SETTLE_SHARE of it (``settled_from_min``)."""
    pieces = [json.loads(x) for x in (out / PIECES).read_text().splitlines() if x.strip()]
    samples = [json.loads(x) for x in (out / SAMPLES).read_text().splitlines() if x.strip()]
    t0 = min((s["time"] for s in samples), default=0.0)
    late = [s for s in samples if s["time"] - t0 >= warmup_s]
    res = {k: sum(p[k] for p in pieces) for k in ("sent", "completed", "errored", "lost")}
    # pieces may overlap (the next one starts when this one's arrivals end, not its tail)
    span_s = max((p["start"] + p["wall_s"] for p in pieces), default=0.0) - min((p["start"] for p in pieces), default=0.0)
    res.update(pieces=len(pieces), minutes=round(span_s / 60, 1),
               arrival_minutes=round(sum(p.get("arrival_s", 0.0) for p in pieces) / 60, 1), samples=len(samples))
    ts = [s["time"] for s in late]
    for key in ("gpu_mem_mib", "rss_mib", "fds", "timeline_bytes", *SCRAPED.values()):
        ys = [s.get(key) for s in late]
        vals = [y for y in ys if y is not None]
        if vals:
            res[key] = {"min": min(vals), "max": max(vals), "slope_per_min": _slope_per_min(ts, ys)}
            if key in SETTLING:
                res[key].update(last=vals[-1], settled_from_min=_settled_min(ts, ys, t0))
    return res


def main(argv: list[str] | None = None) -> int:
    pos = cli.positive(float)
    ap = cli.ArgumentParser(prog="python -m bench.soak", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="the soak's directory (pieces and samples go there)")
    ap.add_argument("--report", action="store_true", help="only sum up the pieces in --out")
    ap.add_argument("--server-url", default="http://127.0.0.1:30000", help="the server under test")
    ap.add_argument("--server-pid", type=cli.positive(int), default=None, help="the server's main process (RSS, fds)")
    ap.add_argument("--timeline", type=Path, default=None, help="the server's --mux-timeline file")
    ap.add_argument("--rate", type=pos, default=3.0, help="requests + sessions per second")
    ap.add_argument("--chat-share", type=_cli_io.share, default=0.5, help="share of the rate that is chat sessions, [0, 1]")
    ap.add_argument("--workload", choices=SOAK_WORKLOADS, default="conversation",
                    help="the rest of the rate: the conversation trace (<= 8000 tokens) or the mixed workload "
                         "(half sharegpt, half loogle)")
    ap.add_argument("--piece-s", type=pos, default=480.0, help="arrival span of this piece")
    ap.add_argument("--drain-s", type=cli.positive(float, allow_zero=True), default=60.0, help="wait for answers after the last arrival")
    ap.add_argument("--piece", type=cli.positive(int, allow_zero=True), default=None,
                    help="this piece's number (its seed and salt); default: the pieces already in --out")
    ap.add_argument("--sample-s", type=pos, default=10.0, help="seconds between samples of memory and fds")
    ap.add_argument("--warmup-s", type=cli.positive(float, allow_zero=True), default=60.0, help="samples left out of the slopes")
    ap.add_argument("--vocab-size", type=cli.positive(int), default=128256, help="the model's vocabulary size")
    a = ap.parse_args(argv)
    if a.report:
        if not (a.out / PIECES).is_file():
            raise cli.UsageError(f"{a.out} holds no {PIECES}: give the --out of a soak that ran a piece")
        _cli_io.read_jsonl(a.out / PIECES, f"soak {PIECES}", need=("start", "wall_s", "sent", "completed",
                                                                    "errored", "lost"))
        if not (a.out / SAMPLES).is_file():
            raise cli.UsageError(f"{a.out} holds no {SAMPLES}: give the --out of a soak that ran a piece")
    else:
        try:
            piece_workloads(a.rate, a.piece_s, a.chat_share, 0, workloads.token_range(a.vocab_size),
                            workload=a.workload)
        except ValueError as e:
            ap.error(str(e))
        if not client.health(a.server_url):
            ap.error(f"no server answers /health at {a.server_url}: start it first (detached, so it outlives a piece)")
        rec = run_piece(a.server_url, a.out, rate=a.rate, seconds=a.piece_s, pid=a.server_pid,
                        timeline=a.timeline, chat_share=a.chat_share, sample_s=a.sample_s, drain_s=a.drain_s,
                        vocab=workloads.token_range(a.vocab_size), piece=a.piece, workload=a.workload)
        print(json.dumps({k: rec[k] for k in ("piece", "sent", "completed", "errored", "lost", "errors")}))
    print(json.dumps(report(a.out, a.warmup_s), indent=1))
    return 0


if __name__ == "__main__":
    cli.run(main)
