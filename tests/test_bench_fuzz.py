"""bench.fuzz: the hostile cases, how outcomes are judged, and a pass against the stub server."""
import http.server
import json
import math
import threading
import time

import pytest

from bench import fuzz as F
from bench import stub_server
from sglang_mux.cli import UsageError


def _cases():
    return F.cases(seed=0, context_len=4096, big_mb=0.1, huge_mb=0.2)


def test_cases_cover_every_route_and_kind():
    cs = _cases()
    names = [c.name for c in cs]
    assert len(names) == len(set(names)) and len(cs) >= 250
    routes = {c.path for c in cs if not c.name.startswith("admin:")}
    assert routes == {F.GEN, F.COMP, F.CHAT} and not any(c.valid for c in cs)
    kinds = {n.split(":", 1)[1].split("=")[0] for n in names}
    assert {"body", "missing_prompt", "missing_messages", "max_tokens", "max_new_tokens", "input_ids",
            "prompt_past_context", "oversized_body", "stop_token_ids", "logit_bias", "token_ids_logprob",
            "content_type", "method", "stream", "n"} <= kinds
    assert [c.body for c in cs] == [c.body for c in _cases()]
    past = next(c for c in cs if c.name == "generate:prompt_past_context")
    assert len(json.loads(past.body)["input_ids"]) == 4096 + 64
    assert len(next(c for c in cs if c.name == "generate:oversized_body").body) > 0.1 * 2 ** 20
    with pytest.raises(UnicodeDecodeError):
        next(c for c in cs if c.name == "chat:body=invalid_utf8").body.decode()


def test_the_attackers_cases_are_written_as_an_attacker_would():
    """Bare non-finite tokens in every numeric sampling field of every route, 10,000-deep
    nesting, a rare body over the huge size, ids out of range in every place an id goes, wrong
    content types on a valid body; the two killers of plain SGLang are cases and no default skips
    them."""
    by = {c.name: c for c in _cases()}
    for tag, mx in (("generate", "max_new_tokens"), ("completions", "max_tokens"), ("chat", "max_tokens")):
        for field in (*F.SAMPLING, mx):
            for label, token in F.NON_FINITE.items():
                body = by[f"{tag}:{field}={label}"].body
                assert f'"{field}": {token}'.encode() in body
                v = json.loads(body)
                v = v["sampling_params"] if tag == "generate" else v
                assert not math.isfinite(v[field])  # 1e400 parses as inf
        assert json.loads(by[f"{tag}:n=huge"].body)  # a valid request but for its n
        assert b"9223372036854775808" in by[f"{tag}:{mx}=2p63"].body
        for shape in ("array", "object"):
            with pytest.raises(RecursionError):
                json.loads(by[f"{tag}:body=nested_{shape}_10k"].body)
        huge = by[f"{tag}:body=over_32mib"]
        assert huge.rare and len(huge.body) > 0.2 * 2 ** 20
        for label in ("text_plain", "form", "multipart"):
            c = by[f"{tag}:content_type={label}"]
            assert c.content_type == F.CONTENT_TYPES[label] and json.loads(c.body)
        assert json.loads(by[f"{tag}:stop_token_ids=negative"].body)
        assert by[f"{tag}:logit_bias=past_vocab"].expect == "4xx"
        for action in ("disconnect", "disconnect_early"):
            c = by[f"{tag}:stream={action}"]
            assert c.action == action and json.loads(c.body)["stream"] is True
    assert {n for n, c in by.items() if c.rare} == {f"{t}:body=over_32mib" for t in ("generate", "completions", "chat")}
    assert by["generate:method=DELETE"].method == "DELETE" and by["chat:method=GET"].expect == "below_500"
    assert json.loads(by["completions:prompt=id_past_vocab"].body)["prompt"] == [[1, 10 ** 9]]
    assert json.loads(by["generate:token_ids_logprob=negative"].body)["token_ids_logprob"] == [-1]
    assert by["generate:stream=abort"].action == "abort"
    admin = [c for c in by.values() if c.name.startswith("admin:")]
    assert len(admin) >= 15 and all(c.expect == "below_500" for c in admin)
    # nothing that pauses, stops, reloads or slows the server; no abort of everything
    harmless = {"/abort_request", "/flush_cache", "/get_model_info", "/get_server_info", "/v1/models", "/metrics",
                "/health"}
    assert {c.path for c in admin} == harmless and not any(b"abort_all" in c.body for c in admin)
    plan = F.schedule(list(by.values()), F.valid_cases(), 2000, 10, 500, 0)
    assert {"generate:input_ids=negative_id", "generate:input_ids=id_past_vocab"} <= {c.name for c in plan}


