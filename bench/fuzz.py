"""Hostile input against a running server: every malformed request must get a 4xx with a
message, the valid requests sent between them must still be served, and the server must live
(issue 19; what an attacker would send).

    python -m bench.fuzz --server-url http://127.0.0.1:30000 --n 2000 [--api-key KEY] --out fuzz.json

Cases (``cases``, deterministic for a seed) go to SGLang's native ``/generate`` and the OpenAI
``/v1/completions`` and ``/v1/chat/completions``: bodies that are not JSON, not an object, not
UTF-8, empty, truncated, nested 10,000 deep (an array, an object), 8 MB and (``rare``: one in
``--rare-every``) over 32 MiB; required fields missing; fields of the wrong type; out-of-range
numbers; bare ``NaN``, ``Infinity``, ``-Infinity`` and ``1e400`` in every numeric sampling field;
huge ``n`` (10**6) and max tokens (10**15, 2**63); token ids out of the vocabulary or negative in
``input_ids`` (these two kill plain SGLang 0.5.16; ``--skip`` can leave them out),
``stop_token_ids``, ``token_ids_logprob``, ``logit_bias`` keys and completions' token-id
prompts; prompts longer than the context; a valid JSON body sent as ``text/plain``, a form or
multipart. Where the right answer is any status below 500 (``expect="below_500"``, outcome
``answered``): the admin and metrics endpoints with junk bodies (``/abort_request``,
``/flush_cache``, GETs of ``/get_model_info``, ``/get_server_info``, ``/v1/models``,
``/metrics``, ``/health``) and wrong methods (405). Nothing that pauses, stops, reloads or
slows the server is sent. Streams cut short (valid streamed requests): ``disconnect`` (the
client closes after the first event; ``disconnect_early``: right after the headers), outcome
``disconnected``; ``abort`` (a /generate with its own ``rid``, aborted through
``/abort_request`` after its first event), outcome ``aborted`` when its stream ends early,
``abort-ignored`` when it runs to its full length. Every ``--valid-every``-th request is a
valid one.

Outcomes: ``4xx`` (the status with a non-empty message: what a malformed request must get),
``4xx-silent`` (no message), ``5xx``, ``2xx`` (a malformed request accepted), ``answered``,
``disconnected``, ``aborted``, ``abort-ignored``, ``refused-<status>`` (a stream case's valid
request refused below 500), ``timeout``, ``conn`` (connection refused or reset: a crash?);
valid requests ``ok`` or ``valid-failed-<status>``. Only 5xx, timeouts and connection errors
count against the server. A ``conn`` or ``timeout`` outcome followed by a failed /health is a
death: sending stops there (a dead server costs seconds, not a timeout per request) and the
rest are ``unsent``, as are those left when ``--budget-s`` runs out. ``--api-key``: every
request carries ``Authorization: Bearer KEY`` (a server started with SGLang's ``--api-key``).
"""
from __future__ import annotations

import concurrent.futures as cf
import datetime as dt
import http.client
import json
import random
import sys
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass

from sglang_mux import cli

from . import client
from sglang_mux import cli_io as _cli_io

GEN, COMP, CHAT = "/generate", "/v1/completions", "/v1/chat/completions"
ADMIN = "admin"  # in ``paths``: the admin and metrics endpoints' cases
TAG = {GEN: "generate", COMP: "completions", CHAT: "chat"}  # case names begin with these (or "admin")
MAX = {GEN: "max_new_tokens", COMP: "max_tokens", CHAT: "max_tokens"}
# the outcomes that are right: for a malformed request, a valid one, an admin call, a stream cut short
RIGHT = ("4xx", "ok", "answered", "disconnected", "aborted")
JSON = "application/json"


@dataclass(frozen=True)
class Case:
    name: str  # category, e.g. "generate:max_new_tokens=negative"
    path: str
    body: bytes
    valid: bool = False
    method: str = "POST"
    content_type: str | None = JSON  # None: no Content-Type header
    # what is right: "4xx" a 4xx with a message; "below_500" any answer below 500; "stream" the
    # valid streamed request served, then cut short as ``action`` says
    expect: str = "4xx"
    action: str = "send"  # or a stream cut short: "disconnect", "disconnect_early", "abort"
    rare: bool = False  # sent once every ``rare_every`` malformed requests only (a 32 MiB body)


