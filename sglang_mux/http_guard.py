"""The server's front door: every request body `request_guard.check` refuses is answered here with
its 4xx, and never reaches SGLang's handlers, its tokenizer or its scheduler.

`RequestGuard` is an ASGI middleware on SGLang's FastAPI app (`install`, from `launch_server`):
for a guarded route it reads the whole body (refusing one past the size limit as it arrives),
checks it, and passes it on unchanged; any other request passes untouched, its body streamed.
The limits (vocabulary, context length) are SGLang's own, read from its tokenizer manager at the
first guarded request, once the engine is up. SGLang's API-key middleware is added after this one,
so it runs first: a request without the key is refused before its body is read.

With ``--tokenizer-worker-num`` > 1 uvicorn imports the app in each worker process by name; the
app it is told to import, ``sglang_mux.http_guard:app``, is SGLang's with this middleware added.
"""

from __future__ import annotations

import logging
from typing import Awaitable, Callable

from sglang_mux.request_guard import GUARDED_PATHS, Limits, Rejected, check, error_body

logger = logging.getLogger(__name__)

SGLANG_APP = "sglang.srt.entrypoints.http_server:app"
GUARDED_APP = "sglang_mux.http_guard:app"


class RequestGuard:
    """ASGI middleware. ``limits``: a `Limits`, or a callable that returns one (None while the
    engine is not up: a guarded request then waits for nothing and is answered 503, as SGLang
    answers before it is ready)."""

    def __init__(self, app, limits: Limits | Callable[[], Limits | None]):
        self.app = app
        self._limits = limits if isinstance(limits, Limits) else None
        self._read_limits = None if isinstance(limits, Limits) else limits

    def limits(self) -> Limits | None:
        if self._limits is None and self._read_limits is not None:
            self._limits = self._read_limits()
        return self._limits

    async def __call__(self, scope, receive, send) -> None:
        if scope.get("type") != "http" or scope.get("path") not in GUARDED_PATHS \
                or scope.get("method") not in ("POST", "PUT"):
            await self.app(scope, receive, send)
            return
        limits = self.limits()
        if limits is None:
            await _answer(send, 503, b'{"object": "error", "message": "the server is starting; try again shortly", '
                                     b'"type": "ServiceUnavailableError", "param": null, "code": 503}')
            return
        body, too_big = await _read_body(receive, limits.max_body_bytes)
        if body is None:  # the client went away before sending its body
            return
        try:
            if too_big:
                raise Rejected(413, f"the request body is over {limits.max_body_bytes} bytes; send a shorter prompt")
            check(scope["method"], scope["path"], _content_type(scope), body, limits)
        except Rejected as r:
            await _answer(send, r.status, error_body(r))
            return
        await self.app(scope, _replay(body, receive), send)


async def _read_body(receive, cap: int) -> tuple[bytes | None, bool]:
    """The request's body, and whether it went past ``cap`` bytes (then what came is dropped and
    the rest drained, so that the answer reaches a client still sending). None: disconnected."""
    chunks, size, over = [], 0, False
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            return None, over
        part = msg.get("body", b"")
        size += len(part)
        if size > cap:
            over, chunks = True, []
        elif part:
            chunks.append(part)
        if not msg.get("more_body", False):
            return b"".join(chunks), over


def _replay(body: bytes, receive) -> Callable[[], Awaitable[dict]]:
    """A ``receive`` that gives the app the body already read, then what the client sends next
    (a disconnect)."""
    sent = False

    async def again() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again


def _content_type(scope) -> str | None:
    for k, v in scope.get("headers", ()):
        if k.lower() == b"content-type":
            return v.decode("latin-1")
    return None


async def _answer(send, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def sglang_limits() -> Limits | None:
    """The limits of the running engine (SGLang's model config and context length), or None
    before its tokenizer manager exists."""
    from sglang.srt.entrypoints.http_server import get_global_state

    state = get_global_state()
    tm = getattr(state, "tokenizer_manager", None)
    if tm is None:
        return None
    return Limits(vocab_size=int(tm.model_config.vocab_size), context_len=int(tm.context_len))


def install(sglang_app) -> None:
    """Add the guard to SGLang's app (before it serves: Starlette builds its middleware stack on
    the first request), and have uvicorn's workers, which import the app by name, import it from
    here. Idempotent."""
    if getattr(sglang_app, "_sglang_mux_guarded", False):
        return
    sglang_app.add_middleware(RequestGuard, limits=sglang_limits)
    sglang_app._sglang_mux_guarded = True


def _guarded_sglang_app():
    from sglang.srt.entrypoints import http_server

    install(http_server.app)
    return http_server.app


def __getattr__(name: str):
    # ``app``: SGLang's, guarded; built on first use, so that importing this module needs no SGLang
    if name == "app":
        return _guarded_sglang_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
