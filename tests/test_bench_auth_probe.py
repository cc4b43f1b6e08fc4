"""bench.auth_probe against the stub server answering as SGLang's --api-key does, with and
without an auth hole, and with auth off."""
import json
import sys
import types
import urllib.request

import pytest

from bench import auth_probe as A
from bench import stub_server
from sglang_mux.cli import UsageError

STUB_ROUTES = [["POST", "/generate"], ["POST", "/v1/completions"], ["POST", "/v1/chat/completions"],
               ["POST", "/abort_request"], ["GET", "/flush_cache"], ["POST", "/flush_cache"],
               ["GET", "/v1/models"], ["GET", "/get_model_info"], ["GET", "/health"], ["GET", "/metrics"]]


def _flushes(url: str) -> int:
    """The stub's count of cache flushes (its /metrics, open without a key): a handler that ran."""
    text = urllib.request.urlopen(url + "/metrics", timeout=5).read().decode()
    return int(float(next(ln.split()[-1] for ln in text.splitlines() if ln.startswith("sglang:cache_flushes_total"))))


def _stub(**kw):
    return stub_server.in_thread(stub_server.StubConfig(ttft_s=0.001, tbt_s=0.0005, **kw))


def _routes():
    return [tuple(r) + ("normal",) for r in STUB_ROUTES]


def test_every_route_refuses_without_the_key_and_health_and_metrics_stay_open():
    with _stub(api_key="k") as url:
        r = A.probe(url, "k", _routes(), timeout_s=10)
        assert _flushes(url) == 0
    assert r["ok"] and not r["auth_off"] and r["not_ok"] == [] and r["gate_status"] == 401
    assert r["served_without_key"] == 0 and r["reached_without_key"] == 0
    by = {(x["method"], x["path"]): x for x in r["routes"]}
    assert len(by) == len(STUB_ROUTES) + 1  # and the path no route has
    assert by[("GET", A.NO_ROUTE)]["statuses"] == {"none": 401, "wrong": 401, "no_scheme": 401}
    assert by[("POST", "/flush_cache")]["statuses"] == {"none": 401, "wrong": 401, "no_scheme": 401}
    assert by[("GET", "/metrics")]["statuses"] == {"none": 200, "wrong": 200, "no_scheme": 200}
    # the harmless few went with the key too, and were served
    assert [x["statuses"].get("key") for x in r["routes"] if "key" in x["statuses"]] == [200, 200, 200]


def test_an_auth_hole_is_reported_as_served():
    """/flush_cache served without the key: counted three times (no key, a wrong one, no Bearer),
    and its handler did run (the stub's flush count), so the probe reports, not hides, it."""
    with _stub(api_key="k", open_paths=("/flush_cache",)) as url:
        r = A.probe(url, "k", _routes(), timeout_s=10)
        assert _flushes(url) == 6  # GET and POST, three ways each
    assert not r["ok"] and r["served_without_key"] == 6 and r["reached_without_key"] == 6
    assert sorted(x.split(":")[0] for x in r["not_ok"]) == ["GET /flush_cache", "POST /flush_cache"]


def test_a_server_without_auth_gets_nothing_but_the_harmless_few():
    with _stub() as url:
        r = A.probe(url, "k", _routes(), timeout_s=10)
        assert _flushes(url) == 0
    assert r["auth_off"] and not r["ok"] and r["gate_status"] == 200
    assert {(x["method"], x["path"]) for x in r["routes"]} == {("GET", "/health"), ("GET", "/metrics"),
                                                               ("GET", "/get_model_info"), ("POST", "/generate")}
    assert r["served_without_key"] == 6  # get_model_info and generate, three ways each


def test_admin_force_routes_expect_403_and_open_paths_2xx():
    assert A.expected("/update_weights_from_disk", "admin_force") == 403
    assert A.expected("/flush_cache", "admin_optional") == 401 and A.expected("/health_generate", "normal") == "2xx"
    with _stub(api_key="k") as url:  # the stub answers 401 where SGLang would answer 403: not ok
        r = A.probe(url, "k", [("POST", "/abort_request", "admin_force")], timeout_s=10)
    assert not r["ok"] and r["not_ok"] == ["POST /abort_request: {'none': 401, 'wrong': 401, 'no_scheme': 401} "
                                           "(expected 403)"]
    assert r["served_without_key"] == 0 and r["reached_without_key"] == 0


def test_sglang_routes_lists_every_method_fills_parameters_and_skips_websockets(monkeypatch):
    level = types.SimpleNamespace(value="admin_optional")
    ep = types.SimpleNamespace(_auth_level=level)
    routes = [types.SimpleNamespace(path="/generate", methods={"PUT", "POST"}, endpoint=lambda: None),
              types.SimpleNamespace(path="/flush_cache", methods={"GET", "POST"}, endpoint=ep),
              types.SimpleNamespace(path="/v1/models/{model:path}", methods={"GET"}, endpoint=None),
              types.SimpleNamespace(path="/v1/realtime", endpoint=None)]  # a websocket route: no methods
    hs = types.ModuleType("sglang.srt.entrypoints.http_server")
    hs.app = types.SimpleNamespace(routes=routes)
    for name in ("sglang", "sglang.srt", "sglang.srt.entrypoints"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "sglang.srt.entrypoints.http_server", hs)
    sys.modules["sglang.srt.entrypoints"].http_server = hs
    assert A.sglang_routes() == [("POST", "/generate", "normal"), ("PUT", "/generate", "normal"),
                                 ("GET", "/flush_cache", "admin_optional"), ("POST", "/flush_cache", "admin_optional"),
                                 ("GET", "/v1/models/dummy", "normal")]


def test_routes_from_sglang_need_sglang_and_a_file_must_hold_routes(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "sglang", None)  # not installed (import fails)
    with pytest.raises(UsageError, match="--routes sglang: cannot import"):
        A.sglang_routes()
    with pytest.raises(UsageError, match="no routes file at"):
        A.file_routes(str(tmp_path / "nope.json"))
    (tmp_path / "r.json").write_text('[["GET", "v1/models"]]')
    with pytest.raises(UsageError, match=r"expected a JSON list of \[method, path\]"):
        A.file_routes(str(tmp_path / "r.json"))
    (tmp_path / "r.json").write_text('[["get", "/v1/models"], ["POST", "/x", "admin_force"]]')
    assert A.file_routes(str(tmp_path / "r.json")) == [("GET", "/v1/models", "normal"), ("POST", "/x", "admin_force")]


def test_cli_writes_the_result_without_the_key(tmp_path, capsys):
    (tmp_path / "r.json").write_text(json.dumps(STUB_ROUTES))
    with _stub(api_key="s3cret") as url:
        A.main(["--server-url", url, "--api-key", "s3cret", "--routes", str(tmp_path / "r.json"),
                "--out", str(tmp_path / "a.json")])
    res = json.loads((tmp_path / "a.json").read_text())
    assert res["ok"] and "s3cret" not in res["command"] and "--api-key ***" in res["command"]
    assert json.loads(capsys.readouterr().out)["served_without_key"] == 0
    with pytest.raises(UsageError, match="no server answers"):
        A.main(["--server-url", "http://127.0.0.1:9", "--api-key", "k", "--routes", str(tmp_path / "r.json")])
