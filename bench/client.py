"""Open-loop asyncio/aiohttp load generator with streaming (SSE) timing.

Arrivals are open-loop: every send time is fixed in advance (``Request.t`` /
``ChatSession.t``) and a slow response never delays a later send; the connection pool is
unbounded (``limit=0``) so it cannot turn the run into a closed loop. Chat turns after the
first are the exception by design: turn k+1 is due when turn k ended plus its think time.

Per request the client records (times in s since the run start, ``perf_counter``):
``scheduled``, ``send`` (just before the POST, after the body is serialized),
``first_token``, ``end``, ``tok_ms`` (every token's arrival, ms after ``send``; the first is
the TTFT), ``output_tokens``, ``prompt_tokens``, ``cached_tokens``, ``finish_reason``,
``status``, ``ok`` and ``error``; ``server``, where the final chunk's ``meta_info`` has them (SGLang
with ``--enable-metrics``), the server's own stamps of the request (`SERVER_STAMPS`: wall-clock
seconds, and ``queue_time`` in s), which split a TTFT at each process it passed
(``bench.analysis.ttft_parts``).

Token arrivals. An SSE chunk is timed when its bytes are read. When one chunk carries k > 1
new tokens (the server batched them, e.g. ``--stream-interval``), the k tokens are all
recorded at that time: the TBT gaps are the real gap for the first of them and 0 for the
other k-1. New tokens per chunk come from ``meta_info.completion_tokens`` (/generate: it is
cumulative whether or not the server streams incrementally) or, for chat, from per-chunk
``usage.completion_tokens`` (we ask for ``continuous_usage_stats``); a server that sends no
per-chunk usage gets one token per non-empty content chunk, and its final usage only fixes
``output_tokens``.

Failures are never dropped: ``error`` is ``http_<status>: ...``, ``server_error: ...``
(error object in the stream), ``abort: ...`` (finish_reason abort), ``incomplete`` (stream
ended without a finish), ``request_timeout`` (per-request client timeout), ``exception: ...``,
``session_aborted`` (a later chat turn whose earlier turn failed), ``worker_lost`` (its
client process died), or ``timeout`` (not finished by the run's global deadline -- also
requests never sent before it).

SSE parsing: data lines (``data: ...``) are handled one by one, which is how SGLang frames
its events. For /generate the per-token hot path reads ``completion_tokens`` with a regex
after the last ``"meta_info"`` key and JSON-decodes only the final chunk: default
(cumulative) chunks repeat the whole output, so decoding each in full is O(n^2).

Capacity: one event loop streams a few thousand chunks/s with < 5 ms P99 added lag
(``bench/results/client_capacity.json``); ``run_workload(procs=N)`` shards the workload over N
forked processes sharing one schedule origin. ``server_clock=True`` records ``lag_ms`` per
chunk from the stub's ``stub_t`` send stamps (used by ``bench.client_capacity``).
"""
from __future__ import annotations

import asyncio
import json
import re
import socket
import time
from typing import Any

import aiohttp
from tqdm import tqdm

from .workloads import ChatSession, Request, Workload

_DEC = json.JSONDecoder()
_JSON = {"Content-Type": "application/json"}


def _rec(rid: str, kind: str, scheduled: float | None, expected: int, prompt: int | None,
         **extra) -> dict:
    return dict(rid=rid, kind=kind, scheduled=scheduled, send=None, first_token=None, end=None,
                tok_ms=[], output_tokens=0, expected_output_tokens=expected,
                prompt_tokens=prompt, cached_tokens=None, finish_reason=None, status=None,
                ok=False, error="timeout", **extra)


_CT = re.compile(rb'"completion_tokens":\s*(\d+)')
_FR_NULL = re.compile(rb'"finish_reason":\s*null')
_STUB_T = re.compile(rb'"stub_t":\s*([0-9.eE+-]+)')
# SGLang 0.5.16's meta_info with --enable-metrics (wall clock, s): the tokenizer manager's receipt,
# the scheduler's first forward of the request and the end of its prefill (its result processed),
# the tokenizer manager's hand-off of the first chunk to the HTTP stream and its receipt of the
# last output; queue_time: the request's wait in the scheduler's queue (s)
SERVER_STAMPS = ("request_received_ts", "forward_entry_time", "prefill_finished_time", "queue_time",
                 "response_sent_to_client_ts", "request_finished_ts")


