"""Access with SGLang's ``--api-key``: every route of a running server refuses a request without
the key (401), and only ``/health*`` and ``/metrics*`` answer as they do without one (issue 19).

    python -m bench.auth_probe --server-url http://127.0.0.1:30000 --api-key KEY --routes sglang --out auth.json

Routes: ``--routes sglang`` lists SGLang's own, ``app.routes`` of
``sglang.srt.entrypoints.http_server`` (every path and method, path parameters filled with a
dummy value; websocket routes left out), on the GPU host only; ``--routes FILE`` reads a JSON
list of ``[method, path]`` or ``[method, path, level]`` (level ``admin_force``: SGLang's
ADMIN_FORCE). ``GET /health``, ``GET /metrics`` and a path no route has are probed as well.

Each route goes three ways without the right key: no ``Authorization``, a wrong key, and the
right key without its ``Bearer`` scheme. Expected (SGLang 0.5.16, ``sglang/srt/utils/auth.py``):
401; 403 for an ADMIN_FORCE route (refused while the server has no ``--admin-api-key``); for a
path starting ``/health`` or ``/metrics`` a 2xx, as without a key (liveness probes and
Prometheus). A harmless few (``GET /health``, ``GET /get_model_info``, a one-token
``/generate``) go with the right key too and must be served: a server that refuses everything
is not one that checks keys.

Safety: nothing is sent with the key but those few. Without it, SGLang's auth middleware refuses
a request before any handler runs; the bodies are empty JSON objects all the same, and first
``GET /get_model_info`` must be refused without the key: if it is not, auth is not on
(``auth_off``) and only ``/health``, ``/metrics`` and the harmless few are probed.

Result: per route its ``statuses`` (``none``, ``wrong``, ``no_scheme``; ``key`` for the harmless
few), ``served_without_key`` (2xx without the right key outside ``/health*`` and ``/metrics*``:
an auth hole; must be 0), ``ok``; over all ``served_without_key``, ``reached_without_key``
(protected routes answered anything but their refusal), ``ok`` and the routes that are not.
"""
from __future__ import annotations

import datetime as dt
import http.client
import json
import re
import sys
import time
import urllib.parse
from pathlib import Path

from sglang_mux import cli
from sglang_mux import cli_io as _cli_io

from . import client
from .fuzz import redact

