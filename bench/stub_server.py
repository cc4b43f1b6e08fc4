"""An aiohttp stand-in for an SGLang server: tests and the client's own capacity.

Routes: ``/generate`` (SGLang native, streaming and not; ``/abort_request`` ends a stream with
finish_reason abort), ``/v1/completions`` (streaming and not), ``/v1/chat/completions``
(streaming and not; a body that is not a JSON object gets SGLang's 400 with a message), ``/health``, ``/get_model_info``, ``/v1/models``, ``/flush_cache``, ``/metrics``.
Each request waits ``ttft`` then emits ``max_new_tokens`` tokens, ``chunk_tokens`` per SSE
chunk, one chunk every ``chunk_tokens * tbt`` (on an absolute schedule, so sleeps do not
drift). The streamed format follows SGLang: /generate chunks are ``data: {"text",
"output_ids", "meta_info": {id, finish_reason, prompt_tokens, completion_tokens,
cached_tokens}}`` with cumulative text/ids (the final one also with SGLang's ``--enable-metrics``
stamps, ``bench.client.SERVER_STAMPS``), then ``data: [DONE]``; chat chunks are OpenAI
``chat.completion.chunk`` objects (usage on every chunk when ``continuous_usage_stats``).
``cached_tokens`` comes from a prefix cache at ``cache_block``-token granularity (chat:
word granularity), so prefix reuse is observable.

Fault injection (counted over all generation requests, 1-based): ``error_every=k`` answers
every k-th request with HTTP ``error_status``; ``hang_every=k`` makes every k-th request
stall before its first token (for client timeouts). ``die_on_bad_ids=V``: a /generate whose
``input_ids`` hold an id < 0 or >= V kills the stub, as such an id kills SGLang 0.5.16: every
later connection is dropped unanswered (``bench.fuzz`` counts the death); the command line's
stub exits then.

Auth as SGLang's ``--api-key`` (``sglang/srt/utils/auth.py``): with ``api_key`` set, a request
without ``Authorization: Bearer <key>`` gets 401 ``{"error": "Unauthorized"}`` on every path
(unknown ones too) except those starting ``/health`` or ``/metrics`` and OPTIONS;
``open_paths`` are served without the key all the same (an auth hole, for ``bench.auth_probe``'s
tests).

    python -m bench.stub_server --port 30000 --ttft-ms 50 --tbt-ms 20
"""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import threading
import time
import uuid
import zlib
from dataclasses import dataclass

from aiohttp import web

from sglang_mux import cli

from sglang_mux import cli_io as _cli_io


@dataclass
class StubConfig:
    ttft_s: float = 0.05
    tbt_s: float = 0.02
    chunk_tokens: int = 1
    error_every: int = 0
    error_status: int = 500
    hang_every: int = 0
    hang_s: float = 3600.0
    cache_block: int = 16
    preempt_tokens: int = 0  # > 0: a shorter prompt arriving during a prompt this long's prefill counts a preemption
    long_queue_s: float = 0.0  # a prompt of >= preempt_tokens queues this long before its prefill starts
    die_on_bad_ids: int = 0  # > 0: the vocabulary; an input id outside [0, it) kills the stub
    exit_on_death: bool = False  # the process exits then (the command line's stub, as SGLang's server does)
    api_key: str | None = None
    open_paths: tuple = ()  # served without the key even with api_key set (an auth hole)


