"""Sweep systems x request rates; per-request JSONL, goodput summary. Resumable.

    python -m bench.run --systems mux,sglang,sglang-chunked-512 --workload conversation \\
        --rates 0.5,1,2 --duration-s 120 --out bench/results/<run>/ --time-budget-s 540

For each system (``bench.systems``): start the server (own process group, log in
``<out>/<system>.log``), wait for ``/health`` (``--startup-timeout-s``), send ``--warmup``
short requests, then for each rate (ascending): ``/flush_cache``, replay the workload of that
rate (``bench.workloads.build``: round(rate x duration) requests, each point salted so it
cannot reuse the previous point's cache), write ``<system>__<rate>.jsonl`` (one record per
request, written atomically) and ``<system>__<rate>.meta.json``; finally stop the server
(SIGTERM to the group, SIGKILL after 20 s). A server that does not come up (exits, no
/health in time, or fails warmup -- e.g. ``sglang-pdmux``) is recorded in
``<system>__start.json`` and the sweep goes on.

Resumable: a (system, rate) whose JSONL exists is skipped; a recorded failed start is not
retried unless ``--retry-failed-start``. ``--time-budget-s`` never starts a server or a point
that would not fit (server start estimate + point cost + stop), where a point costs its
arrival span + ``--drain-s`` (the client's global deadline) + 15 s, so a sweep can run in
pieces of <= 9 minutes. By default a system's higher rates are skipped once a rate fails the
goodput check (the paper stops there too; ``--no-stop-on-fail`` sweeps all).
``summary.json`` is rebuilt each time from ALL JSONL present in ``--out``.

``--server-url`` benches an already running server (no start/stop; ``--systems`` is a label).

``--ttft-slo-ms-per-token K`` makes the goodput check's TTFT SLO length-aware: a point passes its
TTFT part when the P99 over requests of ``TTFT - K x prompt tokens`` is <= ``--ttft-slo-ms``
(``bench.metrics``; ``summary.json`` -> ``slo.ttft_ms_per_token``). It judges; it changes no server.

``--mux-ttft-ms-per-token K`` gives every mux system (``mux``, ``mux-fixed-<D>``,
``mux-nopreempt``) the length-aware TTFT SLO ``S + K x prompt tokens`` that preemption decides
on (default: the goodput check's K, so a server preempts for the SLO it is judged by; K = 0
never preempts), where S is ``--mux-ttft-slo-ms`` (default: ``--ttft-slo-ms``; set it apart to
tighten the servers' SLO without changing the goodput check's). ``summary.json`` records both options (``mux_ttft_slo_ms``,
``mux_ttft_ms_per_token``), each mux point's effective settings read from its server command
(``mux``: ttft_slo_ms, ttft_ms_per_token, preemption) and the preemptions it fired
(``preemptions``: ``"preempt":true`` decisions written to ``<system>.timeline.jsonl`` while the
point ran; the meta file keeps the byte range as ``timeline_bytes``).
"""
from __future__ import annotations

import argparse
import ctypes
import datetime as dt
import json
import lzma
import math
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import numpy as np

from sglang_mux import cli
from sglang_mux.drift import LENGTH_AWARE_MIN_REQUESTS
from sglang_mux.loop_clock import cpu_ticks

from . import client, metrics, proc_cpu, report, search, systems, workloads
from sglang_mux import cli_io as _cli_io

ROOT = Path(__file__).resolve().parent.parent
SHIPPED_TOKENIZER = ROOT / "sglang_mux/data/tokenizer"
POINT_OVERHEAD_S = 15.0     # flush + writing files
STOP_S = 25.0               # SIGTERM grace + SIGKILL
POINT_RE = re.compile(r"^(?P<system>.+?)__(?P<rate>[0-9.]+(?:e[+-]?\d+)?)\.jsonl$")


def log(msg: str) -> None:
    print(f"[bench.run {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def fmt_rate(r: float) -> str:
    return f"{r:g}"


def point_file(out: Path, system: str, rate: float, suffix: str = ".jsonl") -> Path:
    return out / f"{system}__{fmt_rate(rate)}{suffix}"


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_json(path: Path, obj) -> None:
    write_atomic(path, json.dumps(obj, indent=1, default=str) + "\n")


def read_json(path: Path):
    """The JSON at ``path``, or at ``<path>.xz`` as results are kept; None if neither exists."""
    if path.exists():
        return json.loads(path.read_text())
    xz = path.with_name(path.name + ".xz")
    return json.loads(lzma.decompress(xz.read_bytes())) if xz.exists() else None


def smi_command(field: str) -> list[str]:
    """``nvidia-smi --query-gpu=FIELD`` for the GPUs this process sees: a cell run on one GPU of a
    multi-GPU host (``CUDA_VISIBLE_DEVICES``) names that GPU alone."""
    cmd = ["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader"]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    if visible:
        cmd += ["-i", visible]
    return cmd


def device_name() -> str | None:
    try:
        out = subprocess.run(smi_command("name"),
                             capture_output=True, text=True, timeout=15)
        names = [x.strip() for x in out.stdout.splitlines() if x.strip()]
        return ", ".join(names) if out.returncode == 0 and names else None
    except (OSError, subprocess.SubprocessError):
        return None


def host_hardware() -> dict:
    """Which GPU(s) and CPU this host has: the same GPU type moved a P99 TBT by several ms from
    one host to the next (bench/results/tbt_tail_ab_h100_s19), so a run names its own."""
    uuids: list[str] = []
    try:
        out = subprocess.run(smi_command("uuid"),
                             capture_output=True, text=True, timeout=15)
        uuids = [x.strip() for x in out.stdout.splitlines() if x.strip()] if out.returncode == 0 else []
    except (OSError, subprocess.SubprocessError):
        pass
    cpu = None
    try:
        cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                    if ln.startswith("model name")), None)
    except OSError:
        pass
    # The CPUs this run and its servers may use (a cell's share of a multi-GPU host, plans/per_gpu.sh):
    # four cells on one 4 x H100 host slowed SGLang's launches 38 % (results/profile_s45_2026-11-27).
    from bench.cpu_split import format_list
    return {"gpu_uuids": uuids, "cpu_model": cpu, "cpus": os.cpu_count(),
            "cpus_allowed": format_list(sorted(os.sched_getaffinity(0)))}