def test_a_rare_case_comes_once_every_rare_every_and_the_rest_in_whole_rounds():
    common = [F.Case(f"c{i}", F.GEN, b"{}") for i in range(7)]
    rare = [F.Case("big1", F.GEN, b"{}", rare=True), F.Case("big2", F.COMP, b"{}", rare=True)]
    plan = F.schedule(common + rare, F.valid_cases(), 70, 7, 25, seed=3)
    names = [c.name for c in plan if not c.valid]
    assert len(names) == 70 and len(plan) == 80
    assert [i for i, n in enumerate(names) if n.startswith("big")] == [24, 49] and names[49] == "big2"
    assert all(names[:7].count(n) == 1 for n in names[:7])  # a whole permutation first
    assert F.schedule(common + rare, [], 70, 0, 0, seed=3) == [c for c in F.schedule(common, [], 70, 0, 0, 3)]
    assert [c.name for c in F.schedule(rare, [], 4, 0, 25, 0)].count("big1") == 2  # rare alone: the rotation


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every request 400 with a message, after noting what came."""
    seen: list = []

    def _any(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.seen.append((self.command, self.path, self.headers.get("Content-Type"),
                          self.headers.get("Authorization"), body))
        out = b'{"error": {"message": "noted"}}'
        self.send_response(400)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _any

    def log_message(self, *a):
        pass


def test_the_sender_sets_each_cases_method_content_type_and_the_key():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{srv.server_address[1]}"
    try:
        _Recorder.seen = []
        by = {c.name: c for c in _cases()}
        for name in ("chat:content_type=form", "generate:method=DELETE", "admin:health=get_junk_body"):
            r = F.send(base, by[name], 5, api_key="k3y")
            assert r["status"] == 400 and r["message"] == "noted"
        F.send(base, F.Case("none", F.GEN, b"{}", content_type=None), 5)
    finally:
        srv.shutdown()
    (m1, p1, ct1, a1, b1), (m2, p2, ct2, _, _), (m3, p3, ct3, _, b3), (_, _, ct4, a4, _) = _Recorder.seen
    assert (m1, p1, ct1, a1) == ("POST", F.CHAT, "application/x-www-form-urlencoded", "Bearer k3y")
    assert json.loads(b1)["messages"] and (m2, p2, ct2) == ("DELETE", F.GEN, "application/json")
    assert (m3, p3) == ("GET", "/health") and b3.startswith(b'{"a": [1')
    assert ct4 is None and a4 is None


@pytest.mark.parametrize("status,body,valid,want", [
    (400, b'{"error": {"message": "bad max_new_tokens"}}', False, "4xx"),
    (422, b'{"detail": [{"loc": ["body"], "msg": "field required"}]}', False, "4xx"),
    (400, b'{"object": "error", "message": "messages is required"}', False, "4xx"),
    (400, b"", False, "4xx-silent"),
    (500, b'{"error": {"message": "boom"}}', False, "5xx"),
    (200, b'{"text": "ok"}', False, "2xx"),
    (200, b'{"text": "ok"}', True, "ok"),
    (400, b'{"error": {"message": "x"}}', True, "valid-failed-400"),
])
def test_classify(status, body, valid, want):
    c = F.Case("x", F.GEN, b"{}", valid)
    res = {"status": status, "message": F._message(body)}
    assert F.classify(c, res) == want
    assert F.classify(c, {"outcome": "timeout", "status": None}) == "timeout"


@pytest.mark.parametrize("expect,status,want", [
    ("below_500", 405, "answered"), ("below_500", 200, "answered"), ("below_500", 422, "answered"),
    ("below_500", 500, "5xx"), ("below_500", 503, "5xx"), ("stream", 401, "refused-401"), ("stream", 502, "5xx"),
])
def test_classify_admin_and_stream_cases(expect, status, want):
    """An admin call or a wrong method is right with any answer below 500; a stream case's
    valid request refused is named for its status; 5xx always counts against the server."""
    c = F.Case("x", "/flush_cache", b"{}", expect=expect)
    assert F.classify(c, {"status": status, "message": ""}) == want
    assert F.classify(c, {"status": 200, "outcome": "disconnected"}) == "disconnected"
    assert F.classify(c, {"status": None, "outcome": "unsent"}) == "unsent"


def test_fuzz_against_the_stub_counts_every_outcome():
    """The stub answers a body that is not a JSON object with a 400 and a message (as SGLang
    does), crashes into a 500 on a string max_new_tokens and accepts top_p > 1: each counted."""
    pick = {"generate:body=not_json": "4xx", "generate:body=array": "4xx", "chat:body=number": "4xx",
            "chat:body=truncated": "4xx", "generate:body=invalid_utf8": "4xx",
            "generate:max_new_tokens=string": "5xx", "generate:top_p_over_1": "2xx"}
    bad = [c for c in F.cases(context_len=64, big_mb=0.01) if c.name in pick]
    assert len(bad) == len(pick)
    with stub_server.in_thread(stub_server.StubConfig(ttft_s=0.001, tbt_s=0.0005)) as url:
        r = F.fuzz(url, n=70, valid_every=7, workers=4, timeout_s=20, paths=(F.GEN, F.CHAT), bad=bad)
    assert (r["malformed"], r["valid"], r["malformed_sent"], r["valid_sent"]) == (70, 10, 70, 10)
    assert r["counts"] == {"4xx": 50, "5xx": 10, "2xx": 10, "ok": 10}  # each case 10 times
    assert {n: list(v) for n, v in r["by_case"].items() if not n.startswith("valid")} == \
        {n: [k] for n, k in pick.items()}
    assert not r["all_malformed_right"] and r["all_valid_ok"] and r["server_alive_after"]
    assert r["five_xx"] == 10 and r["deaths"] == 0 and r["death"] is None and r["unsent"] == 0
    assert r["not_right_total"] == 20 and {w["case"] for w in r["not_right"]} == \
        {"generate:max_new_tokens=string", "generate:top_p_over_1"}
    # a skipped case is never sent and is named in the result; an unknown name is refused
    with stub_server.in_thread(stub_server.StubConfig(ttft_s=0.001, tbt_s=0.0005)) as url:
        r = F.fuzz(url, n=60, valid_every=0, workers=4, timeout_s=20, paths=(F.GEN, F.CHAT), bad=bad,
                   skip=("generate:max_new_tokens=string",))
        assert "generate:max_new_tokens=string" not in r["by_case"] and r["counts"] == {"4xx": 50, "2xx": 10}
        assert r["skipped"] == ["generate:max_new_tokens=string"]
        with pytest.raises(ValueError, match="--skip names no case"):
            F.fuzz(url, n=1, bad=bad, skip=("generate:nope",))
    with pytest.raises(ValueError, match="no cases"):
        F.fuzz(url, n=1, paths=("/nope",))


def test_cli_refuses_a_server_that_is_not_there():
    with pytest.raises(UsageError, match="no server answers"):
        F.main(["--server-url", "http://127.0.0.1:9", "--n", "5"])


def test_streams_cut_short_and_an_abort_by_rid_against_the_stub():
    """Each route's stream closed after its first event or its headers is ``disconnected``; a
    /generate aborted by its rid ends early (``aborted``); one that finished before the abort
    came ran its full length (``abort-ignored``); the stub serves valid requests after all."""
    by = {c.name: c for c in _cases()}
    stream = [c for c in by.values() if c.action != "send"]
    assert len(stream) == 7
    with stub_server.in_thread(stub_server.StubConfig(ttft_s=0.001, tbt_s=0.002)) as url:
        for c in stream:
            r = F.send(url, c, 20)
            assert F.classify(c, r) == ("aborted" if c.action == "abort" else "disconnected"), (c.name, r)
        done_at_once = F.Case("abort-1", F.GEN, F._j({**F._valid(F.GEN, 1), "stream": True}), action="abort",
                              expect="stream")
        assert F.classify(done_at_once, F.send(url, done_at_once, 20)) == "abort-ignored"
        for c in F.valid_cases():
            assert F.classify(c, F.send(url, c, 20)) == "ok"


def test_a_server_that_dies_is_counted_and_the_pass_ends_at_once():
    """The stub dies on an out-of-vocabulary id (as plain SGLang 0.5.16 does): one death, the
    requests after it unsent instead of each waiting out its timeout."""
    bad = [c for c in _cases() if c.name in ("generate:input_ids=id_past_vocab", "generate:body=array",
                                             "chat:body=number", "generate:max_new_tokens=string")]
    t0 = time.time()
    with stub_server.in_thread(stub_server.StubConfig(ttft_s=0.001, tbt_s=0.0005, die_on_bad_ids=128256)) as url:
        r = F.fuzz(url, n=400, valid_every=10, workers=4, timeout_s=30, paths=(F.GEN, F.CHAT), bad=bad)
    assert time.time() - t0 < 10
    assert r["deaths"] == 1 and not r["server_alive_after"] and r["death"]["outcome"] == "conn"
    assert r["unsent"] > 300 and r["malformed"] == 400 and r["malformed_sent"] < 100
    assert r["malformed_sent"] + r["valid_sent"] + r["unsent"] == r["malformed"] + r["valid"]
    assert r["by_case"]["generate:input_ids=id_past_vocab"].get("conn", 0) >= 1
    assert r["five_xx"] == r["counts"].get("5xx", 0) and not r["all_valid_ok"]
    assert not any(w["outcome"] == "unsent" for w in r["not_right"])


def test_the_key_goes_with_every_request_and_the_budget_stops_the_sending():
    bad = [c for c in _cases() if c.name in ("generate:body=array", "chat:body=number", "admin:abort_request=empty",
                                             "admin:v1_models=DELETE", "generate:stream=abort")]
    cfg = stub_server.StubConfig(ttft_s=0.001, tbt_s=0.0005, api_key="sekrit")
    with stub_server.in_thread(cfg) as url:
        r = F.fuzz(url, n=50, valid_every=5, workers=4, timeout_s=20, paths=(F.GEN, F.CHAT, F.ADMIN), bad=bad,
                   api_key="sekrit")
        assert r["all_valid_ok"] and r["all_malformed_right"] and r["not_right_total"] == 0, r["not_right"]
        assert r["counts"] == {"4xx": 20, "answered": 20, "aborted": 10, "ok": 10}
        r = F.fuzz(url, n=50, valid_every=5, workers=4, timeout_s=20, paths=(F.GEN, F.CHAT, F.ADMIN), bad=bad)
        assert r["counts"]["valid-failed-401"] == 10 and r["counts"]["refused-401"] == 10  # no key: refused
        r = F.fuzz(url, n=50, valid_every=0, workers=1, timeout_s=20, paths=(F.GEN,), bad=bad[:1], budget_s=1e-9,
                   api_key="sekrit")
        assert r["unsent"] == r["malformed"] == 50 and r["malformed_sent"] == 0 and r["deaths"] == 0


def test_the_recorded_command_line_hides_the_key():
    assert F.redact(["--n", "5", "--api-key", "k", "--api-key=z"]) == ["--n", "5", "--api-key", "***", "--api-key=***"]
