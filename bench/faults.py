"""Faults injected into a running server under load, each counted; nothing lost, the server
alive after (issue 19).

    python -m bench.faults --server-url http://127.0.0.1:30000 --repeat 20 --rate 3 \\
        --context-len 131072 --out bench/results/faults_x.json [--sigterm-pid PID]

Background load: the Mooncake conversation trace at ``--rate`` (bench.client: every request
ends completed or errored, ``lost`` counts those that did neither). Over it, every fault
``--repeat`` times from ``--workers`` threads (disconnect_preempted from one more, one at a
time), each with its outcome counted:

- ``disconnect_prefill``: a ``--long-tokens`` prompt, streamed, closed before its first token
  (while its prefill runs, layer-wise under the mux);
- ``disconnect_decode``: a streamed request closed after its 4th token;
- ``disconnect_preempted``: a ``--preempt-tokens`` prompt, short ones behind it: a mux
  server started with a length-aware TTFT SLO preempts the long batch for them when waiting
  for it would cost them their TTFT SLO; the long one is closed as soon as the server's
  ``sglang_mux:preemptions_total`` rises (so while it is paused), and the outcome says whether
  a preemption was seen at all;
- ``abort_running``: a streamed request with a known rid, aborted through ``/abort_request``
  after its first token: its stream must end (or fail), not hang;
- ``prompt_past_context``: ``--context-len`` + 64 token ids: must be a 4xx;
- ``max_new_tokens_past_context``: a short prompt asking for 10 x the context: a 4xx, or an
  answer that stops at the context;
- ``kv_exhaustion``: ``--kv-burst`` long prompts at once, more than the KV pool holds: each
  completes or errors (SGLang retracts running requests when their decode outgrows the pool: its
  log says "KV cache pool is full. Retract requests.", which the reliability plan counts).

Afterwards: /health, a valid request, and the server's running and queued requests (its
/metrics, with --enable-metrics) back to 0 once the load is gone (an aborted request left
behind would hold its KV forever); with ``--external-load`` (a soak's, still running) /health
alone. ``--sigterm-pid``: last, streamed requests in flight and
SIGTERM to the server: how each in-flight request ended and how long the process took to exit.
``--out`` is rewritten after every outcome (``"partial": true`` until the end), so a run cut
short by a command's time limit keeps what it counted.
"""
from __future__ import annotations

import concurrent.futures as cf
import datetime as dt
import http.client
import json
import os
import random
import re
import signal
import sys
import threading
import time
import urllib.parse
import uuid
from pathlib import Path

from sglang_mux import cli

from . import client, soak, workloads
from sglang_mux import cli_io as _cli_io

FAULTS = ("disconnect_prefill", "disconnect_decode", "disconnect_preempted", "abort_running",
          "prompt_past_context", "max_new_tokens_past_context", "kv_exhaustion")
# One at a time, beside the pool: its outcome reads a server-wide counter (two long prompts in
# flight would both be credited with one preemption), and a long prompt queued behind another is
# past its own TTFT deadline, for which the mux never preempts.
ALONE = ("disconnect_preempted",)


class Server:
    """The few raw HTTP calls a fault needs (http.client: the socket is ours to close)."""

    def __init__(self, base: str, timeout_s: float = 300.0):
        u = urllib.parse.urlsplit(base)
        self.base, self.host, self.port, self.timeout_s = base, u.hostname, u.port, timeout_s
        self.rng = random.Random(0)
        self.lock = threading.Lock()

    def ids(self, n: int) -> list[int]:
        with self.lock:
            return [self.rng.randrange(300, 30000) for _ in range(n)]

    def post(self, path: str, body: dict) -> tuple[int | None, dict | str]:
        try:
            c = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
            c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
            r = c.getresponse()
            data = r.read()
            c.close()
        except (OSError, http.client.HTTPException) as e:
            return None, repr(e)
        try:
            return r.status, json.loads(data)
        except ValueError:
            return r.status, data.decode(errors="replace")[:300]

    def stream(self, body: dict):
        """(connection, response) of a streamed /generate; the caller reads and closes."""
        c = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
        c.request("POST", "/generate", body=json.dumps({**body, "stream": True}),
                  headers={"Content-Type": "application/json"})
        return c, c.getresponse()


def _sp(n: int) -> dict:
    return {"max_new_tokens": n, "temperature": 0, "ignore_eos": True}


