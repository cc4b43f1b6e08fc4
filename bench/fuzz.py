"""Hostile input against a running server: every malformed request must get a 4xx with a
message, and the valid requests sent between them must still be served (issue 19).

    python -m bench.fuzz --server-url http://127.0.0.1:30000 --n 1200 --out bench/results/fuzz_x.json

Cases (``cases``, deterministic for a seed) go to SGLang's native ``/generate`` and the OpenAI
``/v1/completions`` and ``/v1/chat/completions``: bodies that are not JSON, not an object, not
UTF-8 or empty; required fields missing; fields of the wrong type (numbers for text, objects
for lists, nested junk); out-of-range numbers (negative, huge, NaN written as a bare token);
token ids out of the vocabulary; prompts longer than the context; oversized bodies. Every
``--valid-every``-th request is a valid one. Outcomes: ``4xx`` (the status with a non-empty
message: what a malformed request must get), ``4xx-silent`` (no message), ``5xx``, ``2xx`` (a
malformed request accepted), ``timeout``, ``conn`` (connection refused or reset: a crash?);
valid requests ``ok`` or not. The server must answer /health at the end.
"""
from __future__ import annotations

import concurrent.futures as cf
import datetime as dt
import http.client
import json
import random
import sys
import time
import urllib.parse
from dataclasses import dataclass

from sglang_mux import cli

from . import client
from sglang_mux import cli_io as _cli_io

GEN, COMP, CHAT = "/generate", "/v1/completions", "/v1/chat/completions"
TAG = {GEN: "generate", COMP: "completions", CHAT: "chat"}  # case names begin with these


@dataclass(frozen=True)
class Case:
    name: str  # category, e.g. "generate:max_new_tokens=negative"
    path: str
    body: bytes
    valid: bool = False


def _j(obj) -> bytes:
    return json.dumps(obj).encode()


JUNK = [None, True, -1, 3.5, "x", [], {}, [[[[]]]], {"a": {"b": {"c": [1, {"d": None}]}}}, [None, "a", 1]]
BAD_NUMBERS = {"negative": -5, "zero_neg": -0.5, "huge": 10 ** 15, "string": "ten", "list": [1], "object": {"n": 1},
               "bool_list": [True]}


def cases(seed: int = 0, context_len: int = 131072, vocab: int = 128256, big_mb: float = 8.0) -> list[Case]:
    """One of every kind of malformed request (the fuzz cycles through them, ``fuzz``)."""
    rng = random.Random(seed)
    out: list[Case] = []

    def add(name, path, body):
        out.append(Case(name, path, body if isinstance(body, bytes) else _j(body)))

    for path in (GEN, COMP, CHAT):
        tag = TAG[path]
        add(f"{tag}:body=not_json", path, b"{this is not json")
        add(f"{tag}:body=empty", path, b"")
        add(f"{tag}:body=array", path, b"[1, 2, 3]")
        add(f"{tag}:body=number", path, b"42")
        add(f"{tag}:body=string", path, b'"hello"')
        add(f"{tag}:body=invalid_utf8", path, b'{"text": "\xff\xfe\xfa", "prompt": "\xc3\x28"}')
        add(f"{tag}:body=nan_token", path, b'{"text": "a", "prompt": "a", "temperature": NaN, '
                                           b'"sampling_params": {"temperature": NaN}}')
        add(f"{tag}:body=truncated", path, _j({"text": "hello", "prompt": "hello"})[:-3])
    # native /generate
    add("generate:missing_prompt", GEN, {"sampling_params": {"max_new_tokens": 4}})
    for i, j in enumerate(JUNK):
        if not isinstance(j, str):
            add(f"generate:text={type(j).__name__}{i}", GEN, {"text": j, "sampling_params": {"max_new_tokens": 4}})
    add("generate:text_and_input_ids", GEN, {"text": "a", "input_ids": [1, 2], "sampling_params": {"max_new_tokens": 4}})
    for label, ids in {"negative_id": [1, -7, 3], "id_past_vocab": [1, vocab + 10 ** 6], "float_ids": [1.5, 2.5],
                       "string_ids": ["a", "b"], "nested_ids": [[1, [2]], {"x": 1}], "empty_ids": []}.items():
        add(f"generate:input_ids={label}", GEN, {"input_ids": ids, "sampling_params": {"max_new_tokens": 4}})
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
    return out


def valid_cases(model: str = "default") -> list[Case]:
    return [Case("valid:generate", GEN, _j({"text": "The capital of France is",
                                             "sampling_params": {"max_new_tokens": 8, "temperature": 0}}), True),
            Case("valid:completions", COMP, _j({"model": model, "prompt": "Once upon", "max_tokens": 8}), True),
            Case("valid:chat", CHAT, _j({"model": model, "messages": [{"role": "user", "content": "hi"}],
                                         "max_tokens": 8}), True)]