OPEN = ("/health", "/metrics")  # always allowed by SGLang's middleware (prefixes)
NO_ROUTE = "/auth-probe-no-such-route"  # refused before routing: 401, not 404
GATE = ("GET", "/get_model_info")  # must be refused without the key before anything else is sent
HARMLESS = {("GET", "/health"): None, ("GET", "/get_model_info"): None,
            ("POST", "/generate"): {"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 1}}}
WAYS = ("none", "wrong", "no_scheme")  # without the right key
BODYLESS = ("GET", "HEAD")


def sglang_routes() -> list[tuple[str, str, str]]:
    """(method, path, auth level) of every HTTP route of SGLang's server app; path parameters
    (``{name}``, ``{name:path}``) filled with "dummy"."""
    try:
        from sglang.srt.entrypoints import http_server
    except ImportError as e:
        raise cli.UsageError(f"--routes sglang: cannot import sglang.srt.entrypoints.http_server ({e}): it "
                             "lists the routes on the GPU host; elsewhere give a JSON file of [method, path]") from None
    out = []
    for r in http_server.app.routes:
        methods = getattr(r, "methods", None)
        if not methods:  # websocket routes and mounts
            continue
        level = getattr(getattr(r, "endpoint", None), "_auth_level", None)
        path = re.sub(r"\{[^}]*\}", "dummy", r.path)
        out += [(m, path, str(getattr(level, "value", level) or "normal")) for m in sorted(methods)]
    return out


def file_routes(path: str) -> list[tuple[str, str, str]]:
    rows = _cli_io.read_json(path, "routes file", 'a JSON list of [method, path] (or [method, path, level])')
    ok = isinstance(rows, list) and rows and all(
        isinstance(r, list) and len(r) in (2, 3) and all(isinstance(x, str) for x in r) and r[1].startswith("/")
        for r in rows)
    if not ok:
        raise cli.UsageError(f"{path}: expected a JSON list of [method, path] (or [method, path, level]), "
                             f'e.g. [["POST", "/generate"], ["GET", "/v1/models"]]')
    return [(r[0].upper(), r[1], r[2] if len(r) == 3 else "normal") for r in rows]


def expected(path: str, level: str) -> int | str:
    """What a request without the right key must get: "2xx" on an open path, else the refusal."""
    if path.startswith(OPEN):
        return "2xx"
    return 403 if level == "admin_force" else 401


def request(base: str, method: str, path: str, auth: str | None, body: dict | None, timeout_s: float) -> int | None:
    """The status of one request (None: no answer)."""
    u = urllib.parse.urlsplit(base)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout_s)
    h = {"Authorization": auth} if auth is not None else {}
    data = None
    if method not in BODYLESS:
        data, h["Content-Type"] = json.dumps(body if body is not None else {}).encode(), "application/json"
    try:
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        r.read()
        return r.status
    except (OSError, http.client.HTTPException):
        return None
    finally:
        c.close()


def _fits(status: int | None, want: int | str) -> bool:
    return status is not None and (200 <= status < 300 if want == "2xx" else status == want)


def probe(base: str, api_key: str, routes: list[tuple[str, str, str]], timeout_s: float = 30.0) -> dict:
    """Every route without the right key (``WAYS``), the harmless few with it; see the module's
    docstring for what is expected and the result."""
    auth = {"none": None, "wrong": f"Bearer not-{api_key}", "no_scheme": api_key}
    gate = request(base, *GATE, None, None, timeout_s)
    auth_off = gate not in (401, 403)
    todo: dict[tuple[str, str], str] = {}  # (method, path) -> auth level; the first listing wins
    for m, path, level in [*routes, *[("GET", o, "normal") for o in OPEN], ("GET", NO_ROUTE, "normal"),
                           *[(m, path, "normal") for m, path in HARMLESS]]:
        todo.setdefault((m, path), level)
    if auth_off:  # never send the rest to a server that serves without a key
        todo = {k: v for k, v in todo.items() if k[1].startswith(OPEN) or k in HARMLESS}
    out = []
    for (method, path), level in todo.items():
        want = expected(path, level)
        body = HARMLESS.get((method, path))
        st = {w: request(base, method, path, auth[w], body, timeout_s) for w in WAYS}
        row = {"method": method, "path": path, "level": level, "expected": want, "statuses": st}
        served = 0 if want == "2xx" else sum(1 for s in st.values() if s is not None and 200 <= s < 300)
        ok = all(_fits(s, want) for s in st.values())
        if (method, path) in HARMLESS:
            st["key"] = request(base, method, path, f"Bearer {api_key}", body, timeout_s)
            ok = ok and _fits(st["key"], "2xx")
        out.append({**row, "served_without_key": served, "ok": ok})
    reached = sum(1 for r in out if r["expected"] != "2xx"
                  for w in WAYS if r["statuses"][w] is not None and r["statuses"][w] not in (401, 403))
    bad = [f"{r['method']} {r['path']}: {r['statuses']} (expected {r['expected']})" for r in out if not r["ok"]]
    return {"auth_off": auth_off, "gate_status": gate, "routes_probed": len(out),
            "served_without_key": sum(r["served_without_key"] for r in out), "reached_without_key": reached,
            "ok": not auth_off and not bad, "not_ok": bad, "routes": out}


def main(argv: list[str] | None = None) -> None:
    p = cli.ArgumentParser(prog="python -m bench.auth_probe", description=_cli_io.about(__doc__))
    p.add_argument("--server-url", default="http://127.0.0.1:30000", help="a server started with --api-key")
    p.add_argument("--api-key", required=True, help="the key the server was started with")
    p.add_argument("--routes", required=True, help="'sglang' (SGLang's own routes; GPU host) or a JSON file of "
                                                   "[method, path]")
    p.add_argument("--timeout-s", type=cli.positive(float), default=30.0, help="per request")
    p.add_argument("--out", default=None, help="also write the whole result here as JSON")
    a = p.parse_args(argv)
    if not a.api_key.strip():
        p.error("--api-key is empty: give the key the server was started with")
    routes = sglang_routes() if a.routes == "sglang" else file_routes(a.routes)
    if not client.health(a.server_url):
        raise cli.UsageError(f"no server answers {a.server_url}/health: start one first (launch/serve.sh --api-key KEY)")
    t0 = time.time()
    res = probe(a.server_url, a.api_key, routes, a.timeout_s)
    res = {"date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
           "command": " ".join(["python -m bench.auth_probe", *redact(argv if argv is not None else sys.argv[1:])]),
           "server_url": a.server_url, "routes_from": a.routes, "wall_s": round(time.time() - t0, 1), **res}
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=1))
    print(json.dumps({k: res[k] for k in ("auth_off", "routes_probed", "served_without_key", "reached_without_key",
                                          "ok", "not_ok")}, indent=1))


if __name__ == "__main__":
    cli.run(main)