def disconnect_prefill(s: Server, long_tokens: int, **_) -> str:
    c, r = s.stream({"input_ids": s.ids(long_tokens), "sampling_params": _sp(64)})
    if r.status != 200:
        client.drop(c)
        return f"status-{r.status}"
    c.sock.settimeout(0.05)  # close well before a long prompt's first token
    try:
        got = next(client.sse_events(r), None)
    except (TimeoutError, OSError):
        got = None
    client.drop(c)
    return "closed-before-first-token" if got is None else "closed-after-first-token"


def disconnect_decode(s: Server, **_) -> str:
    c, r = s.stream({"input_ids": s.ids(64), "sampling_params": _sp(256)})
    if r.status != 200:
        client.drop(c)
        return f"status-{r.status}"
    n = 0
    for _ev in client.sse_events(r):
        n += 1
        if n >= 4:
            break
    client.drop(c)
    return "closed-in-decode" if n >= 4 else "ended-early"


SHORT_GAP_S = 0.25  # disconnect_preempted: one short prompt this often until a preemption shows
MAX_SHORTS_OUT = 8  # ... with at most this many unanswered (none piles up behind a backlog)


def _preemptions(s: Server) -> float | None:
    return soak.server_gauges(s.base).get("preemptions")


def disconnect_preempted(s: Server, preempt_tokens: int, preempt_wait_s: float, **_) -> str:
    before = _preemptions(s)
    c, r = s.stream({"input_ids": s.ids(preempt_tokens), "sampling_params": _sp(16)})
    if r.status != 200:
        client.drop(c)
        return f"status-{r.status}"
    short = {"input_ids": s.ids(32), "sampling_params": _sp(4)}
    with cf.ThreadPoolExecutor(MAX_SHORTS_OUT) as ex:
        # Short ones keep arriving behind it: one sent at once can be admitted before the long
        # prefill starts (under load it may queue for seconds) and so preempt nothing.
        shorts = [ex.submit(s.post, "/generate", short)]
        seen = None
        if before is not None:  # close it once paused: as soon as a preemption shows
            t0 = time.time()
            while not seen and time.time() - t0 < preempt_wait_s:
                time.sleep(SHORT_GAP_S)
                seen = (_preemptions(s) or 0.0) > before
                if not seen and sum(not f.done() for f in shorts) < MAX_SHORTS_OUT:
                    shorts.append(ex.submit(s.post, "/generate", short))
        client.drop(c)
        ok = sum(1 for f in shorts if f.result()[0] == 200)
    how = {None: "closed (no preemption metric)", True: "closed after a preemption",
           False: "closed, no preemption seen"}[seen]
    return f"{how}; shorts served" if ok == len(shorts) else f"{how}; {len(shorts) - ok} shorts failed"


def abort_running(s: Server, **_) -> str:
    rid = "fault-" + uuid.uuid4().hex
    c, r = s.stream({"input_ids": s.ids(64), "sampling_params": _sp(2048), "rid": rid})
    if r.status != 200:
        client.drop(c)
        return f"status-{r.status}"
    ev = client.sse_events(r)
    first = next(ev, None)
    if first is None:
        client.drop(c)
        return "ended-before-first-token"
    st, _ = s.post("/abort_request", {"rid": rid})
    n, last = 0, first
    t0 = time.time()
    try:
        for last in ev:
            n += 1
    except (OSError, http.client.HTTPException):
        client.drop(c)
        return "stream-failed-after-abort"
    client.drop(c)
    fin = ((last or {}).get("meta_info") or {}).get("finish_reason") or {}
    kind = fin.get("type") if isinstance(fin, dict) else str(fin)
    if st != 200:
        return f"abort-status-{st}"
    return f"ended:{kind}" if time.time() - t0 < s.timeout_s else "hung"


def prompt_past_context(s: Server, context_len: int, **_) -> str:
    st, body = s.post("/generate", {"input_ids": s.ids(context_len + 64), "sampling_params": _sp(4)})
    return "4xx" if st is not None and 400 <= st < 500 else f"status-{st}"


def max_new_tokens_past_context(s: Server, context_len: int, **_) -> str:
    st, body = s.post("/generate", {"input_ids": s.ids(16), "sampling_params": _sp(10 * context_len)})
    if st is not None and 400 <= st < 500:
        return "4xx"
    if st == 200 and isinstance(body, dict):
        m = body.get("meta_info") or {}
        done = int(m.get("completion_tokens") or 0) + int(m.get("prompt_tokens") or 0)
        return "stopped-at-context" if done <= context_len else "ran-past-context"
    return f"status-{st}"