def send(base: str, case: Case, timeout_s: float) -> dict:
    u = urllib.parse.urlsplit(base)
    t0 = time.perf_counter()
    try:
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout_s)
        c.request("POST", case.path, body=case.body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read(1 << 16)
        c.close()
    except TimeoutError:
        return {"outcome": "timeout", "status": None, "s": time.perf_counter() - t0}
    except (ConnectionError, http.client.HTTPException, OSError) as e:
        return {"outcome": "conn", "status": None, "error": repr(e)[:200], "s": time.perf_counter() - t0}
    return {"status": r.status, "message": _message(data), "excerpt": data[:200].decode(errors="replace"),
            "s": time.perf_counter() - t0}


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
    if st is None:
        return res["outcome"]
    if case.valid:
        return "ok" if 200 <= st < 300 else f"valid-failed-{st}"
    if 400 <= st < 500:
        return "4xx" if res.get("message") else "4xx-silent"
    return "5xx" if st >= 500 else "2xx"


def fuzz(base: str, n: int = 1000, valid_every: int = 10, seed: int = 0, workers: int = 8,
         timeout_s: float = 120.0, context_len: int = 131072, vocab: int = 128256, model: str = "default",
         big_mb: float = 8.0, paths: tuple[str, ...] = (GEN, COMP, CHAT), bad: list[Case] | None = None,
         skip: tuple[str, ...] = ()) -> dict:
    """``n`` malformed requests (cycling through ``bad``, default ``cases``, in a seeded order)
    to ``paths`` with a valid one after every ``valid_every``; returns the counts and every
    outcome that is not right. ``skip`` names cases left out (one that kills the server ends
    the pass, so a known crash is tested on its own and the rest still measured)."""
    bad = bad if bad is not None else cases(seed, context_len, vocab, big_mb)
    unknown = set(skip) - {c.name for c in bad}
    if unknown:
        raise ValueError(f"--skip names no case: {sorted(unknown)}; case names are 'path:label' as in by_case")
    bad = [c for c in bad if c.path in paths and c.name not in skip]
    good = [c for c in valid_cases(model) if c.path in paths]
    if not bad or (valid_every and not good):
        raise ValueError(f"no cases for paths {paths}")
    rng = random.Random(seed)
    plan: list[Case] = []
    order, sent = list(range(len(bad))), 0
    while sent < n:
        rng.shuffle(order)
        for i in order[: n - sent]:
            plan.append(bad[i])
            sent += 1
            if valid_every and sent % valid_every == 0:
                plan.append(good[(sent // valid_every) % len(good)])
    with cf.ThreadPoolExecutor(workers) as ex:
        results = list(ex.map(lambda c: send(base, c, timeout_s), plan))
    counts: dict[str, int] = {}
    by_case: dict[str, dict[str, int]] = {}
    wrong = []
    for c, r in zip(plan, results):
        k = classify(c, r)
        counts[k] = counts.get(k, 0) + 1
        by_case.setdefault(c.name, {}).setdefault(k, 0)
        by_case[c.name][k] += 1
        if k not in ("4xx", "ok"):
            wrong.append({"case": c.name, "outcome": k, **{x: r.get(x) for x in ("status", "excerpt", "error")}})
    malformed = sum(not c.valid for c in plan)
    return {"malformed": malformed, "valid": len(plan) - malformed, "counts": counts,
            "all_malformed_4xx": counts.get("4xx", 0) == malformed,
            "all_valid_ok": counts.get("ok", 0) == len(plan) - malformed,
            "server_alive_after": client.health(base), "by_case": by_case, "not_right": wrong[:200],
            "not_right_total": len(wrong), "skipped": sorted(skip)}


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
    p.add_argument("--context-len", type=pos_i, default=131072, help="the server's context length")
    p.add_argument("--vocab", type=pos_i, default=128256, help="the model's vocabulary size")
    p.add_argument("--model", default="default", help="the OpenAI 'model' of the valid requests")
    p.add_argument("--big-mb", type=pos, default=8.0, help="size of the oversized body")
    p.add_argument("--paths", default=",".join((GEN, COMP, CHAT)), help="comma list of the routes to fuzz")
    p.add_argument("--skip", default="", help="comma list of case names to leave out (e.g. a known crash)")
    p.add_argument("--out", default=None, help="also write the whole result here as JSON")
    a = p.parse_args(argv)
    paths = tuple(x for x in a.paths.split(",") if x)
    odd = [x for x in paths if x not in (GEN, COMP, CHAT)]
    if odd or not paths:
        p.error(f"--paths: {'unknown ' + ', '.join(odd) if odd else 'empty'}; choose from {GEN}, {COMP}, {CHAT}")
    skip = tuple(x for x in a.skip.split(",") if x)
    unknown = sorted(set(skip) - {c.name for c in cases(a.seed, a.context_len, a.vocab, a.big_mb)})
    if unknown:
        p.error(f"--skip names no case: {', '.join(unknown)}; case names are 'path:label' as in by_case")
    if not client.health(a.server_url):
        raise cli.UsageError(f"no server answers {a.server_url}/health: start one first (launch/serve.sh)")
    t0 = time.time()
    res = fuzz(a.server_url, a.n, a.valid_every, a.seed, a.workers, a.timeout_s, a.context_len, a.vocab,
               a.model, a.big_mb, paths, skip=skip)
    res = {"date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
           "command": " ".join(["python -m bench.fuzz", *(argv if argv is not None else sys.argv[1:])]),
           "server_url": a.server_url, "wall_s": round(time.time() - t0, 1), **res}
    text = json.dumps(res, indent=1)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    print(json.dumps({k: res[k] for k in ("malformed", "valid", "counts", "all_malformed_4xx", "all_valid_ok",
                                          "server_alive_after", "not_right_total")}, indent=1))


if __name__ == "__main__":
    cli.run(main)