def host_cpu(before: list[int] | None, after: list[int] | None) -> dict | None:
    """What the host's CPUs did over a point, from two ``loop_clock.cpu_ticks`` readings: the
    share busy (user, nice, system, irq, softirq) and the VM's steal, in ms summed over all vCPUs and as a share of all their time. The same
    system's P99 TBT differs by several ms from one VM to the next; this says whether the VM's
    host took CPU time from it."""
    if not before or not after or len(before) < 8 or len(after) < 8:
        return None
    d = [b - a for a, b in zip(before[:8], after[:8])]
    total = sum(d)
    if total <= 0:
        return None
    tick_ms = 1000.0 / os.sysconf("SC_CLK_TCK")
    busy = d[0] + d[1] + d[2] + d[5] + d[6]
    return {"busy_share": round(busy / total, 4), "steal_share": round(d[7] / total, 5),
            "steal_ms": round(d[7] * tick_ms, 1)}


def point_proc_cpu(before: tuple, server_pid: int | None, wall_s: float) -> dict:
    """CPU cores kept busy over a point (``before``: `proc_cpu.snapshot` of the server's session and
    ``os.times()`` at its start): each server process by name (`proc_cpu.busy`; none for a server
    this run did not start) and, as ``client``, this runner with its client processes (those the
    point has joined)."""
    snap, t0 = before
    t1 = os.times()
    client = (t1.user + t1.system + t1.children_user + t1.children_system
              - t0.user - t0.system - t0.children_user - t0.children_system)
    after = proc_cpu.snapshot(server_pid) if server_pid else {}
    return {**proc_cpu.busy(snap, after, wall_s),
            "client": round(client / wall_s, 3) if wall_s > 0 else None}


def _die_with_parent() -> None:
    """Child side of Popen: SIGKILL the server if this runner dies (even by SIGKILL)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class Budget:
    def __init__(self, total_s: float | None):
        self.t0, self.total = time.monotonic(), total_s

    def left(self) -> float:
        return math.inf if self.total is None else self.total - (time.monotonic() - self.t0)

    def fits(self, cost_s: float) -> bool:
        return cost_s <= self.left()


def _session_of(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:
        return None


def port_answers(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts TCP connections on ``host:port``."""
    with socket.socket() as sk:
        sk.settimeout(1.0)
        return sk.connect_ex((host, port)) == 0


def listener_pids(port: int) -> set[int] | None:
    """The processes holding a TCP socket that listens on ``port`` (Linux /proc); None where /proc
    cannot tell (another OS), so callers then trust /health alone."""
    inodes = set()
    tables = [Path(t) for t in ("/proc/net/tcp", "/proc/net/tcp6") if Path(t).exists()]
    if not tables:
        return None
    for table in tables:
        for line in table.read_text().splitlines()[1:]:
            f = line.split()  # sl local_address rem_address st ... inode
            if f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                inodes.add(f"socket:[{f[9]}]")
    pids = set()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if any(os.readlink(fd) in inodes for fd in (d / "fd").iterdir()):
                pids.add(int(d.name))
        except OSError:  # gone, or not ours to read
            continue
    return pids


class Server:
    """One server subprocess in its own process group."""

    def __init__(self, cmd: list[str], log_path: Path, url: str):
        self.cmd, self.log_path, self.url = cmd, log_path, url
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        """Raises UsageError when something already listens on the server's port: the client would
        measure that server instead (session 38 measured a leftover tiny model so)."""
        port = urllib.parse.urlsplit(self.url).port
        if port is not None and port_answers(port):
            raise cli.UsageError(f"port {port} already has a server listening (left from an earlier run?): "
                                 f"stop it, or give --port another one")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
        with open(self.log_path, "ab") as f:
            f.write(f"\n===== {dt.datetime.now().isoformat()} {shlex.join(self.cmd)}\n".encode())
            self.proc = subprocess.Popen(self.cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT,
                                         env=env, start_new_session=True,
                                         preexec_fn=_die_with_parent)

    def wait_healthy(self, timeout_s: float) -> tuple[bool, str]:
        t_end = time.monotonic() + max(0.0, timeout_s)
        while time.monotonic() < t_end:
            if self.proc.poll() is not None:
                return False, f"exited with code {self.proc.returncode} before /health"
            if client.health(self.url, timeout=5.0):
                stranger = self._stranger_on_port()
                if stranger:
                    return False, stranger
                return True, "ok"
            time.sleep(1.0)
        return False, f"no /health within {timeout_s:.0f} s"

    def _stranger_on_port(self) -> str:
        """Why /health's answer is not this server's, or ''. Two runs started together on one port
        both pass start()'s check; the first server up answers both clients (session 47)."""
        url = urllib.parse.urlsplit(self.url)
        if url.port is None or url.hostname not in ("127.0.0.1", "localhost"):
            return ""
        port, pids = url.port, listener_pids(url.port)
        if not pids or any(_session_of(p) == self.proc.pid for p in pids):  # none readable: trust /health
            return ""
        return (f"port {port} is answered by process {min(pids)}, not by the server this run started: "
                "another run on the same port? give each run its own --port")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None and not self._group_alive():
            return
        for sig, wait in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                self.proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
            if not self._group_alive():
                return
            time.sleep(1.0)

    def _group_alive(self) -> bool:
        try:
            os.killpg(self.proc.pid, 0)
            return True
        except (ProcessLookupError, PermissionError):
            return False

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