def kv_exhaustion(s: Server, long_tokens: int, kv_burst: int, kv_new_tokens: int, **_) -> str:
    with cf.ThreadPoolExecutor(kv_burst) as ex:
        res = list(ex.map(lambda _: s.post("/generate", {"input_ids": s.ids(long_tokens),
                                                         "sampling_params": _sp(kv_new_tokens)}), range(kv_burst)))
    ok = sum(1 for st, _ in res if st == 200)
    err = sum(1 for st, _ in res if st is not None and st != 200)
    lost = kv_burst - ok - err
    return f"completed {ok}, errored {err}" + (f", no answer {lost}" if lost else "")


def run_faults(base: str, repeat: int = 20, workers: int = 4, context_len: int = 131072,
               long_tokens: int = 16384, kv_burst: int = 40, faults=FAULTS, timeout_s: float = 300.0,
               preempt_tokens: int = 100_000, preempt_wait_s: float = 60.0, kv_new_tokens: int = 256,
               on_outcome=None) -> dict:
    """Every fault ``repeat`` times, interleaved, from ``workers`` threads (those in ALONE from
    one more thread, one after another); {fault: {outcome: count}} and each run's seconds.
    ``on_outcome(counts, max_seconds)`` after each outcome, as they come: a run cut short (a
    command's time limit) keeps what it counted."""
    s = Server(base, timeout_s)
    fn = {f: globals()[f] for f in faults}
    plan = [f for _ in range(repeat) for f in faults]
    kw = dict(context_len=context_len, long_tokens=long_tokens, kv_burst=kv_burst, preempt_tokens=preempt_tokens,
              preempt_wait_s=preempt_wait_s, kv_new_tokens=kv_new_tokens)
    before = _preemptions(s)

    def one(f):
        t0 = time.time()
        try:
            out = fn[f](s, **kw)
        except (OSError, http.client.HTTPException) as e:
            out = f"client-error:{type(e).__name__}"
        return f, out, time.time() - t0

    counts: dict[str, dict[str, int]] = {f: {} for f in faults}
    secs: dict[str, float] = {f: 0.0 for f in faults}
    with cf.ThreadPoolExecutor(workers) as ex, cf.ThreadPoolExecutor(1) as alone:
        futs = [(alone if f in ALONE else ex).submit(one, f) for f in plan]
        for fut in cf.as_completed(futs):
            f, out, dt_s = fut.result()
            counts[f][out] = counts[f].get(out, 0) + 1
            secs[f] = max(secs[f], dt_s)
            if on_outcome is not None:
                on_outcome(counts, {k: round(v, 2) for k, v in secs.items()})
    after = _preemptions(s)
    return {"counts": counts, "max_seconds": {f: round(v, 2) for f, v in secs.items()},
            "preemptions": None if before is None or after is None else after - before}


def settle(base: str, wait_s: float = 60.0) -> dict:
    """Once the load is gone: /health, one valid request, and the server's running + queued
    requests down to 0 within ``wait_s`` (None when it serves no /metrics)."""
    s = Server(base, 60.0)
    st, body = s.post("/generate", {"input_ids": s.ids(16), "sampling_params": _sp(8)})
    left = None
    t0 = time.time()
    while time.time() - t0 < wait_s:
        q = soak.server_gauges(base)
        if "num_running_reqs" not in q:
            break
        left = q["num_running_reqs"] + q.get("num_queue_reqs", 0.0)
        if left == 0:
            break
        time.sleep(1.0)
    return {"healthy": client.health(base), "valid_request_ok": st == 200,
            "running_plus_queued_after": left}


def sigterm(base: str, pid: int, inflight: int = 16, exit_bound_s: float = 60.0) -> dict:
    """``inflight`` streamed requests running, then SIGTERM: how each ended, how long to exit."""
    return _end_under_load(base, pid, lambda: os.kill(pid, signal.SIGTERM), inflight, exit_bound_s)


def rank_kill(base: str, pid: int, rank: int, inflight: int = 16, exit_bound_s: float = 60.0) -> dict:
    """``inflight`` streamed requests running, then SIGKILL to TP rank ``rank``'s scheduler (a
    process under server ``pid`` titled ``scheduler_TP<rank>``): the server must exit within the
    bound, every request ending (an error is an ending; a hang is not). Raises UsageError when
    the server has no such rank."""
    victim = scheduler_of_rank(pid, rank)
    if victim is None:
        raise cli.UsageError(f"no process titled scheduler_TP{rank} under server pid {pid}: "
                             "is the server started with --tp-size > that rank?")
    res = _end_under_load(base, pid, lambda: os.kill(victim, signal.SIGKILL), inflight, exit_bound_s)
    return {"rank": rank, "killed_pid": victim, **res}