class PrefixCache:
    """Longest previously seen prefix, at block granularity (unbounded; a stub)."""

    def __init__(self, block: int):
        self.block, self.seen = block, set()

    def match_and_insert(self, ids: list) -> int:
        h, hit, still = b"", 0, True
        for i in range(len(ids) // self.block):
            h = hashlib.blake2b(h + repr(ids[i * self.block:(i + 1) * self.block]).encode(),
                                digest_size=16).digest()
            if still and h in self.seen:
                hit = (i + 1) * self.block
            else:
                still = False
                self.seen.add(h)
        return hit


class Stub:
    def __init__(self, cfg: StubConfig):
        self.cfg, self.count, self.flushes = cfg, 0, 0
        self.cache = PrefixCache(cfg.cache_block)
        self.chat_cache = PrefixCache(1)
        self.aborted: set = set()
        self.long_prefills, self.preemptions = 0, 0
        self.long_open, self.long_open_max = 0, 0  # long prompts being served at once (and the most)
        self.dead = False

    @web.middleware
    async def gate(self, request: web.Request, handler):
        """A dead stub drops every connection unanswered; with ``api_key``, SGLang's 401."""
        if self.dead:
            request.transport.abort()
            raise web.HTTPServiceUnavailable()  # never sent: the connection is gone
        key, path = self.cfg.api_key, request.path
        if key and request.method != "OPTIONS" and not path.startswith(("/health", "/metrics")) \
                and path not in self.cfg.open_paths and request.headers.get("Authorization") != f"Bearer {key}":
            return web.json_response({"error": "Unauthorized"}, status=401)
        return await handler(request)

    def _fault(self) -> str | None:
        self.count += 1
        c = self.cfg
        if c.error_every and self.count % c.error_every == 0:
            return "error"
        if c.hang_every and self.count % c.hang_every == 0:
            return "hang"
        return None

    async def _tokens(self, n: int):
        """Yield cumulative token counts on the TTFT/TBT schedule."""
        c = self.cfg
        t0 = time.perf_counter()
        done, k = 0, max(1, c.chunk_tokens)
        i = 0
        while done < n:
            due = t0 + c.ttft_s + i * k * c.tbt_s
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            done = min(n, done + k)
            i += 1
            yield done

    # ------------------------------------------------------------------ /generate
    @staticmethod
    async def _body(request: web.Request):
        """The JSON object of a request, or the 400 SGLang answers a body that is not one."""
        try:
            body = json.loads(await request.read())
        except (ValueError, UnicodeDecodeError, RecursionError) as e:  # RecursionError: nested 10,000 deep
            return None, web.json_response({"error": {"message": f"invalid JSON body: {e}"}}, status=400)
        if not isinstance(body, dict):
            return None, web.json_response({"error": {"message": "the body must be a JSON object"}}, status=400)
        return body, None

    async def generate(self, request: web.Request) -> web.StreamResponse:
        body, bad = await self._body(request)
        if bad is not None:
            return bad
        sp = body.get("sampling_params") or {}
        n = int(sp.get("max_new_tokens", 16))
        ids = body.get("input_ids")
        v = self.cfg.die_on_bad_ids
        if v and isinstance(ids, list) and any(isinstance(i, int) and not 0 <= i < v for i in ids):
            self.dead = True  # SGLang's scheduler dies on the embedding lookup; its server with it
            request.transport.abort()
            if self.cfg.exit_on_death:
                os._exit(3)
            raise web.HTTPServiceUnavailable()
        if ids is None:
            ids = [zlib.crc32(w.encode()) % 50000 for w in str(body.get("text", "")).split()]
        rid = body.get("rid") or uuid.uuid4().hex
        fault = self._fault()
        if fault == "error":
            return web.json_response({"error": {"message": "stub error"}},
                                     status=self.cfg.error_status)
        cached = self.cache.match_and_insert(list(ids))
        long = 0 < self.cfg.preempt_tokens <= len(ids)
        if not long and self.long_prefills:
            self.preemptions += 1
        if fault == "hang":
            await asyncio.sleep(self.cfg.hang_s)

        received = time.time()
        stamps: dict = {}  # SGLang's with --enable-metrics, on the final chunk (bench.client.SERVER_STAMPS)

        def out(done: int, finished: bool) -> dict:
            toks = [1000 + j % 1000 for j in range(done)]
            if done and not stamps:
                now = time.time()
                stamps.update(request_received_ts=received, forward_entry_time=received + queue_s,
                              prefill_finished_time=now, queue_time=queue_s, response_sent_to_client_ts=now)
            if finished:
                stamps["request_finished_ts"] = time.time()
            return {"text": " tok" * done, "output_ids": toks, "meta_info": {
                "id": rid, "finish_reason": {"type": "length", "length": n} if finished else None,
                "prompt_tokens": len(ids), "completion_tokens": done, "cached_tokens": cached,
                # send time on CLOCK_MONOTONIC (= client's perf_counter): client lag probe
                "stub_t": time.perf_counter(), **(stamps if finished else {})}}

        queue_s = self.cfg.long_queue_s if long else 0.0
        if long:
            self.long_open += 1
            self.long_open_max = max(self.long_open_max, self.long_open)
        prefilling = False  # counted in long_prefills, from its queue's end to its first token

        def prefill(on: bool) -> None:
            nonlocal prefilling
            if long and on != prefilling:
                self.long_prefills += 1 if on else -1
                prefilling = on

        try:
            if not body.get("stream"):
                await asyncio.sleep(queue_s)
                prefill(True)
                async for done in self._tokens(n):
                    prefill(False)
                return web.json_response(out(n, True))
            resp = await self._sse(request)  # headers at once, as SGLang's streaming response
            await asyncio.sleep(queue_s)
            prefill(True)
            async for done in self._tokens(n):
                prefill(False)  # its prefill is over at the first token
                if rid in self.aborted:  # as SGLang ends an aborted request's stream
                    ev = out(done, True)
                    ev["meta_info"]["finish_reason"] = {"type": "abort"}
                    await resp.write(b"data: " + json.dumps(ev).encode() + b"\n\n")
                    break
                await resp.write(b"data: " + json.dumps(out(done, done >= n)).encode() + b"\n\n")
            await resp.write(b"data: [DONE]\n\n")
            return resp
        finally:
            prefill(False)  # a client gone before its first token
            self.long_open -= int(long)

    async def abort(self, request: web.Request) -> web.Response:
        body, bad = await self._body(request)
        if bad is not None:
            return bad
        self.aborted.add(body.get("rid"))
        return web.Response(text="")

    # ------------------------------------------------------------------ chat
    async def chat(self, request: web.Request) -> web.StreamResponse:
        body, bad = await self._body(request)
        if bad is not None:
            return bad
        n = int(body.get("max_completion_tokens") or body.get("max_tokens") or 16)
        words = []
        for m in body.get("messages", []):
            words += [f"<{m.get('role')}>"] + str(m.get("content", "")).split()
        prompt_ids = [zlib.crc32(w.encode()) for w in words]
        fault = self._fault()
        if fault == "error":
            return web.json_response({"object": "error", "message": "stub error", "type": "stub",
                                      "code": self.cfg.error_status}, status=self.cfg.error_status)
        cached = self.chat_cache.match_and_insert(prompt_ids)
        if fault == "hang":
            await asyncio.sleep(self.cfg.hang_s)
        cid = "chatcmpl-" + uuid.uuid4().hex
        # like a radix cache, keep the answer too: the next turn's prompt starts with it
        answer = prompt_ids + [zlib.crc32(b"<assistant>")] + [zlib.crc32(b"w")] * n
        usage = lambda c: {"prompt_tokens": len(prompt_ids), "completion_tokens": c,  # noqa: E731
                           "total_tokens": len(prompt_ids) + c,
                           "prompt_tokens_details": {"cached_tokens": cached}}
        if not body.get("stream"):
            async for done in self._tokens(n):
                pass
            self.chat_cache.match_and_insert(answer)
            return web.json_response({"id": cid, "object": "chat.completion", "choices": [{
                "index": 0, "message": {"role": "assistant", "content": " w" * n},
                "finish_reason": "length"}], "usage": usage(n)})
        so = body.get("stream_options") or {}
        cont, incl = bool(so.get("continuous_usage_stats")), bool(so.get("include_usage"))

        def chunk(delta: dict, finish=None, use=None) -> bytes:
            d = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()),
                 "model": "stub", "choices": [{"index": 0, "delta": delta,
                                               "finish_reason": finish}]}
            if use is not None:
                d["usage"] = use
            return b"data: " + json.dumps(d).encode() + b"\n\n"

        resp = await self._sse(request)
        await resp.write(chunk({"role": "assistant", "content": ""},
                               use=usage(0) if cont else None))
        prev = 0
        async for done in self._tokens(n):
            await resp.write(chunk({"content": " w" * (done - prev)},
                                   "length" if done >= n else None, usage(done) if cont else None))
            prev = done
        self.chat_cache.match_and_insert(answer)
        if incl:
            d = {"id": cid, "object": "chat.completion.chunk", "choices": [], "usage": usage(n)}
            await resp.write(b"data: " + json.dumps(d).encode() + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        return resp

    async def completions(self, request: web.Request) -> web.StreamResponse:
        """OpenAI text completions, the least the fuzz needs: ``max_tokens`` words, streamed
        (``text_completion`` chunks, then [DONE]) or not; no cache, no faults."""
        body, bad = await self._body(request)
        if bad is not None:
            return bad
        n = int(body.get("max_tokens") or 16)
        cid = "cmpl-" + uuid.uuid4().hex
        choice = lambda text, fr: {"index": 0, "text": text, "finish_reason": fr}  # noqa: E731
        if not body.get("stream"):
            async for _ in self._tokens(n):
                pass
            return web.json_response({"id": cid, "object": "text_completion", "choices": [choice(" w" * n, "length")]})
        resp = await self._sse(request)
        async for done in self._tokens(n):
            d = {"id": cid, "object": "text_completion", "choices": [choice(" w", "length" if done >= n else None)]}
            await resp.write(b"data: " + json.dumps(d).encode() + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        return resp

    @staticmethod
    async def _sse(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache"})
        await resp.prepare(request)
        return resp

    # ------------------------------------------------------------------ misc
    async def health(self, request):
        return web.Response(text="")

    async def metrics(self, request):
        """A Prometheus page like SGLang's with --enable-metrics (client.scrape_metrics tests)."""
        return web.Response(text=(
            "# HELP python_gc_objects_collected_total Objects collected during gc\n"
            "python_gc_objects_collected_total{generation=\"0\"} 1.0\n"
            "# HELP sglang:cache_flushes_total Cache flushes.\n"
            "# TYPE sglang:cache_flushes_total counter\n"
            f"sglang:cache_flushes_total {self.flushes}\n"
            "# TYPE sglang_mux:preemptions_total counter\n"
            f"sglang_mux:preemptions_total{{model_name=\"stub\"}} {self.preemptions}\n"
            f"sglang_mux:preemptions_created{{model_name=\"stub\"}} 1.7e9\n"
            f"stub_long_prompts_open_max {self.long_open_max}\n"))

    async def model_info(self, request):
        return web.json_response({"model_path": "stub", "tokenizer_path": None,
                                  "is_generation": True})

    async def models(self, request):
        return web.json_response({"object": "list", "data": [{"id": "stub", "object": "model"}]})

    async def flush(self, request):
        self.flushes += 1
        self.cache = PrefixCache(self.cfg.cache_block)
        self.chat_cache = PrefixCache(1)
        return web.Response(text="Cache flushed.")


STUB_KEY = web.AppKey("stub", Stub)


def make_app(cfg: StubConfig | None = None) -> web.Application:
    stub = Stub(cfg or StubConfig())
    app = web.Application(client_max_size=1 << 28,   # prompts of 100k+ token ids
                          middlewares=[stub.gate])
    app[STUB_KEY] = stub
    app.router.add_post("/generate", stub.generate)
    app.router.add_post("/v1/chat/completions", stub.chat)
    app.router.add_post("/v1/completions", stub.completions)
    app.router.add_post("/abort_request", stub.abort)
    app.router.add_get("/health", stub.health)
    app.router.add_get("/metrics", stub.metrics)
    app.router.add_get("/get_model_info", stub.model_info)
    app.router.add_get("/v1/models", stub.models)
    app.router.add_route("*", "/flush_cache", stub.flush)
    return app


async def start(cfg: StubConfig | None = None, host: str = "127.0.0.1", port: int = 0):
    """Start in the running loop; returns (runner, port). Stop with ``await runner.cleanup()``."""
    # handler_cancellation: a client disconnect cancels the request (SGLang aborts it too)
    runner = web.AppRunner(make_app(cfg), access_log=None, handler_cancellation=True,
                           shutdown_timeout=2.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]


@contextlib.contextmanager
def in_thread(cfg: StubConfig | None = None, host: str = "127.0.0.1"):
    """Serve on a free port from a background thread (own event loop); yields the base URL."""
    loop = asyncio.new_event_loop()
    box: dict = {}
    up = threading.Event()

    def serve():
        asyncio.set_event_loop(loop)
        box["runner"], box["port"] = loop.run_until_complete(start(cfg, host, 0))
        up.set()
        loop.run_forever()
        loop.run_until_complete(box["runner"].cleanup())
        loop.close()

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    if not up.wait(10):
        raise RuntimeError("stub did not start")
    try:
        yield f"http://{host}:{box['port']}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        th.join(10)


def main(argv: list[str] | None = None) -> None:
    ms, every = cli.positive(float, allow_zero=True), cli.positive(int, allow_zero=True)
    p = cli.ArgumentParser(prog="python -m bench.stub_server", description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--port", type=_cli_io.port, default=30000, help="0: any free port")
    p.add_argument("--ttft-ms", type=ms, default=50.0, help="time to the first token")
    p.add_argument("--tbt-ms", type=ms, default=20.0, help="time between token chunks")
    p.add_argument("--chunk-tokens", type=cli.positive(int), default=1, help="tokens per streamed chunk")
    p.add_argument("--error-every", type=every, default=0, help="answer every Nth request with an HTTP error (0: never)")
    p.add_argument("--hang-every", type=every, default=0, help="hang every Nth request (0: never)")
    p.add_argument("--die-on-bad-ids", type=every, default=0,
                   help="the vocabulary: a /generate input id outside [0, it) kills the stub (0: never)")
    p.add_argument("--api-key", default=None, help="as SGLang's: 401 without 'Authorization: Bearer KEY'")
    p.add_argument("--workers", type=cli.positive(int), default=1,
                   help="processes sharing the port (SO_REUSEPORT); each has its own cache")
    # A fake 'system' in bench.run passes SGLang-style args too: ignore what is not ours.
    a, _unknown = p.parse_known_args(argv)
    cfg = StubConfig(ttft_s=a.ttft_ms / 1e3, tbt_s=a.tbt_ms / 1e3, chunk_tokens=a.chunk_tokens,
                     error_every=a.error_every, hang_every=a.hang_every, die_on_bad_ids=a.die_on_bad_ids,
                     exit_on_death=True, api_key=a.api_key)
    if a.workers > 1:
        import multiprocessing as mp
        ctx = mp.get_context("fork")
        for _ in range(a.workers - 1):     # daemonic: they go when this process exits
            ctx.Process(target=_serve, args=(cfg, a.host, a.port, True), daemon=True).start()
    _serve(cfg, a.host, a.port, a.workers > 1)


def _serve(cfg: StubConfig, host: str, port: int, reuse_port: bool) -> None:
    web.run_app(make_app(cfg), host=host, port=port, access_log=None, print=None,
                reuse_port=reuse_port or None, handler_cancellation=True, shutdown_timeout=5.0)


if __name__ == "__main__":
    cli.run(main)