# ------------------------------------------------------------------------ workloads / points

class PromptTooLong(ValueError):
    pass


def point_duration_s(a: argparse.Namespace, rate: float) -> float:
    """The arrival span of a point: ``--duration-s``, stretched where the TTFT SLO is length-aware
    so that the point has LENGTH_AWARE_MIN_REQUESTS requests (sessions for chat are not counted)."""
    if per_token(a) > 0 and a.num_requests is None and a.workload != "chat":
        return max(a.duration_s, LENGTH_AWARE_MIN_REQUESTS / rate)
    return a.duration_s


def build_workload(a: argparse.Namespace, rate: float) -> workloads.Workload:
    wl = workloads.build(
        a.workload, rate=rate, duration_s=point_duration_s(a, rate), n=a.num_requests, offset=a.offset,
        seed=a.seed, salt=f"rate={fmt_rate(rate)}", input_cap=a.input_cap,
        output_cap=a.output_cap, arrival=a.arrival, trace_path_=a.trace_path,
        turns=tuple(a.turns), think_s=a.think_s, vocab=a.vocab, session_sample=a.session_sample,
        warm_history=a.warm_history)
    check_prompts(wl, a.context_len)
    return wl


def check_prompts(wl: workloads.Workload, context_len: int | None) -> None:
    """SGLang refuses a prompt of context_len - 6 tokens or more (its max_req_input_len). Such a
    request fails on every system alike, so the point would measure the trace, not the server:
    refused here, before a server starts."""
    if not context_len:
        return
    limit = context_len - 7
    over = [r.prompt_len for r in wl.requests if r.prompt_len > limit]
    if over:
        raise PromptTooLong(
            f"{len(over)} of {wl.n_requests} prompts are longer than the {limit} tokens SGLang serves with a "
            f"{context_len}-token context (the longest: {max(over)}): pass --input-cap {limit} (prompts are "
            "truncated from the end, their shared prefix kept), or a larger --context-length in --server-args")


def point_cost(a: argparse.Namespace, wl: workloads.Workload) -> float:
    return wl.span_s + a.drain_s + POINT_OVERHEAD_S


def warm_cache(url: str, wl: workloads.Workload) -> str:
    """Prefill the point's ``wl.warm`` prompts (its trace history) and wait: '' when it has none.
    A failed one would leave the cache colder than the point claims: that stops the sweep."""
    if not wl.warm:
        return ""
    t0 = time.time()
    recs, _ = client.run_workload(url, workloads.Workload("warm", "generate", requests=wl.warm),
                                  deadline_s=600.0, progress=False)
    bad = [r["error"] for r in recs if not r["ok"]]
    if bad:
        raise cli.UsageError(f"--warm-history: {len(bad)} of {len(recs)} history prompts failed ({bad[0]}); "
                         "a smaller --offset or a larger KV pool holds them")
    tokens = sum(len(r.input_ids) for r in wl.warm)
    return f"; warmed with {len(recs)} history prompts, {tokens} tokens, in {time.time() - t0:.0f} s"


def warmup(url: str, kind: str, n: int, vocab: tuple[int, int] = workloads.VOCAB
           ) -> tuple[bool, str]:
    """n short requests that must all succeed (the first may compile kernels: 300 s each)."""
    if n <= 0:
        return True, "skipped"
    rng = np.random.default_rng(12345)
    if kind == "chat":
        wl = workloads.Workload("warmup", "chat", sessions=[workloads.ChatSession(
            f"warmup-{i}", 0.0, "warm up", [workloads.ChatTurn("hello there", 8, 0.0)])
            for i in range(n)])
    else:
        wl = workloads.Workload("warmup", "generate", requests=[workloads.Request(
            f"warmup-{i}", 0.0, workloads.random_tokens(rng, 64, vocab), 8) for i in range(n)])
    recs, _ = client.run_workload(url, wl, deadline_s=300.0, progress=False)
    bad = [r["error"] for r in recs if not r["ok"]]
    return (not bad), ("ok" if not bad else f"warmup failed: {bad[0]}")


def existing_points(out: Path) -> dict[str, dict[float, Path]]:
    found: dict[str, dict[float, Path]] = {}
    for p in sorted(out.glob("*.jsonl")):
        m = POINT_RE.match(p.name)
        if m and not p.name.endswith(".timeline.jsonl"):
            found.setdefault(m["system"], {})[float(m["rate"])] = p
    return found


