"""bench.fuzz: the hostile cases, how outcomes are judged, and a pass against the stub server."""
import json

import pytest

from bench import fuzz as F
from bench import stub_server
from sglang_mux.cli import UsageError


def test_cases_cover_every_route_and_kind():
    cs = F.cases(seed=0, context_len=4096, big_mb=0.1)
    names = [c.name for c in cs]
    assert len(names) == len(set(names)) and len(cs) >= 80
    assert {c.path for c in cs} == {F.GEN, F.COMP, F.CHAT} and not any(c.valid for c in cs)
    kinds = {n.split(":", 1)[1].split("=")[0] for n in names}
    assert {"body", "missing_prompt", "missing_messages", "max_tokens", "max_new_tokens", "input_ids",
            "prompt_past_context", "oversized_body"} <= kinds
    assert [c.body for c in cs] == [c.body for c in F.cases(seed=0, context_len=4096, big_mb=0.1)]
    past = next(c for c in cs if c.name == "generate:prompt_past_context")
    assert len(json.loads(past.body)["input_ids"]) == 4096 + 64
    assert len(next(c for c in cs if c.name == "generate:oversized_body").body) > 0.1 * 2 ** 20
    with pytest.raises(UnicodeDecodeError):
        next(c for c in cs if c.name == "chat:body=invalid_utf8").body.decode()


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
    assert (r["malformed"], r["valid"]) == (70, 10)
    assert r["counts"] == {"4xx": 50, "5xx": 10, "2xx": 10, "ok": 10}  # each case 10 times
    assert {n: list(v) for n, v in r["by_case"].items() if not n.startswith("valid")} == \
        {n: [k] for n, k in pick.items()}
    assert not r["all_malformed_4xx"] and r["all_valid_ok"] and r["server_alive_after"]
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