def _j(obj) -> bytes:
    return json.dumps(obj).encode()


def _raw(obj, token: str) -> bytes:
    """``obj`` as JSON with its "@RAW@" string replaced by ``token`` verbatim: the bare tokens
    (NaN, 1e400, 10,000 brackets) that json.dumps would not write."""
    return json.dumps(obj).replace('"@RAW@"', token).encode()


def _valid(path: str, max_tokens: int = 4, **extra) -> dict:
    """A valid request of ``path`` asking ``max_tokens``; ``extra`` sampling fields go where the
    route takes them (native: ``sampling_params``; OpenAI: top level)."""
    if path == GEN:
        return {"text": "hello", "sampling_params": {"max_new_tokens": max_tokens, **extra}}
    if path == COMP:
        return {"model": "m", "prompt": "hi", "max_tokens": max_tokens, **extra}
    return {"model": "m", "messages": [{"role": "user", "content": "hello"}], "max_tokens": max_tokens, **extra}


def _with_main(path: str, value) -> dict:
    """A valid request of ``path`` whose main input (text, prompt, messages) is ``value``."""
    key = {GEN: "text", COMP: "prompt", CHAT: "messages"}[path]
    return {**_valid(path), key: value}


JUNK = [None, True, -1, 3.5, "x", [], {}, [[[[]]]], {"a": {"b": {"c": [1, {"d": None}]}}}, [None, "a", 1]]
BAD_NUMBERS = {"negative": -5, "zero_neg": -0.5, "huge": 10 ** 15, "string": "ten", "list": [1], "object": {"n": 1},
               "bool_list": [True]}
NON_FINITE = {"nan": "NaN", "inf": "Infinity", "neg_inf": "-Infinity", "1e400": "1e400"}
SAMPLING = ("temperature", "top_p", "top_k", "min_p", "frequency_penalty", "presence_penalty", "repetition_penalty", "n")
CONTENT_TYPES = {"text_plain": "text/plain", "form": "application/x-www-form-urlencoded",
                 "multipart": "multipart/form-data; boundary=fuzz"}
DEEP = 10_000