def parse_generate_event(data: bytes) -> tuple[dict, str | None]:
    """(meta_info, error) of one /generate SSE payload.

    Hot path (every token): a regex reads ``completion_tokens`` after the last
    ``"meta_info"`` key (a JSON string cannot contain that key unescaped) while
    ``finish_reason`` is null; the final chunk, or anything unusual, is JSON-decoded."""
    if data.startswith(b'{"error"'):
        return {}, "server_error: " + data[:300].decode(errors="replace")
    i = data.rfind(b'"meta_info"')
    if i >= 0:
        m = _CT.search(data, i)
        if m and _FR_NULL.search(data, i):
            return {"completion_tokens": int(m.group(1))}, None
        try:
            meta, _ = _DEC.raw_decode(data[data.find(b":", i) + 1:].decode().lstrip())
            if "completion_tokens" in meta:
                return meta, None
        except ValueError:
            pass
    obj = json.loads(data)
    if "error" in obj:
        return {}, "server_error: " + json.dumps(obj["error"])[:300]
    meta = dict(obj.get("meta_info") or {})
    meta.setdefault("completion_tokens", len(obj.get("output_ids") or []))
    return meta, None


async def _sse(resp: aiohttp.ClientResponse):
    """Yield (arrival time, data payload) for each ``data:`` line as bytes arrive."""
    buf = b""
    async for piece in resp.content.iter_any():
        t = time.perf_counter()
        buf += piece
        start = 0
        while True:
            k = buf.find(b"\n", start)
            if k < 0:
                break
            line = buf[start:k].rstrip(b"\r")
            start = k + 1
            if line.startswith(b"data:"):
                yield t, line[5:].strip()
        buf = buf[start:]


