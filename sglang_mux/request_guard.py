"""The request guard: decide whether a request body may reach SGLang (and so its scheduler).

``check(method, path, content_type, body, limits)`` raises ``Rejected`` for a body that must not
reach SGLang and returns for anything else; ``error_body`` renders a rejection as SGLang's
OpenAI-style error JSON. An ASGI middleware buffers the body, calls ``check``, and answers
``error_body`` with the rejection's status or passes the body on unchanged. Pure stdlib, no I/O.

Guarded (``GUARDED_PATHS``): POST (and PUT) /generate, POST /v1/completions,
/v1/chat/completions and /abort_request; anything else passes. 413: the body is over
``Limits.max_body_bytes``; 415: a Content-Type other than application/json; 400: the rest. A
message is one line: the field's JSON path (``input_ids[0][5]``), what to give, <= ~60
characters of what came. Unknown fields pass: SGLang decides. Choices where the APIs leave room:
- A whole number is a JSON integer: 4.0 and true are refused. The body passes on unchanged and
  SGLang's native path keeps a float where it wants an int (ids go through array('q'), which
  refuses floats), so taking 4.0 would pass the problem on. null is the same as absent.
- temperature in [0, 1e6] on every route (OpenAI caps at 2, SGLang does not; past float32's
  range it turns inf on the GPU); top_p, repetition_penalty >= 1e-6 (0 after float32 rounding
  divides by zero); logit_bias values in [-100, 100] (OpenAI's; a huge bias makes NaN
  probabilities); top_k -1 or [1, 2**30] (SGLang's "all"; an int32 tensor); seeds int64.
- top_logprobs_num (/generate) <= 128 and < vocab (SGLang's PD buffer holds 128; torch.topk
  fails past the vocabulary); OpenAI's logprobs / top_logprobs <= 20 (OpenAI's limit).
- Empty prompts ("", []) are refused (SGLang refuses an empty completions prompt and empty
  input_ids itself); a token prompt holds <= context_len ids (auto-truncate is not assumed); a
  text prompt's length needs the tokenizer and is SGLang's. Completions' max_tokens >= 1 (SGLang's
  rule); chat's max_tokens may be 0.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, fields
from itertools import islice
from operator import attrgetter

GENERATE, COMPLETIONS, CHAT, ABORT = "/generate", "/v1/completions", "/v1/chat/completions", "/abort_request"
GUARDED_PATHS: frozenset[str] = frozenset({GENERATE, COMPLETIONS, CHAT, ABORT})
_METHODS = {GENERATE: ("POST", "PUT")}  # SGLang's /generate takes both; the rest POST only

_ERROR_TYPES = {400: "BadRequestError", 404: "NotFoundError", 405: "MethodNotAllowedError",
                413: "PayloadTooLargeError", 415: "UnsupportedMediaTypeError",
                422: "UnprocessableEntityError", 429: "RateLimitError"}
_TOP_LOGPROBS_NATIVE = 128  # see the module docstring
_TOP_LOGPROBS_OPENAI = 20
_TOP_K_ALL = 1 << 30
_INT64 = (-(1 << 63), (1 << 63) - 1)
_TINY = 1e-6  # floor of the (0, x] ranges
_MAX_MESSAGES = 10_000
_ROLES = ("system", "developer", "assistant", "tool", "function", "latest_reminder")  # SGLang: any case
_PART_TYPES = ("text", "image_url", "video_url", "audio_url", "thinking", "reasoning", "tool_reference")


class Rejected(Exception):
    """A request that must not reach SGLang. ``status``: the 4xx to answer; ``message``: one
    line saying what is wrong and what to give; ``param``: the field's JSON path, or None when
    the body as a whole is at fault."""

    def __init__(self, status: int, message: str, param: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param = status, message, param


@dataclass(frozen=True)
class Limits:
    """The server's bounds: token ids in [0, vocab_size); a token prompt, and max new tokens, at
    most context_len; a body at most max_body_bytes; JSON nesting at most max_depth; n (and
    best_of) at most max_n; at most max_batch prompts in one request. Each a whole number > 0
    (ValueError otherwise)."""

    vocab_size: int
    context_len: int
    max_body_bytes: int = 32 << 20
    max_depth: int = 32
    max_n: int = 16
    max_batch: int = 256

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            if type(v) is not int or v < 1:
                raise ValueError(f"Limits.{f.name} must be a whole number > 0, got {v!r}")


def error_body(r: Rejected) -> bytes:
    """The JSON body to answer ``r`` with: SGLang's OpenAI-style error object (``object``,
    ``message``, ``type``, ``param``, ``code`` = the status)."""
    return json.dumps({"object": "error", "message": r.message, "type": _ERROR_TYPES.get(r.status, "BadRequestError"),
                       "param": r.param, "code": r.status}).encode()


def check(method: str, path: str, content_type: str | None, body: bytes, limits: Limits) -> None:
    """Raise Rejected for a request that must not reach SGLang; return for anything else.
    Paths other than the guarded ones pass unchecked. Called once per request, with the whole
    body, before SGLang sees it; ``path`` without the query string; ``content_type`` the
    header's value, or None when absent."""
    route = _ROUTES.get(path)
    if route is None or method.upper() not in _METHODS.get(path, ("POST",)):
        return
    if len(body) > limits.max_body_bytes:
        raise Rejected(413, f"the body is {len(body)} bytes; send at most {limits.max_body_bytes} bytes")
    if content_type and content_type.strip():  # FastAPI reads a body without one as JSON too
        if content_type.split(";", 1)[0].strip().lower() != "application/json":
            raise Rejected(415, f"Content-Type {_show(content_type)} is not JSON; send the body as JSON with "
                                "Content-Type: application/json")
    obj = _parse(body, limits.max_depth)
    if type(obj) is not dict:
        raise Rejected(400, f"the body must be a JSON object, got {_KINDS[type(obj)]}")
    route(obj, limits)