def cases(seed: int = 0, context_len: int = 131072, vocab: int = 128256, big_mb: float = 8.0,
          huge_mb: float = 33.0) -> list[Case]:
    """One of every kind of hostile request (the fuzz cycles through them, ``fuzz``)."""
    rng = random.Random(seed)
    out: list[Case] = []

    def add(name, path, body, **kw):
        out.append(Case(name, path, body if isinstance(body, bytes) else _j(body), **kw))

    past = vocab + 10 ** 6
    for path in (GEN, COMP, CHAT):
        tag, mx = TAG[path], MAX[path]
        add(f"{tag}:body=not_json", path, b"{this is not json")
        add(f"{tag}:body=empty", path, b"")
        add(f"{tag}:body=array", path, b"[1, 2, 3]")
        add(f"{tag}:body=number", path, b"42")
        add(f"{tag}:body=string", path, b'"hello"')
        add(f"{tag}:body=invalid_utf8", path, b'{"text": "\xff\xfe\xfa", "prompt": "\xc3\x28"}')
        add(f"{tag}:body=nan_token", path, b'{"text": "a", "prompt": "a", "temperature": NaN, '
                                           b'"sampling_params": {"temperature": NaN}}')
        add(f"{tag}:body=truncated", path, _j({"text": "hello", "prompt": "hello"})[:-3])
        add(f"{tag}:body=nested_array_10k", path, _raw(_with_main(path, "@RAW@"), "[" * DEEP + "]" * DEEP))
        add(f"{tag}:body=nested_object_10k", path, _raw(_with_main(path, "@RAW@"), '{"a": ' * DEEP + "1" + "}" * DEEP))
        # a body past any sane limit: only every so often (``rare``), so that the fuzz stays fast
        add(f"{tag}:body=over_32mib", path, _raw(_with_main(path, "@RAW@"), '"' + "a " * int(huge_mb * 2 ** 19) + '"'),
            rare=True)
        for field in (*SAMPLING, mx):
            for label, token in NON_FINITE.items():
                add(f"{tag}:{field}={label}", path, _raw(_valid(path, **{field: "@RAW@"}), token))
        add(f"{tag}:n=huge", path, _valid(path, n=10 ** 6))
        add(f"{tag}:{mx}=2p63", path, _valid(path, **{mx: 2 ** 63}))
        for label, ids in {"negative": [-1], "past_vocab": [past]}.items():
            add(f"{tag}:stop_token_ids={label}", path, _valid(path, stop_token_ids=ids))
        for label, bias in {"negative": {"-5": 1.0}, "past_vocab": {str(past): 100.0}}.items():
            add(f"{tag}:logit_bias={label}", path, _valid(path, logit_bias=bias))
        for label, ct in CONTENT_TYPES.items():
            add(f"{tag}:content_type={label}", path, _valid(path), content_type=ct)
        add(f"{tag}:method={'DELETE' if path == GEN else 'GET'}", path, _valid(path),
            method="DELETE" if path == GEN else "GET", expect="below_500")
        stream = _valid(path, 256, ignore_eos=True) if path == GEN else \
            {**_valid(path, 256), "ignore_eos": True}
        stream["stream"] = True
        for action in ("disconnect", "disconnect_early"):
            add(f"{tag}:stream={action}", path, stream, action=action, expect="stream")
    # native /generate
    add("generate:stream=abort", GEN, {**_valid(GEN, 256, ignore_eos=True), "stream": True}, action="abort",
        expect="stream")
    add("generate:missing_prompt", GEN, {"sampling_params": {"max_new_tokens": 4}})
    for i, j in enumerate(JUNK):
        if not isinstance(j, str):
            add(f"generate:text={type(j).__name__}{i}", GEN, {"text": j, "sampling_params": {"max_new_tokens": 4}})
    add("generate:text_and_input_ids", GEN, {"text": "a", "input_ids": [1, 2], "sampling_params": {"max_new_tokens": 4}})
    for label, ids in {"negative_id": [1, -7, 3], "id_past_vocab": [1, past], "float_ids": [1.5, 2.5],
                       "string_ids": ["a", "b"], "nested_ids": [[1, [2]], {"x": 1}], "empty_ids": []}.items():
        add(f"generate:input_ids={label}", GEN, {"input_ids": ids, "sampling_params": {"max_new_tokens": 4}})
    for label, ids in {"negative": [-1], "past_vocab": [past]}.items():
        add(f"generate:token_ids_logprob={label}", GEN, {**_valid(GEN), "return_logprob": True,
                                                          "token_ids_logprob": ids})
    for label, v in BAD_NUMBERS.items():
        add(f"generate:max_new_tokens={label}", GEN, {"text": "hello", "sampling_params": {"max_new_tokens": v}})
    for label, sp in {"temperature_negative": {"temperature": -1.0}, "top_p_over_1": {"top_p": 1.5},
                      "top_p_zero": {"top_p": 0.0}, "top_k_zero": {"top_k": 0},
                      "min_p_over_1": {"min_p": 2.0}, "sampling_params_list": [1, 2],
                      "sampling_params_string": "fast", "stop_number": {"stop": 5},
                      "repetition_penalty_negative": {"repetition_penalty": -1.0},
                      "n_zero": {"n": 0}}.items():
        add(f"generate:{label}", GEN, {"text": "hello", "sampling_params": {"max_new_tokens": 4, **sp}
                                       if isinstance(sp, dict) else sp})
    add("generate:prompt_past_context", GEN, {"input_ids": [rng.randrange(300, vocab - 300)
                                                            for _ in range(context_len + 64)],
                                              "sampling_params": {"max_new_tokens": 4}})
    add("generate:oversized_body", GEN, {"text": "a " * int(big_mb * 2 ** 19), "sampling_params": {"max_new_tokens": 4}})
    # OpenAI completions
    add("completions:missing_prompt", COMP, {"model": "m", "max_tokens": 4})
    for i, j in enumerate((None, 3.5, {"a": 1}, [[["x"]]], [None])):
        add(f"completions:prompt={type(j).__name__}{i}", COMP, {"model": "m", "prompt": j, "max_tokens": 4})
    for label, ids in {"negative_id": [1, -7], "id_past_vocab": [[1, 10 ** 9]]}.items():
        add(f"completions:prompt={label}", COMP, {"model": "m", "prompt": ids, "max_tokens": 4})
    for label, v in BAD_NUMBERS.items():
        add(f"completions:max_tokens={label}", COMP, {"model": "m", "prompt": "hi", "max_tokens": v})
    add("completions:temperature_negative", COMP, {"model": "m", "prompt": "hi", "max_tokens": 4, "temperature": -2})
    add("completions:n_zero", COMP, {"model": "m", "prompt": "hi", "max_tokens": 4, "n": 0})
    add("completions:logprobs_string", COMP, {"model": "m", "prompt": "hi", "max_tokens": 4, "logprobs": "many"})
    # OpenAI chat
    add("chat:missing_messages", CHAT, {"model": "m", "max_tokens": 4})
    for label, msgs in {"messages_string": "hi", "messages_object": {"role": "user"}, "messages_empty": [],
                        "message_missing_role": [{"content": "hi"}], "message_bad_role": [{"role": "wizard", "content": "hi"}],
                        "message_content_number": [{"role": "user", "content": 12}],
                        "message_content_junk": [{"role": "user", "content": [{"type": "nonsense", "x": {"y": [1]}}]}],
                        "message_not_object": ["hi", 3]}.items():
        add(f"chat:{label}", CHAT, {"model": "m", "messages": msgs, "max_tokens": 4})
    user = [{"role": "user", "content": "hello"}]
    for label, v in BAD_NUMBERS.items():
        add(f"chat:max_tokens={label}", CHAT, {"model": "m", "messages": user, "max_tokens": v})
    for label, extra in {"temperature_string": {"temperature": "hot"}, "top_p_negative": {"top_p": -0.1},
                         "n_zero": {"n": 0}, "stream_options_junk": {"stream": True, "stream_options": "yes"},
                         "tools_junk": {"tools": [{"type": "function", "function": 5}]},
                         "response_format_junk": {"response_format": {"type": "nope"}}}.items():
        add(f"chat:{label}", CHAT, {"model": "m", "messages": user, "max_tokens": 4, **extra})
    out += admin_cases()
    return out


