"""The front door (sglang_mux.http_guard) on a stand-in ASGI app: what the validator refuses never
reaches the app, what it accepts reaches it byte for byte, and other routes pass untouched."""

import asyncio
import json

import pytest

from sglang_mux.http_guard import GUARDED_APP, SGLANG_APP, RequestGuard, install
from sglang_mux.request_guard import Limits

LIMITS = Limits(vocab_size=1000, context_len=4096, max_body_bytes=1 << 16)


class App:
    """Records what reaches it (path and body) and answers 200."""

    def __init__(self):
        self.seen = []

    async def __call__(self, scope, receive, send):
        body = b""
        while True:
            msg = await receive()
            body += msg.get("body", b"")
            if not msg.get("more_body"):
                break
        self.seen.append((scope["method"], scope["path"], body))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


def call(guard, method, path, body=b"", content_type="application/json", chunk=None):
    """(status, response body) of one request through ``guard``, the body sent in pieces of ``chunk``."""
    pieces = [body[i:i + chunk] for i in range(0, len(body), chunk)] if chunk and body else [body]
    messages = [{"type": "http.request", "body": p, "more_body": i < len(pieces) - 1} for i, p in enumerate(pieces)]
    sent = []

    async def receive():
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(msg):
        sent.append(msg)

    headers = [(b"content-type", content_type.encode())] if content_type else []
    asyncio.run(guard({"type": "http", "method": method, "path": path, "headers": headers}, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    return start["status"], b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


@pytest.mark.parametrize("path, body, ctype, status, says", [
    ("/generate", json.dumps({"input_ids": [1, -7, 3]}).encode(), "application/json", 400, "input_ids"),
    ("/generate", json.dumps({"input_ids": [[1, 2], [3, 1000]]}).encode(), "application/json", 400, "input_ids"),
    ("/v1/chat/completions", b"[1, 2, 3]", "application/json", 400, "JSON object"),
    ("/v1/completions", b'{"prompt": "hi"}', "text/plain", 415, "application/json"),
    ("/generate", b'{"text": "' + b"a" * (1 << 17) + b'"}', "application/json", 413, "bytes"),
])
def test_what_the_validator_refuses_never_reaches_the_app(path, body, ctype, status, says):
    app = App()
    got, answer = call(RequestGuard(app, LIMITS), "POST", path, body, ctype, chunk=4096)
    err = json.loads(answer)
    assert got == status and err["code"] == status and says in err["message"] and app.seen == []


def test_an_accepted_body_reaches_the_app_byte_for_byte_and_other_routes_pass():
    app = App()
    guard = RequestGuard(app, LIMITS)
    body = json.dumps({"text": "hello", "sampling_params": {"max_new_tokens": 8, "temperature": 0}}).encode()
    assert call(guard, "POST", "/generate", body, chunk=7)[0] == 200
    assert call(guard, "POST", "/flush_cache", b"junk", "text/plain")[0] == 200  # not a guarded route
    assert call(guard, "GET", "/generate", b"")[0] == 200  # a method the route does not take: SGLang's 405
    assert app.seen == [("POST", "/generate", body), ("POST", "/flush_cache", b"junk"), ("GET", "/generate", b"")]


def test_the_engines_limits_are_read_once_it_is_up():
    app, reads = App(), []

    def limits():
        reads.append(1)
        return None if len(reads) == 1 else LIMITS

    guard = RequestGuard(app, limits)
    body = json.dumps({"text": "hi"}).encode()
    assert call(guard, "POST", "/generate", body)[0] == 503  # the engine is not up yet
    assert call(guard, "POST", "/generate", body)[0] == 200
    assert call(guard, "POST", "/generate", body)[0] == 200 and len(reads) == 2


def test_install_adds_the_guard_once_and_names_the_guarded_app():
    class FastAPILike:
        def __init__(self):
            self.middleware = []

        def add_middleware(self, cls, **kw):
            self.middleware.append((cls, kw))

    app = FastAPILike()
    install(app)
    install(app)
    assert [cls for cls, _ in app.middleware] == [RequestGuard]
    assert (SGLANG_APP, GUARDED_APP) == ("sglang.srt.entrypoints.http_server:app", "sglang_mux.http_guard:app")