class LoadClient:
    def __init__(self, base_url: str, *, request_timeout_s: float | None = None,
                 progress: bool = True, model: str | None = None, start_at: float | None = None,
                 counter=None, server_clock: bool = False, api_key: str | None = None):
        self.url = base_url.rstrip("/")
        # a server started with --api-key answers 401 to a request without it
        self.headers = {**_JSON, "Authorization": f"Bearer {api_key}"} if api_key else _JSON
        self.request_timeout_s = request_timeout_s
        self.start_at = start_at          # common perf_counter start of sharded workers
        self.counter = counter            # shared finished-request count (sharded progress)
        self.server_clock = server_clock  # record lag_ms from the stub's "stub_t" send times
        self.progress = progress
        self.model = model
        self.t0 = 0.0
        self.pbar: tqdm | None = None

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def _arrive(self, rec: dict, t_abs: float, k: int) -> None:
        if k <= 0:
            return
        if rec["first_token"] is None:
            rec["first_token"] = t_abs - self.t0
        ms = round((t_abs - self.t0 - rec["send"]) * 1000.0, 3)
        rec["tok_ms"].extend([ms] * k)        # k>1 in one chunk: gaps of 0 after the first
        rec["output_tokens"] += k

    def _done(self, rec: dict) -> None:
        rec["end"] = self.now()
        if self.pbar is not None:
            self.pbar.update(1)
        if self.counter is not None:
            with self.counter.get_lock():
                self.counter.value += 1

    async def _guard(self, rec: dict, coro) -> Any:
        """Run one request; turn every way it can fail into a recorded error."""
        try:
            return await coro
        except asyncio.CancelledError:
            rec["ok"], rec["error"] = False, "timeout"
            self._done(rec)
            raise
        except (asyncio.TimeoutError, aiohttp.ServerTimeoutError):
            rec["ok"], rec["error"] = False, "request_timeout"
        except Exception as e:  # noqa: BLE001 - any client-side failure is a failed request
            rec["ok"], rec["error"] = False, f"exception: {type(e).__name__}: {e}"[:300]
        self._done(rec)
        return None

    def _timeout(self) -> aiohttp.ClientTimeout:
        return aiohttp.ClientTimeout(total=self.request_timeout_s)

    # -------------------------------------------------------------- /generate
    async def _generate(self, http: aiohttp.ClientSession, req: Request, rec: dict) -> None:
        body = json.dumps({"input_ids": req.input_ids.tolist(), "stream": True,
                           "sampling_params": {"max_new_tokens": req.max_new_tokens,
                                               "temperature": 0, "ignore_eos": True}}).encode()
        rec["send"] = self.now()
        async with http.post(self.url + "/generate", data=body, headers=self.headers,
                             timeout=self._timeout()) as resp:
            rec["status"] = resp.status
            if resp.status != 200:
                rec["error"] = f"http_{resp.status}: {(await resp.text())[:200]}"
                return self._done(rec)
            prev, got_done, err = 0, False, None
            async for t, data in _sse(resp):
                if data == b"[DONE]":
                    got_done = True
                    break
                meta, err = parse_generate_event(data)
                if err:
                    break
                if self.server_clock and (m := _STUB_T.search(data)):
                    rec.setdefault("lag_ms", []).append(round((t - float(m.group(1))) * 1e3, 3))
                ct = int(meta.get("completion_tokens") or 0)
                self._arrive(rec, t, ct - prev)
                prev = max(prev, ct)
                for key in ("prompt_tokens", "cached_tokens"):
                    if meta.get(key) is not None:
                        rec[key] = meta[key]
                fr = meta.get("finish_reason")
                if fr:
                    rec["finish_reason"] = fr.get("type") if isinstance(fr, dict) else fr
                    stamps = {k: meta[k] for k in SERVER_STAMPS if meta.get(k) is not None}  # the final chunk's
                    if stamps:
                        rec["server"] = stamps
                    if rec["finish_reason"] == "abort":
                        msg = fr.get("message") if isinstance(fr, dict) else fr
                        err = "abort: " + str(msg)[:200]
            self._finish(rec, err, got_done)

    def _finish(self, rec: dict, err: str | None, got_done: bool) -> None:
        if err:
            rec["error"] = err
        elif rec["finish_reason"] is None and not got_done:
            rec["error"] = "incomplete"
        else:
            rec["ok"], rec["error"] = True, None
        self._done(rec)

    # -------------------------------------------------------------- chat
    async def _chat(self, http: aiohttp.ClientSession, messages: list, max_tokens: int,
                    rec: dict) -> str:
        body = json.dumps({
            "model": self.model or "default", "messages": messages, "max_tokens": max_tokens,
            "temperature": 0, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}).encode()
        rec["send"] = self.now()
        text: list[str] = []
        async with http.post(self.url + "/v1/chat/completions", data=body, headers=self.headers,
                             timeout=self._timeout()) as resp:
            rec["status"] = resp.status
            if resp.status != 200:
                rec["error"] = f"http_{resp.status}: {(await resp.text())[:200]}"
                self._done(rec)
                return ""
            prev, continuous, got_done, err, usage_ct = 0, False, False, None, None
            async for t, data in _sse(resp):
                if data == b"[DONE]":
                    got_done = True
                    break
                obj = json.loads(data)
                if "error" in obj or obj.get("object") == "error":
                    err = "server_error: " + json.dumps(obj.get("error", obj))[:300]
                    break
                usage = obj.get("usage") or {}
                choices = obj.get("choices") or []
                delta = (choices[0].get("delta") or {}) if choices else {}
                piece = (delta.get("content") or "") + (delta.get("reasoning_content") or "")
                text.append(delta.get("content") or "")
                if choices and usage.get("completion_tokens") is not None:
                    continuous = True
                if continuous and usage.get("completion_tokens") is not None:
                    ct = int(usage["completion_tokens"])
                    self._arrive(rec, t, ct - prev)
                    prev = max(prev, ct)
                elif choices and piece:
                    self._arrive(rec, t, 1)
                if usage.get("completion_tokens") is not None:
                    usage_ct = int(usage["completion_tokens"])
                if usage.get("prompt_tokens") is not None:
                    rec["prompt_tokens"] = usage["prompt_tokens"]
                details = usage.get("prompt_tokens_details") or {}
                if details.get("cached_tokens") is not None:
                    rec["cached_tokens"] = details["cached_tokens"]
                if choices and choices[0].get("finish_reason"):
                    rec["finish_reason"] = choices[0]["finish_reason"]
                    if rec["finish_reason"] == "abort":
                        err = "abort"
            if usage_ct is not None and usage_ct > rec["output_tokens"]:
                rec["output_tokens"] = usage_ct      # no per-chunk usage: count fixed, times not
            self._finish(rec, err, got_done)
        return "".join(text)

    async def _session(self, http, s: ChatSession, recs: list[dict]) -> None:
        messages: list[dict] = [{"role": "system", "content": s.system}]
        for j, turn in enumerate(s.turns):
            rec = recs[j]
            if j > 0:
                rec["scheduled"] = recs[j - 1]["end"] + turn.think_s
                await asyncio.sleep(max(0.0, rec["scheduled"] - self.now()))
            messages.append({"role": "user", "content": turn.user})
            answer = await self._guard(rec, self._chat(http, messages, turn.max_tokens, rec))
            if not rec["ok"]:
                for r in recs[j + 1:]:
                    r["error"] = "session_aborted"
                    self._done(r)
                return
            messages.append({"role": "assistant", "content": answer or ""})

    # -------------------------------------------------------------- the run
    @staticmethod
    def _records(wl: Workload) -> tuple[list[dict], list[tuple[float, Any, Any]]]:
        """One pre-made record per request (chat: per turn), failed 'timeout' until done."""
        items: list[tuple[float, Any, Any]] = []
        records: list[dict] = []
        for r in wl.requests:
            rec = _rec(r.rid, "generate", r.t, r.max_new_tokens, r.prompt_len, **r.meta)
            records.append(rec)
            items.append((r.t, r, rec))
        for s in wl.sessions:
            recs = [_rec(f"{s.sid}-t{j}", "chat", s.t if j == 0 else None, t.max_tokens, None,
                         session=s.sid, turn=j) for j, t in enumerate(s.turns)]
            records.extend(recs)
            items.append((s.t, s, recs))
        return records, items

    async def run(self, wl: Workload, deadline_s: float) -> tuple[list[dict], dict]:
        """Replay ``wl``; everything unfinished ``deadline_s`` after the start fails as timeout."""
        records, items = self._records(wl)
        items.sort(key=lambda x: x[0])
        conn = aiohttp.TCPConnector(limit=0, ttl_dns_cache=None)
        tasks: list[asyncio.Task] = []
        wall0, t_created = time.time(), time.perf_counter()
        async with aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=None),
                                         auto_decompress=False) as http:
            if wl.sessions and self.model is None:
                self.model = await fetch_model_name(http, self.url, self.headers)
            self.pbar = tqdm(total=len(records), disable=not self.progress, mininterval=1.0,
                             desc=wl.name, unit="req")
            if self.start_at is not None:      # CLOCK_MONOTONIC: one clock for all processes
                await asyncio.sleep(max(0.0, self.start_at - time.perf_counter()))
            self.t0 = time.perf_counter() if self.start_at is None else self.start_at
            deadline = self.t0 + deadline_s

            async def dispatch():
                for t, item, rec in items:
                    delay = self.t0 + t - time.perf_counter()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    if isinstance(item, Request):
                        coro = self._guard(rec, self._generate(http, item, rec))
                    else:
                        coro = self._session(http, item, rec)
                    tasks.append(asyncio.create_task(coro))

            disp = asyncio.create_task(dispatch())
            await asyncio.wait([disp], timeout=max(0.0, deadline - time.perf_counter()))
            if not disp.done():
                disp.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=max(0.0, deadline - time.perf_counter()))
            late = [t for t in tasks if not t.done()] + ([disp] if not disp.done() else [])
            for t in late:
                t.cancel()
            await asyncio.gather(*late, return_exceptions=True)
            self.pbar.close()
            self.pbar = None
        # t0 on the machine's monotonic clock too (perf_counter is CLOCK_MONOTONIC on Linux, as the
        # server's time.monotonic): a mux timeline's "time" less it is seconds since t0.
        info = dict(t0_wall=wall0 + (self.t0 - t_created), t0_monotonic=self.t0, deadline_s=deadline_s,
                    n_requests=len(records), cancelled_at_deadline=len(late),
                    elapsed_s=time.perf_counter() - self.t0)
        for rec in records:        # fixed rounding keeps the JSONL compact
            for k in ("scheduled", "send", "first_token", "end"):
                if rec[k] is not None:
                    rec[k] = round(rec[k], 6)
        return records, info