def admin_cases() -> list[Case]:
    """The admin and metrics endpoints with junk bodies or wrong methods: any answer below 500
    is right (a GET ignores its body; a wrong method is a 405). None pauses, stops, reloads or
    slows the server, and no abort names ``abort_all`` (it would end the valid load's requests)."""
    junk = b'{"a": [1, {"b": null}], "c": "\xff'
    out = [Case(f"admin:abort_request={label}", "/abort_request", body, expect="below_500")
           for label, body in {"array": b"[1, 2]", "number": b"5", "rid_number": b'{"rid": 5}', "empty": b"{}"}.items()]
    out += [Case("admin:flush_cache=junk", "/flush_cache", junk, expect="below_500"),
            Case("admin:flush_cache=not_json", "/flush_cache", b"{not json", expect="below_500")]
    for path in ("/get_model_info", "/get_server_info", "/v1/models", "/metrics", "/health"):
        out.append(Case(f"admin:{path.strip('/').replace('/', '_')}=get_junk_body", path, junk, method="GET",
                        expect="below_500"))
    for method, path in (("POST", "/health"), ("DELETE", "/v1/models"), ("GET", "/abort_request"),
                         ("PUT", "/get_model_info"), ("PATCH", "/metrics")):
        out.append(Case(f"admin:{path.strip('/').replace('/', '_')}={method}", path, b"{}", method=method,
                        expect="below_500"))
    return out