# ----------------------------------------------------------------------------- parsing
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_PARENS, _NOT_BRACKET = bytes.maketrans(b"[{]}", b"(())"), bytes(sorted(set(range(256)) - set(b"[]{}")))


def _parse(body: bytes, max_depth: int):
    if not body.strip():
        raise Rejected(400, "the body is empty; send a JSON object")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Rejected(400, f"the body is not UTF-8 (byte {e.start}); send JSON encoded as UTF-8") from None
    # Depth from the text, before parsing: no recursion whatever the nesting (100,000 '[' in ~1 ms)
    if text.count("[") + text.count("{") > max_depth and _too_deep(text, max_depth):
        raise Rejected(400, f"the body nests arrays/objects deeper than {max_depth} levels")
    try:
        return json.loads(text, parse_constant=_constant, parse_float=_float)
    except json.JSONDecodeError as e:
        raise Rejected(400, f"the body is not JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    except RecursionError:  # only if the scan above was fooled; never a 500
        raise Rejected(400, f"the body nests arrays/objects deeper than {max_depth} levels") from None
    except ValueError as e:  # e.g. an integer of more than 4300 digits
        raise Rejected(400, f"the body is not usable JSON: {str(e)[:80]}") from None


def _too_deep(text: str, max_depth: int) -> bool:
    """Whether arrays/objects nest deeper than max_depth, read from the text without recursing:
    strings cut out, brackets written as ( ), each pass removes the innermost pairs."""
    s = _STRING.sub("", text).encode().translate(_PARENS, _NOT_BRACKET)
    for _ in range(max_depth):
        shorter = s.replace(b"()", b"")
        if len(shorter) == len(s):
            break
        s = shorter
    return b"()" in s or s.count(b"(") > max_depth  # a pair still nested, or unclosed '[' this deep


def _constant(name: str):
    raise Rejected(400, f"the body holds {name}, which is not JSON; give a finite number")


def _float(s: str) -> float:
    v = float(s)
    if v in (float("inf"), float("-inf")):
        raise Rejected(400, f"the number {s[:40]} overflows to infinity; give a finite number")
    return v


# ----------------------------------------------------------------------------- messages
_KINDS = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null",
          int: "a number", float: "a number"}