async def fetch_model_name(http: aiohttp.ClientSession, url: str, headers: dict | None = None) -> str:
    try:
        async with http.get(url + "/v1/models", headers=headers, timeout=aiohttp.ClientTimeout(total=10)) as r:
            data = (await r.json()).get("data") or []
            return data[0]["id"] if data else "default"
    except Exception:  # noqa: BLE001 - fall back to SGLang's default name
        return "default"


def run_workload(base_url: str, wl: Workload, deadline_s: float, *,
                 request_timeout_s: float | None = None, progress: bool = True,
                 procs: int = 1, server_clock: bool = False, api_key: str | None = None) -> tuple[list[dict], dict]:
    """Replay ``wl`` -> (records in workload order, run info).

    ``procs > 1`` shards the workload round-robin (requests; chat: whole sessions) over that
    many forked processes, each with its own event loop and the SAME schedule origin
    (perf_counter is the system-wide CLOCK_MONOTONIC on Linux): one Python event loop tops
    out at a few thousand streamed chunks/s (see bench/results/client_capacity.json)."""
    procs = max(1, min(procs, len(wl.requests) + len(wl.sessions)))
    if procs == 1:
        client = LoadClient(base_url, request_timeout_s=request_timeout_s, progress=progress,
                            server_clock=server_clock, api_key=api_key)
        return asyncio.run(client.run(wl, deadline_s))
    return _run_sharded(base_url, wl, deadline_s, request_timeout_s, progress, procs, server_clock, api_key)