def scheduler_of_rank(pid: int, rank: int, proc: str = "/proc") -> int | None:
    """The descendant of ``pid`` whose command line (SGLang sets the title) names
    ``scheduler_TP<rank>`` (not ``scheduler_TP<rank>x``), or None."""
    children: dict[int, list[int]] = {}
    for d in Path(proc).iterdir():
        if d.name.isdigit():
            try:
                ppid = int(_stat(d)[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    want = re.compile(rf"scheduler_TP{rank}(?!\d)")
    todo = list(children.get(pid, []))
    while todo:
        c = todo.pop()
        try:
            title = (Path(proc) / str(c) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if want.search(title):
            return c
        todo.extend(children.get(c, []))
    return None


def _stat(proc_dir: Path) -> list[str]:
    """A process's /proc stat fields after its name: state, ppid, ..."""
    return (proc_dir / "stat").read_text().rsplit(")", 1)[1].split()


def _alive(pid: int) -> bool:
    """Running: a zombie (exited, not yet reaped by its parent) has exited."""
    try:
        return _stat(Path(f"/proc/{pid}"))[0] != "Z"
    except (OSError, IndexError):
        return False


def _end_under_load(base: str, pid: int, act, inflight: int, exit_bound_s: float) -> dict:
    """``inflight`` streamed requests, then ``act()`` (a signal that ends the server ``pid``): how
    each request ended and how long the server took to exit."""
    s = Server(base, exit_bound_s + 30)

    def req(_):
        try:
            c, r = s.stream({"input_ids": s.ids(256), "sampling_params": _sp(512)})
            last = None
            for last in client.sse_events(r):
                pass
            client.drop(c)
            fin = ((last or {}).get("meta_info") or {}).get("finish_reason")
            return "completed" if fin else "stream-ended-unfinished"
        except (OSError, http.client.HTTPException) as e:
            return f"error:{type(e).__name__}"

    with cf.ThreadPoolExecutor(inflight) as ex:
        futs = [ex.submit(req, i) for i in range(inflight)]
        time.sleep(2.0)
        t0 = time.time()
        act()
        while time.time() - t0 < exit_bound_s and _alive(pid):
            time.sleep(0.2)
        exited = not _alive(pid)
        outs = [f.result() for f in futs]
    counts: dict[str, int] = {}
    for o in outs:
        counts[o] = counts.get(o, 0) + 1
    return {"inflight": inflight, "outcomes": counts, "exited": exited,
            "exit_s": round(time.time() - t0, 1) if exited else None, "bound_s": exit_bound_s}


def main(argv: list[str] | None = None) -> None:
    pos, pos_i = cli.positive(float), cli.positive(int)
    p = cli.ArgumentParser(prog="python -m bench.faults", description=_cli_io.about(__doc__))
    p.add_argument("--server-url", default="http://127.0.0.1:30000", help="the server under test")
    p.add_argument("--repeat", type=pos_i, default=20, help="times each fault is injected")
    p.add_argument("--workers", type=pos_i, default=4, help="faults injected at once")
    p.add_argument("--rate", type=cli.positive(float, allow_zero=True), default=2.0, help="background conversation load, req/s (0: none)")
    p.add_argument("--load-s", type=pos, default=240.0, help="span of the background load")
    p.add_argument("--load-input-cap", type=pos_i, default=32000,
                   help="the background conversation's prompts are cut to this many tokens (and to the context "
                        "less 1024); 8000 is the capped workload whose goodput the reliability runs are rated by")
    p.add_argument("--context-len", type=pos_i, default=131072, help="the server's context length")
    p.add_argument("--long-tokens", type=pos_i, default=16384, help="tokens of a long prompt")
    p.add_argument("--preempt-tokens", type=pos_i, default=100_000,
                   help="disconnect_preempted's long prompt: its prefill must outlast a short prompt's TTFT SLO "
                        "for the mux to preempt it (100K tokens take ~6 s on a whole H100)")
    p.add_argument("--preempt-wait-s", type=pos, default=60.0,
                   help="disconnect_preempted: how long short prompts keep arriving behind the long one, waiting "
                        "for a preemption (under load the long prompt may queue before its prefill starts)")
    p.add_argument("--kv-burst", type=pos_i, default=40,
                   help="long prompts sent at once (40 x 16K tokens overfill an 8B model's pool on an 80 GB GPU)")
    p.add_argument("--kv-new-tokens", type=pos_i, default=256,
                   help="each burst prompt's output: decode growing past what admission reserved is what "
                        "makes SGLang retract")
    p.add_argument("--faults", default=",".join(FAULTS), help="comma list of the faults to inject")
    p.add_argument("--external-load", action="store_true",
                   help="another command (a soak) supplies the load and is still running: after the faults only "
                        "/health is checked (its backlog keeps running + queued above 0)")
    p.add_argument("--sigterm-pid", type=pos_i, default=None, help="last: SIGTERM this server process under load")
    p.add_argument("--kill-rank", type=cli.positive(int, allow_zero=True), default=None,
                   help="last: SIGKILL this TP rank's scheduler under load (with --server-pid); the server "
                        "must exit within 60 s")
    p.add_argument("--server-pid", type=pos_i, default=None, help="the server process, for --kill-rank")
    p.add_argument("--out", default=None, help="write the outcomes here as JSON (rewritten as they come)")
    a = p.parse_args(argv)
    faults = tuple(x for x in a.faults.split(",") if x)  # "" with --sigterm-pid: only that
    unknown = [f for f in faults if f not in FAULTS]
    if unknown:
        p.error(f"--faults: unknown {', '.join(unknown)}; choose from {', '.join(FAULTS)}")
    if (a.kill_rank is None) != (a.server_pid is None):
        p.error("--kill-rank and --server-pid go together: the rank to kill and the server it belongs to")
    if a.kill_rank is not None and a.sigterm_pid:
        p.error("--kill-rank and --sigterm-pid both end the server: give one")
    if not (faults or a.sigterm_pid or a.kill_rank is not None):
        p.error("--faults is empty: name at least one fault, or give --sigterm-pid or --kill-rank")
    if a.rate > 0 and a.context_len <= 1024:  # the load's prompts are cut to the context less 1024
        p.error(f"--context-len {a.context_len} leaves no room for the background load's prompts: "
                "give the server's context length (> 1024) or --rate 0")
    if not client.health(a.server_url):
        raise cli.UsageError(f"no server answers {a.server_url}/health: start one first (launch/serve.sh)")
    t0 = time.time()
    head = {"date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
            "command": " ".join(["python -m bench.faults", *(argv if argv is not None else sys.argv[1:])])}

    def write(res: dict) -> None:
        if a.out:  # whole-file replace: a reader never sees half a JSON
            tmp = f"{a.out}.tmp"
            with open(tmp, "w") as f:
                f.write(json.dumps(res, indent=1))
            os.replace(tmp, a.out)

    def progress(counts, secs):
        n = sum(sum(v.values()) for v in counts.values())
        print(f"[faults] {n} of {a.repeat * len(faults)} outcomes, {time.time() - t0:.0f} s", file=sys.stderr)
        write({**head, "partial": True, "wall_s": round(time.time() - t0, 1), "counts": counts, "max_seconds": secs})

    load: dict = {}
    th = None
    if a.rate > 0:
        wl = workloads.build("conversation", rate=a.rate, duration_s=a.load_s, arrival="poisson", seed=7,
                             input_cap=min(a.context_len - 1024, a.load_input_cap), salt="faults")

        def bg():
            load.update(soak.outcome(client.run_workload(a.server_url, wl, wl.span_s + 120, progress=False)[0]))

        th = threading.Thread(target=bg)
        th.start()
    res = run_faults(a.server_url, a.repeat, a.workers, a.context_len, a.long_tokens, a.kv_burst, faults,
                     preempt_tokens=a.preempt_tokens, preempt_wait_s=a.preempt_wait_s,
                     kv_new_tokens=a.kv_new_tokens, on_outcome=progress)
    if th is not None:
        th.join()
    after = ({"healthy": client.health(a.server_url), "idle_check": "skipped: --external-load"}
             if a.external_load else settle(a.server_url))
    res.update(load=load, after=after)
    if a.sigterm_pid:
        res["sigterm"] = sigterm(a.server_url, a.sigterm_pid)
    if a.kill_rank is not None:
        res["rank_kill"] = rank_kill(a.server_url, a.server_pid, a.kill_rank)
    res = {**head, "partial": False, "wall_s": round(time.time() - t0, 1), **res}
    write(res)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    cli.run(main)