def first_failure(points: dict[float, Path], a: argparse.Namespace) -> float | None:
    """The lowest failing rate of a system's points where a sweep stops there (rates above it
    are never run), else None."""
    if a.no_stop_on_fail or a.search:
        return None
    return next((r for r, pth in sorted(points.items()) if not point_passes(pth, a)), None)


def file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def timeline_records(path: Path, span: list[int] | None) -> list[dict] | None:
    """The decisions in bytes [start, end) of a dispatcher timeline (one point's); None when
    there is no timeline. A torn line at either end is skipped. A timeline kept compressed
    (``<path>.xz``, as results are stored) is read through; the offsets are the plain file's."""
    xz = path.with_name(path.name + ".xz")
    if not span or not (path.exists() or xz.exists()):
        return None
    start, end = span
    with (open(path, "rb") if path.exists() else lzma.open(xz, "rb")) as f:
        f.seek(start or 0)
        chunk = f.read(max(0, (end or 0) - (start or 0))).decode(errors="replace")
    out = []
    for line in chunk.splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def count_preemptions(path: Path, span: list[int] | None) -> int | None:
    """``"preempt":true`` decisions in bytes [start, end) of a dispatcher timeline."""
    recs = timeline_records(path, span)
    return None if recs is None else sum(1 for r in recs if r.get("preempt") is True)


def point_passes(path: Path, a: argparse.Namespace) -> bool:
    return metrics.check_point(summarize(metrics.load_jsonl(path), a), a.tbt_slo_ms, a.ttft_slo_ms)[0]


def per_token(a: argparse.Namespace) -> float:
    """The goodput check's TTFT SLO per prompt token (0 where the caller's options predate it)."""
    return float(getattr(a, "ttft_slo_ms_per_token", 0.0) or 0.0)


def summarize(records: list[dict], a: argparse.Namespace) -> dict:
    """A point's summary under the run's goodput SLOs (``--ttft-slo-ms-per-token`` included)."""
    return metrics.summarize(records, a.tbt_slo_ms, a.ttft_slo_ms, per_token(a))


_RATE_KEYS = {"n", "requested_n", "n_sessions", "rate", "salt", "offered_rate", "span_s", "mean_input",
              "max_input", "mean_output", "trace_span_s", "hash_block_reuse", "subset_counts", "warm_history"}


def _run_options(wl: dict) -> dict:
    """A point's workload options that every point of the run shares."""
    out = {k: v for k, v in wl.items() if k not in _RATE_KEYS}
    if "warm_history" in wl:  # its size is the point's (meta.json); that it ran is the run's
        out["warm_history"] = "prefilled after each flush"
    return out


def build_summary(out: Path, a: argparse.Namespace, notes: dict) -> dict:
    pts = existing_points(out)
    names = sorted(set(pts) | {p.name.split("__")[0] for p in out.glob("*__start.json")})
    systems_out, common = {}, None
    for name in names:
        start = read_json(out / f"{name}__start.json")
        points = []
        for rate, path in sorted(pts.get(name, {}).items()):
            s = summarize(metrics.load_jsonl(path), a)
            meta = read_json(point_file(out, name, rate, ".meta.json")) or {}
            wl = meta.get("workload") or {}
            if common is None and wl:
                common = _run_options(wl)
            points.append({"rate": rate, "file": path.name, "summary": s, "workload": wl,
                           "flushed_cache": meta.get("flushed_cache"), "host_cpu": meta.get("host_cpu"),
                           "proc_cpu": meta.get("proc_cpu"),
                           "mux": systems.mux_settings(meta.get("server_command")),
                           "preemptions": count_preemptions(out / f"{name}.timeline.jsonl",
                                                            meta.get("timeline_bytes"))})
        gp = metrics.goodput(points, a.tbt_slo_ms, a.ttft_slo_ms)
        for p, c in zip(points, gp["points"]):
            p.update({"pass": c["pass"], "reasons": c["reasons"]})
        settings = [p["mux"] for p in points] or \
            [systems.mux_settings((start or {}).get("command"))]
        distinct = [x for i, x in enumerate(settings) if x not in settings[:i]]
        if getattr(a, "search", None):
            lo_pass, hi_fail = search.bracket({p["rate"]: p["pass"] for p in points})
            found = {"lo": a.search[0], "hi": a.search[1], "tol": a.search_tol,
                     "goodput_interval": [lo_pass, hi_fail]}
        else:
            found = None
        systems_out[name] = {"goodput_rps": gp["goodput_rps"], "monotone": gp["monotone"], "search": found,
                             "start": start, "mux": distinct[0] if len(distinct) == 1 else distinct,
                             "attention_backend": systems.attention_backend_of(
                                 (start or {}).get("command"), out / f"{name}.log"),
                             "points": points}
    mixed = any(p["workload"] and _run_options(p["workload"]) != common
                for s in systems_out.values() for p in s["points"])
    # A summary rebuilt where there is no GPU (merging pieces on the host) keeps the device
    # and host the points were measured on.
    dev = device_name()
    prev = (read_json(out / "summary.json") or {}) if dev is None else {}
    backends = sorted({v["attention_backend"] or "unknown" for v in systems_out.values()})
    fairness = {"attention_backend": backends[0] if len(backends) == 1 else backends}
    if len(backends) > 1:
        fairness["unfair"] = "systems ran with different attention backends: " + ", ".join(
            f"{n} {v['attention_backend']}" for n, v in systems_out.items())
    return {
        "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"), **fairness,
        "command": shlex.join([sys.executable, "-m", "bench.run", *sys.argv[1:]]),
        "device": dev or prev.get("device"), "host": socket.gethostname() if dev else prev.get("host", socket.gethostname()),
        "hardware": host_hardware() if dev else prev.get("hardware"),
        "slo": {"tbt_ms": a.tbt_slo_ms, "ttft_ms": a.ttft_slo_ms, "ttft_ms_per_token": per_token(a),
                "percentile": 99,
                "goodput_rule": "highest tested rate with no failures, P99 TBT <= TBT SLO, "
                                + ("P99 of (TTFT - ttft_ms_per_token x prompt tokens) <= TTFT SLO"
                                   if per_token(a) else "P99 TTFT <= TTFT SLO")
                                + " and no TTFT drift (bench/metrics.py)"},
        "workload": common, "mixed_workload_options": mixed,
        "mux_ttft_slo_ms": a.mux_ttft_slo_ms, "mux_ttft_ms_per_token": a.mux_ttft_ms_per_token,
        "rate_unit": "sessions/s" if a.workload == "chat" else "requests/s",
        "systems": systems_out, **notes,
    }