def valid_cases(model: str = "default") -> list[Case]:
    return [Case("valid:generate", GEN, _j({"text": "The capital of France is",
                                             "sampling_params": {"max_new_tokens": 8, "temperature": 0}}), True),
            Case("valid:completions", COMP, _j({"model": model, "prompt": "Once upon", "max_tokens": 8}), True),
            Case("valid:chat", CHAT, _j({"model": model, "messages": [{"role": "user", "content": "hi"}],
                                         "max_tokens": 8}), True)]


def _conn(base: str, timeout_s: float) -> http.client.HTTPConnection:
    u = urllib.parse.urlsplit(base)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=timeout_s)


def headers(content_type: str | None = JSON, api_key: str | None = None) -> dict:
    h = {"Content-Type": content_type} if content_type else {}
    return {**h, "Authorization": f"Bearer {api_key}"} if api_key else h


def send(base: str, case: Case, timeout_s: float, api_key: str | None = None) -> dict:
    """One request of ``case`` (its method, content type and body; a stream case's cut as its
    action says): the status, the error message and an excerpt, or the outcome of no answer."""
    if case.action != "send":
        return _stream(base, case, timeout_s, api_key)
    t0 = time.perf_counter()
    c = _conn(base, timeout_s)
    try:
        try:
            c.request(case.method, case.path, body=case.body, headers=headers(case.content_type, api_key))
        except (BrokenPipeError, ConnectionResetError):
            pass  # a server may answer (413) and close before it read a huge body: read that answer
        r = c.getresponse()
        data = r.read(1 << 16)
    except TimeoutError:
        return {"outcome": "timeout", "status": None, "s": time.perf_counter() - t0}
    except (ConnectionError, http.client.HTTPException, OSError) as e:
        return {"outcome": "conn", "status": None, "error": repr(e)[:200], "s": time.perf_counter() - t0}
    finally:
        c.close()
    return {"status": r.status, "message": _message(data), "excerpt": data[:200].decode(errors="replace"),
            "s": time.perf_counter() - t0}


def _stream(base: str, case: Case, timeout_s: float, api_key: str | None) -> dict:
    """A valid streamed request cut short: ``disconnect_early`` closes once the headers are in,
    ``disconnect`` after the first event; ``abort`` gives the request its own rid, posts
    /abort_request for it after the first event and reads the stream to its end (within
    ``timeout_s``): ``aborted`` if it ended before its full length, else ``abort-ignored``."""
    t0 = time.perf_counter()
    return {**_cut(base, case, timeout_s, api_key), "s": time.perf_counter() - t0}


def _cut(base: str, case: Case, timeout_s: float, api_key: str | None) -> dict:
    deadline = time.monotonic() + timeout_s
    body, rid = case.body, None
    if case.action == "abort":
        rid = f"fuzz-abort-{uuid.uuid4().hex}"  # unique: SGLang refuses a rid in flight, aborts by prefix
        body = _j({**json.loads(body), "rid": rid})
    c = _conn(base, timeout_s)
    res: dict = {"status": None}
    try:
        c.request("POST", case.path, body=body, headers=headers(case.content_type, api_key))
        r = c.getresponse()
        res["status"] = r.status
        if r.status != 200:
            data = r.read(1 << 16)
            return {**res, "message": _message(data), "excerpt": data[:200].decode(errors="replace")}
        if case.action == "disconnect_early":
            return {**res, "outcome": "disconnected"}
        events = client.sse_events(r, deadline)
        last = next(events, None)  # the first event (the last too, for a stream done at once)
        if case.action == "disconnect":
            return {**res, "outcome": "disconnected"}
        ac = _conn(base, timeout_s)
        try:
            ac.request("POST", "/abort_request", body=_j({"rid": rid}), headers=headers(JSON, api_key))
            st = ac.getresponse().status
        finally:
            ac.close()
        if st >= 500:
            return {"status": st, "outcome": "5xx", "error": "/abort_request answered it"}
        for ev in events:
            last = ev
        fr = ((last or {}).get("meta_info") or {}).get("finish_reason") or {}
        ran_out = (fr.get("type") if isinstance(fr, dict) else fr) == "length"
        return {**res, "outcome": "abort-ignored" if ran_out else "aborted"}
    except TimeoutError:
        return {**res, "outcome": "timeout"}
    except (ConnectionError, http.client.HTTPException, OSError) as e:
        return {**res, "outcome": "conn", "error": repr(e)[:200]}
    finally:
        client.drop(c)