def _brief(v, depth: int = 0) -> str:
    """A JSON value with long or deep containers cut ("...")."""
    if type(v) not in (list, dict):
        return json.dumps(v[:61] if type(v) is str else v, ensure_ascii=False)
    if depth > 1:
        return "[...]" if type(v) is list else "{...}"
    items = [_brief(x, depth + 1) for x in v[:4]] if type(v) is list else \
        [f"{json.dumps(k[:20])}: {_brief(x, depth + 1)}" for k, x in islice(v.items(), 4)]
    more = ", ..." if len(v) > 4 else ""
    return f"[{', '.join(items)}{more}]" if type(v) is list else f"{{{', '.join(items)}{more}}}"


def _show(v) -> str:
    """At most ~60 characters of a JSON value (a string in single quotes)."""
    s = repr(v[:61]) if type(v) is str else _brief(v)
    return s if len(s) <= 60 else s[:59] + "…"


def _bad(path: str, want: str, got) -> Rejected:
    return Rejected(400, f"{path} must be {want}, got {_show(got)}", path)


# ----------------------------------------------------------------------------- field checkers
# A checker takes (value, path, limits) and raises Rejected; it is called only for a non-null value.
_CTX, _MAX_N = attrgetter("context_len"), attrgetter("max_n")


def _whole(lo: int, hi=None):
    """A JSON integer in [lo, hi]; hi an int, None (no bound) or a function of the Limits."""
    def chk(v, p, L):
        top = hi(L) if callable(hi) else hi
        if type(v) is not int or v < lo or (top is not None and v > top):
            raise _bad(p, f"a whole number in [{lo}, {top}]" if top is not None else f"a whole number >= {lo}", v)
    return chk


def _number(lo: float, hi: float):
    def chk(v, p, L):
        if type(v) not in (int, float) or not lo <= v <= hi:
            raise _bad(p, f"a number in [{lo:.10g}, {hi:.10g}]", v)
    return chk


def _type(t: type, want: str):
    def chk(v, p, L):
        if type(v) is not t:
            raise _bad(p, want, v)
    return chk


_bool, _str, _object = _type(bool, "true or false"), _type(str, "a string"), _type(dict, "an object")


def _top_k(v, p, L):
    if type(v) is not int or not (v == -1 or 1 <= v <= _TOP_K_ALL):
        raise _bad(p, f"-1 (the whole vocabulary) or a whole number in [1, {_TOP_K_ALL}]", v)


def _strs(v, p, L):
    if type(v) is list:
        for i, x in enumerate(v):
            _str(x, f"{p}[{i}]", L)
    elif type(v) is not str:
        raise _bad(p, "a string or a list of strings", v)


def _ids(v, p, L, cap: int | None = None):
    """A list of token ids in [0, vocab_size), at most ``cap`` of them."""
    if type(v) is not list:
        raise _bad(p, "a list of token ids", v)
    if cap is not None and len(v) > cap:
        raise Rejected(400, f"{p} holds {len(v)} tokens; give at most {cap} (the context length)", p)
    vocab = L.vocab_size
    # C-speed fast path; a per-id loop only to name the bad one
    if v and not (set(map(type, v)) == {int} and min(v) >= 0 and max(v) < vocab):
        for i, t in enumerate(v):
            if type(t) is not int or not 0 <= t < vocab:
                raise _bad(f"{p}[{i}]", f"a token id, a whole number in [0, {vocab - 1}]", t)


def _logit_bias(v, p, L):
    if type(v) is not dict:
        raise _bad(p, "an object mapping token ids to biases", v)
    for k, x in v.items():
        if not (len(k) <= 12 and k.isascii() and k.isdigit() and int(k) < L.vocab_size):
            raise Rejected(400, f"{p} key {_show(k)} must be a token id written in decimal, "
                                f"in [0, {L.vocab_size - 1}]", p)
        if type(x) not in (int, float) or not -100 <= x <= 100:
            raise _bad(f"{p}.{k}", "a number in [-100, 100]", x)


def _stream_options(v, p, L):
    _object(v, p, L)
    _fields(v, p, L, {"include_usage": _bool, "continuous_usage_stats": _bool})