# ------------------------------------------------------------------------ main

def _search_range(text: str) -> tuple[float, float]:
    """``--search LO,HI``: two finite rates, 0 < LO < HI."""
    xs = _cli_io.number_list(text, example="2,8")
    if len(xs) != 2 or not xs[0] < xs[1]:
        raise cli.UsageError(f"takes LO,HI with 0 < LO < HI, e.g. 2,8; got {text!r}")
    return xs[0], xs[1]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    pos, pos_i = cli.positive(float), cli.positive(int)
    nonneg, nonneg_i = cli.positive(float, allow_zero=True), cli.positive(int, allow_zero=True)
    p = cli.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    p.add_argument("--systems", required=True, help="comma list; 'all', 'sglang-chunked-*'")
    p.add_argument("--workload", default="conversation", choices=workloads.WORKLOADS, help="what the clients send")
    p.add_argument("--rates", default=None, type=_cli_io.numbers(example="2,4"),
                   help="comma list, requests/s (chat: sessions/s)")
    p.add_argument("--search", default=None, metavar="LO,HI", type=_cli_io.arg_type(_search_range, "LO,HI"),
                   help="instead of --rates: bisect each system's goodput between LO and HI "
                        "(bench/search.py), one server per system, resumable")
    p.add_argument("--search-tol", type=pos, default=0.05,
                   help="stop when the goodput interval's middle is within +- this fraction of its ends")
    p.add_argument("--duration-s", type=pos, default=120.0,
                   help="arrival span per point: round(rate*duration) requests; with a length-aware TTFT SLO "
                        f"at least {LENGTH_AWARE_MIN_REQUESTS} (the span stretched)")
    p.add_argument("--out", required=True, type=Path, help="the run's directory (created; a rerun resumes it)")
    p.add_argument("--model-path", default=str(ROOT / "launch/models/llama-3.1-8b"), help="the served model's directory")
    p.add_argument("--tokenizer-path", default=None,
                   help="default: the model dir if it has one, else none (--skip-tokenizer-init);"
                        " chat falls back to sglang_mux/data/tokenizer")
    p.add_argument("--vocab-size", type=pos_i, default=None,
                   help="token ids are drawn below it (default: the model config's vocab_size)")
    p.add_argument("--tbt-slo-ms", type=pos, default=metrics.DEFAULT_TBT_SLO_MS, help="P99 TBT SLO")
    p.add_argument("--ttft-slo-ms", type=pos, default=metrics.DEFAULT_TTFT_SLO_MS,
                   help="P99 TTFT SLO of the goodput check (with --ttft-slo-ms-per-token K > 0: the intercept S)")
    p.add_argument("--ttft-slo-ms-per-token", type=nonneg, default=0.0, metavar="K",
                   help="length-aware TTFT SLO of the goodput check: P99 over requests of TTFT - K x prompt "
                        "tokens <= --ttft-slo-ms (0: flat). Judges the points only; the servers' SLO is "
                        "--mux-ttft-ms-per-token"),
    p.add_argument("--mux-ttft-slo-ms", type=pos, default=None, metavar="S",
                   help="TTFT SLO given to the mux systems (default: --ttft-slo-ms, which the "
                        "goodput check uses either way)")
    p.add_argument("--mux-ttft-ms-per-token", type=nonneg, default=None, metavar="K",
                   help="length-aware TTFT SLO of every mux server: S + K x prompt tokens, what "
                        "preemption decides on (default: the goodput check's --ttft-slo-ms-per-token; 0 never "
                        "preempts)")
    p.add_argument("--time-budget-s", type=pos, default=None, help="stop starting points past this wall time")
    p.add_argument("--server-url", default=None, help="measure a server already running (one --systems label)")
    p.add_argument("--port", type=_cli_io.port, default=30000, help="the port a started server listens on")
    p.add_argument("--mem-fraction-static", type=_cli_io.fraction, default=0.85, help="SGLang's static memory share")
    p.add_argument("--server-args", default="", help="extra server args for every system")
    p.add_argument("--attention-backend", default=None,
                   help="attention backend of every SGLang-based system (default: SGLang's own, "
                        "FA3 on H100/H200); recorded per system in summary.json either way")
    p.add_argument("--no-incremental-streaming", action="store_true",
                   help="do not pass --incremental-streaming-output")
    p.add_argument("--startup-timeout-s", type=pos, default=900.0, help="give up on a server start after this")
    p.add_argument("--startup-estimate-s", type=pos, default=120.0,
                   help="budget estimate of a server start before one was observed")
    p.add_argument("--drain-s", type=nonneg, default=60.0,
                   help="client deadline = last scheduled send + this")
    p.add_argument("--request-timeout-s", type=pos, default=None)
    p.add_argument("--client-procs", type=pos_i,
                   default=max(1, min(4, (os.cpu_count() or 1) // 4)),
                   help="client processes (one event loop streams a few thousand chunks/s)")
    p.add_argument("--warmup", type=nonneg_i, default=2, help="warm-up requests before each point")
    p.add_argument("--no-stop-on-fail", action="store_true")
    p.add_argument("--retry-failed-start", action="store_true")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--dry-run", action="store_true", help="print commands and point costs only")
    g = p.add_argument_group("workload options")
    g.add_argument("--trace-path", default=None, help="full trace JSONL (default: shared or slice)")
    g.add_argument("--num-requests", type=pos_i, default=None, help="override round(rate*duration)")
    g.add_argument("--offset", type=nonneg_i, default=0, help="the slice starts at this trace row")
    g.add_argument("--warm-history", action="store_true",
                   help="after each point's cache flush, prefill (unmeasured) the trace's history that the point's "
                        "prompts reuse, so a slice at --offset meets the cache its past would leave")
    g.add_argument("--session-sample", type=int, default=1, metavar="K",
                   help="traces: keep one session in K, every turn of it (prefix reuse that fits one GPU's KV pool)")
    g.add_argument("--input-cap", type=pos_i, default=None, help="keep the first T prompt tokens")
    g.add_argument("--output-cap", type=pos_i, default=None, help="keep at most this many output tokens")
    g.add_argument("--arrival", choices=("trace", "poisson"), default="trace", help="the trace's own arrivals or Poisson")
    g.add_argument("--seed", type=cli.seed, default=0, help="a whole number >= 0")
    g.add_argument("--turns", type=pos_i, nargs=2, default=(2, 6), metavar=("MIN", "MAX"), help="chat: turns per session")
    g.add_argument("--think-s", type=nonneg, default=3.0, help="chat: a user's pause between turns")
    a = p.parse_args(argv)
    given = systems.flag_value(shlex.split(a.server_args), "--attention-backend")
    if a.attention_backend and given and given != a.attention_backend:
        p.error(f"--attention-backend {a.attention_backend} but --server-args names {given}: "
                "every system must run one backend; give it once")
    a.rates = sorted(set(a.rates or ()))
    if a.turns[0] > a.turns[1]:
        p.error(f"--turns MIN MAX with MIN <= MAX, got {a.turns[0]} {a.turns[1]}")
    if a.trace_path:
        if not Path(a.trace_path).is_file():
            p.error(f"--trace-path: no trace file {a.trace_path}")
        if not Path(a.trace_path).stat().st_size:
            p.error(f"--trace-path: {a.trace_path} is empty, expected a JSONL trace")
    if a.search:
        if a.rates:
            p.error("give --rates or --search, not both")
    elif not a.rates:
        p.error("give --rates (a comma list) or --search LO,HI")
    try:
        a.systems = [s.strip() for s in a.systems.split(",") if s.strip()] if a.server_url \
            else systems.expand(a.systems)
    except ValueError as e:
        p.error(f"--systems: {e}")
    if not a.systems:
        p.error("--systems names no system")
    if a.session_sample < 1:
        p.error("--session-sample K keeps one session in K: give K >= 1 (1 keeps the whole trace)")
    if a.warm_history and a.workload not in workloads.TRACES:
        p.error(f"--warm-history prefills a trace's history: give --workload {' or '.join(workloads.TRACES)}")
    if a.server_url and len(a.systems) != 1:
        p.error("--server-url takes exactly one --systems label")
    if a.mux_ttft_slo_ms is None:
        a.mux_ttft_slo_ms = a.ttft_slo_ms
    if a.mux_ttft_ms_per_token is None:
        a.mux_ttft_ms_per_token = per_token(a)
    a.model_path = str(Path(a.model_path).resolve())
    ctx = systems.flag_value(shlex.split(a.server_args), "--context-length")
    try:
        a.context_len = int(ctx) if ctx is not None else workloads.model_context_len(a.model_path)
    except ValueError:
        p.error(f"--context-length {ctx!r} in --server-args is not a whole number")
    if a.context_len <= 0:
        p.error(f"--context-length {a.context_len} in --server-args: give the model's context, a whole number > 0")
    a.vocab = workloads.token_range(a.vocab_size or workloads.model_vocab_size(a.model_path))
    if a.tokenizer_path:
        a.tokenizer_path = str(Path(a.tokenizer_path).resolve())
    elif systems.has_tokenizer(a.model_path):
        a.tokenizer_path = a.model_path
    elif a.workload == "chat" and systems.has_tokenizer(SHIPPED_TOKENIZER):
        a.tokenizer_path = str(SHIPPED_TOKENIZER)
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    out = a.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    budget = Budget(a.time_budget_s)
    kind = "chat" if a.workload == "chat" else "generate"
    if (kind == "chat" and not a.server_url and not a.tokenizer_path
            and any(systems.kind(s) != "stub" for s in a.systems)):
        return cli.print_error("the chat workload needs a tokenizer: give --tokenizer-path")
    url = a.server_url or f"http://127.0.0.1:{a.port}"
    notes = {"budget_stopped": False, "not_run": []}
    dry_total = 0.0
    server: Server | None = None

    def on_term(signum, frame):          # SIGTERM -> same cleanup path as Ctrl-C
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_term)

    try:
        for sys_name in a.systems:
            done = existing_points(out).get(sys_name, {})
            results = {r: point_passes(pth, a) for r, pth in done.items()} if a.search else None

            def searched():  # the next rate of the bisection, as a one-item list (or none)
                r = search.next_rate(results, *a.search, a.search_tol)
                return [] if r is None else [r]
            pending = searched() if a.search else [r for r in a.rates if r not in done]
            start_path = out / f"{sys_name}__start.json"
            start_rec = read_json(start_path)
            if (start_rec and start_rec.get("ok") is False and not a.retry_failed_start
                    and not a.server_url):
                log(f"{sys_name}: recorded failed start ({start_rec.get('reason')}); skipping")
                continue
            failed = first_failure(done, a)
            if failed is not None:
                skipped = [r for r in pending if r > failed]
                pending = [r for r in pending if r <= failed]
                if skipped:
                    log(f"{sys_name}: rate {fmt_rate(failed)} failed; skipping {skipped}")
            if not pending:
                log(f"{sys_name}: nothing to run")
                continue
            wls = {r: build_workload(a, r) for r in pending}
            for r, wl in wls.items():
                if (wl.options.get("requested_n") or 0) > wl.options.get("n", 0):
                    log(f"rate {fmt_rate(r)}: the trace has only {wl.options['n']} requests from "
                        f"offset {a.offset} (wanted {wl.options['requested_n']}); "
                        "give --trace-path for the full trace")
            cmd = None if a.server_url else systems.server_command(
                sys_name, a.model_path, a.port, mem_fraction=a.mem_fraction_static,
                extra_args=shlex.split(a.server_args), tbt_slo_ms=a.tbt_slo_ms,
                ttft_slo_ms=a.mux_ttft_slo_ms, timeline=out / f"{sys_name}.timeline.jsonl",
                incremental=not a.no_incremental_streaming, tokenizer_path=a.tokenizer_path,
                ttft_ms_per_token=a.mux_ttft_ms_per_token, attention_backend=a.attention_backend)
            timeline = out / f"{sys_name}.timeline.jsonl" \
                if cmd and "--mux-timeline" in cmd else None
            mux = systems.mux_settings(cmd)
            if mux and mux["preemption"] and not mux["ttft_ms_per_token"] and \
                    ("mux-nopreempt" in a.systems or a.workload == "mixed"):
                log(f"note: {sys_name}: the TTFT SLO is flat (--mux-ttft-ms-per-token 0), so "
                    "preemption never fires and it schedules like mux-nopreempt")
            prev = (start_rec or {}).get("startup_s")
            startup_est = max(30.0, 1.2 * prev) if prev else a.startup_estimate_s
            if a.dry_run:
                log(f"{sys_name}: {shlex.join(cmd) if cmd else url}")
                for r, wl in wls.items():
                    log(f"  rate {fmt_rate(r)}: {wl.n_requests} requests, span {wl.span_s:.0f} s, "
                        f"cost <= {point_cost(a, wl):.0f} s")
                cost = sum(point_cost(a, wl) for wl in wls.values()) + \
                    (startup_est + STOP_S if cmd else 0)
                log(f"  {sys_name} total <= {cost:.0f} s"
                    + (f" (start ~{startup_est:.0f} s + points + stop {STOP_S:.0f} s)" if cmd else ""))
                dry_total += cost
                continue
            if cmd is not None:
                need = startup_est + point_cost(a, wls[pending[0]]) + STOP_S
                if not budget.fits(need):
                    log(f"budget: {budget.left():.0f} s left < {need:.0f} s to start {sys_name} "
                        "and run one point; stopping")
                    notes["budget_stopped"] = True
                    break
                server = Server(cmd, out / f"{sys_name}.log", url)
                t_start = time.monotonic()
                log(f"{sys_name}: starting: {shlex.join(cmd)}")
                server.start()
                wait = min(a.startup_timeout_s,
                           budget.left() - point_cost(a, wls[pending[0]]) - STOP_S)
                ok, reason = server.wait_healthy(wait)
                if ok:
                    ok, reason = warmup(url, kind, a.warmup, a.vocab)
                startup_s = time.monotonic() - t_start
                if not ok and wait < a.startup_timeout_s and "no /health" in reason:
                    log(f"{sys_name}: not up after {startup_s:.0f} s and the budget is spent")
                    server.stop()
                    server = None
                    write_json(start_path, {**(start_rec or {}), "ok": None,
                                            "startup_s": max(prev or 0, startup_s),
                                            "reason": "budget ran out while starting"})
                    notes["budget_stopped"] = True
                    break
                rec = {"ok": ok, "reason": reason, "startup_s": round(startup_s, 1),
                       "command": cmd, "date": dt.datetime.now().isoformat(timespec="seconds")}
                if not ok:          # a failed start is a result, not a crash of the sweep
                    rec["returncode"] = server.proc.poll()
                    rec["log_tail"] = server.log_tail()
                    log(f"{sys_name}: FAILED to start: {reason}")
                    server.stop()
                    server = None
                    write_json(start_path, rec)
                    continue
                write_json(start_path, rec)
                log(f"{sys_name}: up in {startup_s:.0f} s")
            else:
                ok, reason = warmup(url, kind, a.warmup, a.vocab)
                log(f"{url}: warmup {reason}")
            for i, r in enumerate(pending):  # a search appends its next rate as it goes
                if r not in wls:
                    wls[r] = build_workload(a, r)
                wl = wls[r]
                if not budget.fits(point_cost(a, wl) + (STOP_S if server else 0)):
                    log(f"budget: {budget.left():.0f} s left < {point_cost(a, wl):.0f} s for "
                        f"{sys_name} @ {fmt_rate(r)}; stopping")
                    notes["budget_stopped"] = True
                    break
                if i > 0 and not a.no_stop_on_fail and not a.search and \
                        not point_passes(point_file(out, sys_name, pending[i - 1]), a):
                    log(f"{sys_name}: rate {fmt_rate(pending[i - 1])} failed; skipping higher")
                    break
                flushed = client.flush_cache(url)
                warmed = warm_cache(url, wl)
                log(f"{sys_name} @ {fmt_rate(r)}: {wl.n_requests} requests over "
                    f"{wl.span_s:.0f} s (cache flushed: {flushed}{warmed})")
                deadline = wl.span_s + a.drain_s
                t_point = time.time()
                cpu0 = cpu_ticks()
                sid = server.proc.pid if server is not None else None  # None: a server not started here
                procs0 = proc_cpu.snapshot(sid) if sid else {}, os.times()
                tl_start = file_size(timeline) if timeline else None
                recs, info = client.run_workload(url, wl, deadline, progress=not a.no_progress,
                                                 request_timeout_s=a.request_timeout_s,
                                                 procs=a.client_procs)
                procs = point_proc_cpu(procs0, sid, time.time() - t_point)
                write_json(point_file(out, sys_name, r, ".meta.json"), {
                    "system": sys_name, "rate": r, "workload": wl.options, "client": info,
                    "command": shlex.join([sys.executable, "-m", "bench.run", *sys.argv[1:]]),
                    "flushed_cache": flushed, "warmed_cache": warmed or None, "server_command": cmd,
                    "server_url": url,
                    "timeline_bytes": [tl_start, file_size(timeline)] if timeline else None,
                    "host_cpu": host_cpu(cpu0, cpu_ticks()),
                    "proc_cpu": procs,
                    "started": dt.datetime.fromtimestamp(t_point).isoformat(timespec="seconds")})
                write_atomic(point_file(out, sys_name, r),
                             "".join(json.dumps(x, separators=(",", ":")) + "\n" for x in recs))
                scraped = client.scrape_metrics(url)
                if scraped:     # the mux state after the point (mux server with --enable-metrics)
                    write_atomic(point_file(out, sys_name, r, ".metrics.prom"), scraped)
                s = summarize(recs, a)
                ok, why = metrics.check_point(s, a.tbt_slo_ms, a.ttft_slo_ms)
                f = lambda x, d=0: "-" if x is None else f"{x:.{d}f}"  # noqa: E731
                adj = f" (less {a.ttft_slo_ms_per_token:g} ms/token: {f(s['ttft_length_adjusted_ms']['p99'])} ms)" \
                    if a.ttft_slo_ms_per_token else ""
                log(f"{sys_name} @ {fmt_rate(r)}: {'PASS' if ok else 'FAIL'}: P99 TTFT "
                    f"{f(s['ttft_ms']['p99'])} ms{adj}, P99 TBT {f(s['tbt_ms']['p99'], 1)} ms, "
                    f"failed {s['n_failed']}/{s['n']}" + (f" ({'; '.join(why)})" if why else "")
                    + (f"; server's HTTP + tokenizer process {procs['http+tokenizer']:.2f} cores busy"
                       if "http+tokenizer" in procs else ""))
                if a.search:
                    results[r] = ok
                    pending += searched()
            if server:
                server.stop()
                server = None
            if notes["budget_stopped"]:
                break
    except KeyboardInterrupt as e:
        log(f"interrupted ({e}); stopping")
        notes["interrupted"] = True
    except PromptTooLong as e:
        return cli.print_error(f"the workload cannot be served: {e}")
    finally:
        if server:
            server.stop()
    if a.dry_run:
        log(f"dry run: <= {dry_total:.0f} s in all (server starts, pending points, stops; "
            "a point ends when its last request does, usually well before its bound)")
        return 0
    have = existing_points(out)
    failed = {s: first_failure(have.get(s, {}), a) for s in a.systems}
    notes["not_run"] = [f"{s}@{fmt_rate(r)}" for s in a.systems for r in a.rates
                        if r not in have.get(s, {}) and (failed[s] is None or r <= failed[s])]
    summary = build_summary(out, a, notes)
    write_json(out / "summary.json", summary)
    print(report.render(summary))
    return 130 if notes.get("interrupted") else 0


if __name__ == "__main__":
    cli.run(main)