def alive(base: str, api_key: str | None = None, timeout_s: float = 30.0, tries: int = 2) -> bool:
    """/health answers 200 (of ``tries``, a second apart: one slow answer is not a death).
    SGLang's /health generates one token and gives up after 20 s, hence the timeout."""
    for i in range(tries):
        c = _conn(base, timeout_s)
        try:
            c.request("GET", "/health", headers=headers(None, api_key))
            if c.getresponse().status == 200:
                return True
        except (OSError, http.client.HTTPException):
            pass
        finally:
            c.close()
        if i + 1 < tries:
            time.sleep(1.0)
    return False


def _message(data: bytes) -> str:
    """The error text of an SGLang / OpenAI error body (``{"error": {"message"}}``, ``{"message"}``,
    ``{"detail"}``) or the plain body."""
    try:
        d = json.loads(data)
    except ValueError:
        return data.decode(errors="replace").strip()[:300]
    if isinstance(d, dict):
        e = d.get("error")
        m = (e.get("message") if isinstance(e, dict) else e) or d.get("message") or d.get("detail")
        return (m if isinstance(m, str) else json.dumps(m) if m else "")[:300]
    return ""


def classify(case: Case, res: dict) -> str:
    st = res.get("status")
    if st is None or res.get("outcome"):  # no answer (timeout, conn, unsent), or a stream case's own
        return res["outcome"]
    if case.valid:
        return "ok" if 200 <= st < 300 else f"valid-failed-{st}"
    if st >= 500:
        return "5xx"
    if case.expect == "below_500":
        return "answered"
    if case.expect == "stream":  # a valid request refused: not the server's fault, nor right
        return f"refused-{st}"
    if 400 <= st < 500:
        return "4xx" if res.get("message") else "4xx-silent"
    return "2xx"