def _response_format(v, p, L):
    _object(v, p, L)
    t = v.get("type")
    if t not in ("text", "json_object", "json_schema", "structural_tag"):
        raise _bad(f"{p}.type", "one of 'text', 'json_object', 'json_schema', 'structural_tag'", t)
    if t == "json_schema" and type(v.get("json_schema")) is not dict and type(v.get("schema")) is not dict:
        raise _bad(f"{p}.json_schema", "an object (with name and schema) when type is 'json_schema'",
                   v.get("json_schema"))


def _fields(d: dict, p: str, L, table: dict) -> None:
    """Check each non-null field of ``d`` that ``table`` names (in the body's order); others pass."""
    for k, v in d.items():
        chk = table.get(k)
        if chk is not None and v is not None:
            chk(v, f"{p}.{k}" if p else k, L)


def _pairs(d: dict, p: str, lo_key: str, hi_key: str) -> None:
    """After ``_fields``: the least new tokens at most the most, and at most one grammar."""
    lo, hi = d.get(lo_key), d.get(hi_key)
    if lo is not None and hi is not None and lo > hi:
        raise _bad(f"{p}.{lo_key}" if p else lo_key, f"at most {hi_key} ({hi})", lo)
    given = [k for k in ("regex", "json_schema", "ebnf") if d.get(k) is not None]
    if len(given) > 1:
        raise Rejected(400, f"give at most one of regex, json_schema, ebnf; got {' and '.join(given)}",
                       f"{p}.{given[1]}" if p else given[1])


# Sampling fields SGLang's SamplingParams and the OpenAI routes' extras share.
_SAMPLING = {
    "temperature": _number(0, 1e6), "top_p": _number(_TINY, 1), "top_k": _top_k, "min_p": _number(0, 1),
    "frequency_penalty": _number(-2, 2), "presence_penalty": _number(-2, 2),
    "repetition_penalty": _number(_TINY, 2), "n": _whole(1, _MAX_N),
    "stop": _strs, "stop_regex": _strs, "stop_token_ids": _ids, "logit_bias": _logit_bias,
    "ignore_eos": _bool, "skip_special_tokens": _bool, "no_stop_trim": _bool, "regex": _str, "ebnf": _str,
}
_NATIVE_SAMPLING = {
    **_SAMPLING, "max_new_tokens": _whole(0, _CTX), "min_new_tokens": _whole(0, _CTX), "json_schema": _str,
    "spaces_between_special_tokens": _bool, "sampling_seed": _whole(*_INT64), "structural_tag": _str,
    "custom_params": _object, "stream_interval": _whole(1),
}
_OPENAI = {
    **_SAMPLING, "model": _str, "min_tokens": _whole(0, _CTX), "seed": _whole(*_INT64), "stream": _bool,
    "stream_options": _stream_options, "user": _str, "response_format": _response_format, "rid": _strs,
}


# ----------------------------------------------------------------------------- prompts
def _text(v, p, L) -> int | None:
    """A non-empty string, or a batch: a non-empty list of them. The batch size, or None."""
    if type(v) is str:
        if not v:
            raise _bad(p, "a non-empty string", v)
        return None
    if type(v) is not list or not v or len(v) > L.max_batch:
        raise _bad(p, f"a string, or a list of 1 to {L.max_batch} strings (a batch)", v)
    for i, x in enumerate(v):
        if type(x) is not str or not x:
            raise _bad(f"{p}[{i}]", "a non-empty string", x)
    return len(v)


def _token_prompt(v, p, L) -> int | None:
    """A non-empty list of token ids, or a batch: a list of them. The batch size, or None."""
    if type(v) is not list or not v:
        raise _bad(p, "a non-empty list of token ids, or a list of such lists (a batch)", v)
    if type(v[0]) is not list:
        _ids(v, p, L, L.context_len)
        return None
    if len(v) > L.max_batch:
        raise Rejected(400, f"{p} holds {len(v)} prompts; give at most {L.max_batch}", p)
    for i, row in enumerate(v):
        if type(row) is not list or not row:
            raise _bad(f"{p}[{i}]", "a non-empty list of token ids", row)
        _ids(row, f"{p}[{i}]", L, L.context_len)
    return len(v)