def _worker(conn, base_url, wl, deadline_s, request_timeout_s, start_at, counter,
            server_clock, api_key) -> None:
    client = LoadClient(base_url, request_timeout_s=request_timeout_s, progress=False,
                        start_at=start_at, counter=counter, server_clock=server_clock, api_key=api_key)
    conn.send(asyncio.run(client.run(wl, deadline_s)))
    conn.close()


def _run_sharded(base_url, wl, deadline_s, request_timeout_s, progress, procs, server_clock, api_key):
    import multiprocessing as mp
    from multiprocessing.connection import wait as mp_wait
    ctx = mp.get_context("fork")
    shards = [Workload(wl.name, wl.kind, requests=wl.requests[i::procs],
                       sessions=wl.sessions[i::procs], options=wl.options) for i in range(procs)]
    counter = ctx.Value("i", 0)
    start_at = time.perf_counter() + 1.0 + 0.1 * procs   # every worker up before the origin
    workers, pending = [], {}
    for sh in shards:
        r, w = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_worker, daemon=True, args=(
            w, base_url, sh, deadline_s, request_timeout_s, start_at, counter, server_clock, api_key))
        p.start()
        w.close()
        workers.append(p)
        pending[r] = sh
    results: dict = {}
    bar = tqdm(total=wl.n_requests, disable=not progress, mininterval=1.0, desc=wl.name,
               unit="req")
    hard_end = start_at + deadline_s + 60.0               # bounded even if a worker hangs
    while pending and time.perf_counter() < hard_end:
        for r in mp_wait(list(pending), timeout=0.5):
            try:
                results[id(pending[r])] = r.recv()
            except EOFError:                               # worker died: its shard fails
                pass
            del pending[r]
        bar.update(counter.value - bar.n)
    bar.close()
    for p in workers:
        p.join(timeout=5)
        if p.is_alive():
            p.kill()
            p.join()
    records, infos = [], []
    for sh in shards:
        if id(sh) in results:
            recs, info = results[id(sh)]
            infos.append(info)
        else:
            recs = LoadClient(base_url)._records(sh)[0]
            for rec in recs:
                rec["error"] = "worker_lost"
        records += recs
    order = {r.rid: i for i, r in enumerate(wl.requests)}
    order.update({s.sid: len(order) + i for i, s in enumerate(wl.sessions)})
    records.sort(key=lambda x: (order.get(x.get("session") or x["rid"], 0), x.get("turn") or 0))
    info = dict(t0_wall=min((i["t0_wall"] for i in infos), default=None),
                t0_monotonic=min((i["t0_monotonic"] for i in infos), default=None), deadline_s=deadline_s,
                n_requests=len(records), procs=procs,
                cancelled_at_deadline=sum(i["cancelled_at_deadline"] for i in infos),
                elapsed_s=max((i["elapsed_s"] for i in infos), default=None),
                workers_lost=procs - len(infos))
    return records, info