def schedule(bad: list[Case], good: list[Case], n: int, valid_every: int, rare_every: int, seed: int) -> list[Case]:
    """``n`` malformed requests, whole seeded permutations of the common cases one after another,
    every ``rare_every``-th a rare one instead (0: none), and a valid one after every
    ``valid_every`` (0: none)."""
    rng = random.Random(seed)
    common, rare = [c for c in bad if not c.rare], [c for c in bad if c.rare]
    if not common:  # only rare cases asked for: they are the rotation
        common, rare = rare, []
    mal: list[Case] = []
    order = list(range(len(common)))
    while len(mal) < n:
        rng.shuffle(order)
        mal += [common[i] for i in order[: n - len(mal)]]
    if rare and rare_every:
        for j, k in enumerate(range(rare_every - 1, n, rare_every)):
            mal[k] = rare[j % len(rare)]
    plan: list[Case] = []
    for sent, c in enumerate(mal, 1):
        plan.append(c)
        if valid_every and sent % valid_every == 0:
            plan.append(good[(sent // valid_every) % len(good)])
    return plan


def fuzz(base: str, n: int = 1000, valid_every: int = 10, seed: int = 0, workers: int = 8,
         timeout_s: float = 120.0, context_len: int = 131072, vocab: int = 128256, model: str = "default",
         big_mb: float = 8.0, paths: tuple[str, ...] = (GEN, COMP, CHAT, ADMIN), bad: list[Case] | None = None,
         skip: tuple[str, ...] = (), *, api_key: str | None = None, huge_mb: float = 33.0,
         rare_every: int = 500, budget_s: float | None = None) -> dict:
    """``n`` malformed requests (``schedule`` over ``bad``, default ``cases``) to ``paths`` (the
    routes; ``ADMIN``: the admin endpoints' cases) with a valid one after every ``valid_every``,
    ``workers`` at a time; returns the counts and every outcome that is not right. ``skip``
    names cases left out. A death (a connection error or timeout, then /health failing) or
    ``budget_s`` passing ends the sending: the rest are counted ``unsent``.

    Result: ``malformed`` (planned, >= n), ``malformed_sent``, ``valid``, ``valid_sent``,
    ``unsent``, ``counts`` {outcome: n}, ``by_case`` {case: {outcome: n}}, ``five_xx`` (answers
    of status >= 500), ``deaths`` (0 or 1), ``death`` (when, and the case whose failed request found it: not
    always the killer, which by_case shows by its ``conn``),
    ``all_malformed_right``, ``all_valid_ok``, ``server_alive_after``, ``not_right`` (the first
    200) and ``not_right_total``, ``skipped``."""
    bad = bad if bad is not None else cases(seed, context_len, vocab, big_mb, huge_mb)
    unknown = set(skip) - {c.name for c in bad}
    if unknown:
        raise ValueError(f"--skip names no case: {sorted(unknown)}; case names are 'path:label' as in by_case")
    bad = [c for c in bad if (c.path in paths or (ADMIN in paths and c.name.startswith("admin:")))
           and c.name not in skip]
    good = [c for c in valid_cases(model) if c.path in paths]
    if not bad or (valid_every and not good):
        raise ValueError(f"no cases for paths {paths}")
    plan = schedule(bad, good, n, valid_every, rare_every, seed)
    stop, lock = threading.Event(), threading.Lock()
    t0, started, death = time.monotonic(), [0], {}

    def one(c: Case) -> dict:
        if stop.is_set() or (budget_s and time.monotonic() - t0 > budget_s):
            return {"outcome": "unsent", "status": None}
        with lock:
            started[0] += 1
        r = send(base, c, timeout_s, api_key)
        if r.get("outcome") in ("conn", "timeout") and not stop.is_set() and not alive(base, api_key):
            with lock:
                if not death:  # the first to find it; the others in flight went down with it
                    death.update(found_by=c.name, outcome=r["outcome"], after_started=started[0],
                                 s=round(time.monotonic() - t0, 1))
            stop.set()
        return r

    with cf.ThreadPoolExecutor(workers) as ex:
        results = list(ex.map(one, plan))
    counts: dict[str, int] = {}
    by_case: dict[str, dict[str, int]] = {}
    wrong = []
    for c, r in zip(plan, results):
        k = classify(c, r)
        counts[k] = counts.get(k, 0) + 1
        by_case.setdefault(c.name, {}).setdefault(k, 0)
        by_case[c.name][k] += 1
        if k not in RIGHT and k != "unsent":
            wrong.append({"case": c.name, "outcome": k, **{x: r.get(x) for x in ("status", "excerpt", "error")}})
    malformed = sum(not c.valid for c in plan)
    unsent_mal = sum(1 for c, r in zip(plan, results) if not c.valid and r.get("outcome") == "unsent")
    unsent = counts.get("unsent", 0)
    alive_after = alive(base, api_key)
    return {"malformed": malformed, "malformed_sent": malformed - unsent_mal, "valid": len(plan) - malformed,
            "valid_sent": len(plan) - malformed - (unsent - unsent_mal), "unsent": unsent, "counts": counts,
            "five_xx": sum(1 for r in results if (r.get("status") or 0) >= 500),
            "deaths": int(bool(death) or not alive_after), "death": death or None,
            "all_malformed_right": sum(1 for c, r in zip(plan, results)
                                       if not c.valid and classify(c, r) in RIGHT) == malformed,
            "all_valid_ok": counts.get("ok", 0) == len(plan) - malformed,
            "server_alive_after": alive_after, "by_case": by_case, "not_right": wrong[:200],
            "not_right_total": len(wrong), "skipped": sorted(skip)}


def redact(argv: list[str]) -> list[str]:
    """A command line to record, the value of ``--api-key`` starred out (results get committed)."""
    out = list(argv)
    for i, x in enumerate(out):
        if x == "--api-key" and i + 1 < len(out):
            out[i + 1] = "***"
        elif x.startswith("--api-key="):
            out[i] = "--api-key=***"
    return out


def main(argv: list[str] | None = None) -> None:
    pos, pos_i = cli.positive(float), cli.positive(int)
    p = cli.ArgumentParser(prog="python -m bench.fuzz", description=_cli_io.about(__doc__))
    p.add_argument("--server-url", default="http://127.0.0.1:30000", help="the server under test")
    p.add_argument("--n", type=pos_i, default=1000, help="malformed requests (at least; valid ones come on top)")
    p.add_argument("--valid-every", type=cli.positive(int, allow_zero=True), default=10,
                   help="a valid request after every this many malformed ones (0: none)")
    p.add_argument("--workers", type=pos_i, default=8, help="requests in flight at once")
    p.add_argument("--seed", type=cli.seed, default=0, help="a whole number >= 0")
    p.add_argument("--timeout-s", type=pos, default=120.0, help="per request")
    p.add_argument("--budget-s", type=cli.positive(float, allow_zero=True), default=0.0,
                   help="stop sending after this many seconds, the rest counted unsent (0: no limit)")
    p.add_argument("--context-len", type=pos_i, default=131072, help="the server's context length")
    p.add_argument("--vocab", type=pos_i, default=128256, help="the model's vocabulary size")
    p.add_argument("--model", default="default", help="the OpenAI 'model' of the valid requests")
    p.add_argument("--big-mb", type=pos, default=8.0, help="size of the oversized body")
    p.add_argument("--huge-mb", type=pos, default=33.0, help="size of the rare body past 32 MiB")
    p.add_argument("--rare-every", type=cli.positive(int, allow_zero=True), default=500,
                   help="one malformed request in this many is a rare case (the huge body; 0: never)")
    p.add_argument("--paths", default=",".join((GEN, COMP, CHAT, ADMIN)),
                   help=f"comma list of the routes to fuzz ({ADMIN}: the admin and metrics endpoints)")
    p.add_argument("--skip", default="", help="comma list of case names to leave out (e.g. a known crash)")
    p.add_argument("--api-key", default=None, help="send 'Authorization: Bearer KEY' (a server with --api-key)")
    p.add_argument("--out", default=None, help="also write the whole result here as JSON")
    a = p.parse_args(argv)
    paths = tuple(x for x in a.paths.split(",") if x)
    odd = [x for x in paths if x not in (GEN, COMP, CHAT, ADMIN)]
    if odd or not paths:
        p.error(f"--paths: {'unknown ' + ', '.join(odd) if odd else 'empty'}; choose from {GEN}, {COMP}, {CHAT}, {ADMIN}")
    skip = tuple(x for x in a.skip.split(",") if x)
    bad = cases(a.seed, a.context_len, a.vocab, a.big_mb, a.huge_mb)
    unknown = sorted(set(skip) - {c.name for c in bad})
    if unknown:
        p.error(f"--skip names no case: {', '.join(unknown)}; case names are 'path:label' as in by_case")
    if not client.health(a.server_url):
        raise cli.UsageError(f"no server answers {a.server_url}/health: start one first (launch/serve.sh)")
    t0 = time.time()
    res = fuzz(a.server_url, a.n, a.valid_every, a.seed, a.workers, a.timeout_s, a.context_len, a.vocab,
               a.model, a.big_mb, paths, bad=bad, skip=skip, api_key=a.api_key, rare_every=a.rare_every,
               budget_s=a.budget_s or None)
    res = {"date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
           "command": " ".join(["python -m bench.fuzz", *redact(argv if argv is not None else sys.argv[1:])]),
           "server_url": a.server_url, "wall_s": round(time.time() - t0, 1), **res}
    text = json.dumps(res, indent=1)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    print(json.dumps({k: res[k] for k in ("malformed", "malformed_sent", "valid", "valid_sent", "unsent", "counts",
                                          "five_xx", "deaths", "all_malformed_right", "all_valid_ok",
                                          "server_alive_after", "not_right_total")}, indent=1))


if __name__ == "__main__":
    cli.run(main)