def _vectors(m, p) -> None:
    if type(m) is not list or not m:
        raise _bad(p, "a non-empty list of embedding vectors (lists of numbers)", m)
    for i, row in enumerate(m):
        if type(row) is not list or not row or not set(map(type, row)) <= {int, float}:
            raise _bad(f"{p}[{i}]", "a non-empty list of numbers", row)


def _embeds(v, p, L) -> int | None:
    """Vectors (a list of lists of numbers), or a batch: a list of such. Sizes are SGLang's."""
    if type(v) is list and v and type(v[0]) is list and v[0] and type(v[0][0]) is list:
        if len(v) > L.max_batch:
            raise Rejected(400, f"{p} holds {len(v)} prompts; give at most {L.max_batch}", p)
        for i, m in enumerate(v):
            _vectors(m, f"{p}[{i}]")
        return len(v)
    _vectors(v, p)
    if type(v[0][0]) is not float:  # SGLang tells one prompt from a batch by this number's type
        raise _bad(f"{p}[0][0]", "written with a decimal point (e.g. 1.0) in a single prompt's embeddings", v[0][0])
    return None


# ----------------------------------------------------------------------------- routes
def _each(v, p, L, batch: int | None, chk) -> None:
    """One value for every prompt, or (a batch only) a list of one per prompt."""
    if type(v) is not list:
        chk(v, p, L)
    elif batch is None or len(v) != batch:
        raise _bad(p, "one value (a list is for a batch: one per prompt)" if batch is None
                   else f"one value, or a list of {batch} (one per prompt)", v)
    else:
        for i, x in enumerate(v):
            chk(x, f"{p}[{i}]", L)


def _native_sampling(sp, p, L) -> None:
    if type(sp) is not dict:
        raise _bad(p, "an object of sampling parameters", sp)
    _fields(sp, p, L, _NATIVE_SAMPLING)
    _pairs(sp, p, "min_new_tokens", "max_new_tokens")


_GENERATE_FIELDS = {"stream": _bool, "return_text_in_logprobs": _bool}
_GENERATE_EACH = {  # one value, or one per prompt of a batch
    "sampling_params": _native_sampling,
    "return_logprob": _bool, "logprob_start_len": _whole(-1, _CTX),
    "top_logprobs_num": _whole(0, lambda L: min(_TOP_LOGPROBS_NATIVE, L.vocab_size)),
    "rid": _str, "lora_path": lambda v, p, L: v is None or _str(v, p, L),
}


def _generate(b: dict, L: Limits) -> None:
    given = [k for k in ("text", "input_ids", "input_embeds") if b.get(k) is not None]
    if not given:
        raise Rejected(400, "give text or input_ids (or input_embeds): the body has no prompt", "text")
    if len(given) > 1:
        raise Rejected(400, f"give text or input_ids, not both: the body has {' and '.join(given)}", given[1])
    key = given[0]
    batch = {"text": _text, "input_ids": _token_prompt, "input_embeds": _embeds}[key](b[key], key, L)
    _fields(b, "", L, _GENERATE_FIELDS)
    for k, chk in _GENERATE_EACH.items():
        if b.get(k) is not None:
            _each(b[k], k, L, batch, chk)
    tl = b.get("token_ids_logprob")
    if tl is not None:
        if type(tl) is list and tl and type(tl[0]) is list:
            _each(tl, "token_ids_logprob", L, batch, _ids)
        else:
            _ids(tl, "token_ids_logprob", L)


def _prompt(v, p, L) -> None:
    """An OpenAI completions prompt: a string, strings, token ids, or lists of token ids."""
    if type(v) is str or type(v) is list and v and type(v[0]) is str:
        _text(v, p, L)
    elif type(v) is list and v and type(v[0]) in (int, list):
        _token_prompt(v, p, L)
    else:
        raise _bad(p, "a non-empty string, a list of strings, a list of token ids, or a list of such lists", v)


_COMPLETIONS = {
    **_OPENAI, "max_tokens": _whole(1, _CTX), "best_of": _whole(1, _MAX_N), "logprobs": _whole(0, _TOP_LOGPROBS_OPENAI),
    "echo": _bool, "suffix": _str, "json_schema": _str,
}