# ------------------------------------------------------------------ server helpers

async def _get_ok(url: str, path: str, timeout: float = 5.0, method: str = "GET") -> bool:
    try:
        async with aiohttp.ClientSession() as http:
            async with http.request(method, url.rstrip("/") + path,
                                    timeout=aiohttp.ClientTimeout(total=timeout)) as r:
                await r.read()
                return r.status == 200
    except Exception:  # noqa: BLE001 - not up (yet)
        return False


def health(url: str, timeout: float = 5.0) -> bool:
    return asyncio.run(_get_ok(url, "/health", timeout))


async def _get_text(url: str, path: str, timeout: float = 10.0) -> str | None:
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(url.rstrip("/") + path,
                                timeout=aiohttp.ClientTimeout(total=timeout)) as r:
                text = await r.text()
                return text if r.status == 200 else None
    except Exception:  # noqa: BLE001 - no endpoint: the caller records that
        return None


def scrape_metrics(url: str, prefix: str = "sglang_mux") -> str | None:
    """The Prometheus exposition lines of ``/metrics`` whose metric name starts with ``prefix``
    (HELP/TYPE lines included); None when the server has no metrics endpoint (SGLang serves
    it only with ``--enable-metrics``)."""
    text = asyncio.run(_get_text(url, "/metrics"))
    if text is None:
        return None
    keep = [ln for ln in text.splitlines()
            if ln.startswith(prefix) or (ln.startswith("# ") and ln.split()[2:3] and
                                         ln.split()[2].startswith(prefix))]
    return "\n".join(keep) + ("\n" if keep else "")


def flush_cache(url: str, tries: int = 10) -> bool:
    """POST /flush_cache; SGLang refuses while requests are running, so retry a few times."""
    for i in range(tries):
        if asyncio.run(_get_ok(url, "/flush_cache", 30.0, "POST")):
            return True
        time.sleep(1.0)
    return False


# ---- blocking helpers for tools that speak http.client (bench.faults, bench.fuzz) -------------

def sse_events(resp, deadline: float | None = None):
    """The parsed ``data:`` events of a server-sent-events response (an http.client response)
    until [DONE] or its end; ``deadline`` (time.monotonic): TimeoutError past it, so that a
    stream that never stops trickling tokens is caught too."""
    for raw in resp:
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError("the stream outlived its timeout")
        line = raw.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            return
        try:
            yield json.loads(data)
        except ValueError:
            continue


def drop(conn) -> None:
    """Close an http.client connection as a client that goes away does: the server sees the
    socket end at once."""
    try:
        conn.sock.shutdown(socket.SHUT_RDWR)
    except (OSError, AttributeError):
        pass
    conn.close()