def _completions(b: dict, L: Limits) -> None:
    if b.get("prompt") is None:
        raise Rejected(400, "prompt is required: give a string, strings, token ids or lists of token ids", "prompt")
    _prompt(b["prompt"], "prompt", L)
    _fields(b, "", L, _COMPLETIONS)
    _pairs(b, "", "min_tokens", "max_tokens")


def _message(m, p) -> None:
    if type(m) is not dict:
        raise _bad(p, "a message object with role and content", m)
    role, c = m.get("role"), m.get("content")
    # SGLang takes the other roles in any case, 'user' only so written
    if not (type(role) is str and (role == "user" or role.lower() in _ROLES)):
        raise _bad(f"{p}.role", "one of 'system', 'developer', 'user', 'assistant', 'tool', 'function'", role)
    if c is None and not (role.lower() in ("tool", "function") or role.lower() == "assistant" and m.get("tool_calls")):
        raise _bad(f"{p}.content", "a string or a list of parts (null only beside an assistant's tool_calls, "
                                   "or in a tool message)", c)
    if c is not None and type(c) not in (str, list):
        raise _bad(f"{p}.content", "a string or a list of content parts", c)
    for i, part in enumerate(c if type(c) is list else ()):
        q = f"{p}.content[{i}]"
        if type(part) is not dict or part.get("type") not in _PART_TYPES:
            got = part.get("type") if type(part) is dict else part
            raise _bad(f"{q}.type" if type(part) is dict else q, "a part whose type is one of " +
                       ", ".join(map(repr, _PART_TYPES)), got)
        if part["type"] == "text" and type(part.get("text")) is not str:
            raise _bad(f"{q}.text", "a string in a text part", part.get("text"))
    _fields(m, p, None, {"name": _str, "tool_call_id": _str, "tool_calls": _tool_calls})


def _tool_calls(v, p, L):
    for i, x in enumerate(v if type(v) is list else [v]):
        if type(v) is not list or type(x) is not dict or type(x.get("function")) is not dict:
            raise _bad(f"{p}[{i}]" if type(v) is list else p, 'a list of tool calls {"function": {...}}', x)


def _tools(v, p, L):
    for i, t in enumerate(v if type(v) is list else [v]):
        f = t.get("function") if type(t) is dict else None
        if type(v) is not list or type(f) is not dict or type(f.get("name")) is not str:
            raise _bad(f"{p}[{i}]" if type(v) is list else p,
                       'a list of tools {"type": "function", "function": {"name": "..."}}', t)


def _tool_choice(v, p, L):
    if v not in ("none", "auto", "required") and type(v) is not dict:
        raise _bad(p, "'none', 'auto', 'required' or an object naming a function", v)


_CHAT = {
    **_OPENAI, "max_tokens": _whole(0, _CTX), "max_completion_tokens": _whole(0, _CTX), "logprobs": _bool,
    "top_logprobs": _whole(0, _TOP_LOGPROBS_OPENAI), "tools": _tools, "tool_choice": _tool_choice,
    "parallel_tool_calls": _bool, "chat_template_kwargs": _object,
    "continue_final_message": _bool, "input_ids": lambda v, p, L: _ids(v, p, L, L.context_len),
}


def _chat(b: dict, L: Limits) -> None:
    msgs = b.get("messages")
    if msgs is None:
        raise Rejected(400, "messages is required: give a non-empty list of message objects", "messages")
    if type(msgs) is not list or not msgs or len(msgs) > _MAX_MESSAGES:
        raise _bad("messages", f"a list of 1 to {_MAX_MESSAGES} message objects", msgs)
    for i, m in enumerate(msgs):
        _message(m, f"messages[{i}]")
    _fields(b, "", L, _CHAT)


def _abort(b: dict, L: Limits) -> None:
    _fields(b, "", L, {"rid": _str, "abort_all": _bool})
    if not b.get("rid") and b.get("abort_all") is not True:
        raise Rejected(400, "give rid (the request to abort) or abort_all: true", "rid")


_ROUTES = {GENERATE: _generate, COMPLETIONS: _completions, CHAT: _chat, ABORT: _abort}
