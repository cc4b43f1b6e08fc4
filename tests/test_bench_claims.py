"""bench.claims: one claim over several runs (seeds, hosts), and what it refuses to combine."""
import json
import math

import pytest

from bench import claims, systems
from sglang_mux.cli import UsageError


def sysd(*rates):
    return {"points": [{"rate": r, "pass": ok, "summary": {}} for r, ok in rates]}


def summary(seed, device="NVIDIA H100 80GB HBM3", backend="fa3", cap=8000, **systems):
    return {"workload": {"workload": "conversation", "input_cap": cap, "seed": seed, "source": f"/x/{seed}"},
            "device": device, "attention_backend": backend, "systems": systems,
            "hardware": {"gpu_uuids": [f"GPU-{seed}"]}}


def test_a_claim_holds_only_where_every_run_says_so():
    a = summary(0, mux=sysd((4, True), (4.5, False)), **{"sglang-chunked-512": sysd((3.5, False))})
    b = summary(1, mux=sysd((3.5, False)), **{"sglang-chunked-512": sysd((4, True), (4.5, False))})
    c = claims.claim({"a": a}, factor=1.0)
    assert c["verdict"] == "holds" and c["runs"][0]["ratio"] == [4 / 3.5, math.inf]
    assert not c["two_seeds_each"] and not c["all_chunked_everywhere"]
    c = claims.claim({"a": a, "b": b}, factor=1.0)
    assert c["verdict"] == "fails"                       # the second host: mux < 3.5 <= 4
    assert c["runs"][1]["ratio"] == [0.0, 3.5 / 4]
    assert c["seeds_by_device"] == {"NVIDIA H100 80GB HBM3": [0, 1]} and c["two_seeds_each"]
    text = claims.render(c)
    assert "**fails** over 2 run(s)" in text and "| b | NVIDIA H100 80GB HBM3 (GPU-1) | 1 |" in text
    assert "[0.00, 0.88)" in text
    # both bounds unknown in a run: open
    o = summary(2, mux=sysd((4, True), (4.5, False)), **{"sglang-chunked-512": sysd((4, True), (4.5, False))})
    assert claims.claim({"a": a, "o": o}, factor=1.0)["verdict"] == "open"


def test_all_eight_chunked_baselines_are_checked():
    full = {n: sysd((1, False)) for n in systems.CHUNKED}
    c = claims.claim({"a": summary(0, mux=sysd((2, True), (2.5, False)), **full)})
    assert c["runs"][0]["all_chunked"] and c["verdict"] == "holds"     # 2 >= 2 x (< 1)
    assert c["runs"][0]["baseline_interval"] == [0.0, 1.0]


def test_runs_of_different_claims_are_refused():
    base = dict(mux=sysd((4, True)), **{"sglang-chunked-512": sysd((4, True))})
    with pytest.raises(UsageError, match="different workloads"):
        claims.claim({"a": summary(0, **base), "b": summary(1, cap=None, **base)})
    with pytest.raises(UsageError, match="different attention backends"):
        claims.claim({"a": summary(0, **base), "b": summary(1, backend="triton", **base)})
    with pytest.raises(UsageError, match="needs a mux"):
        claims.claim({"a": summary(0, **{"sglang-chunked-512": sysd((4, True))})})
    old = summary(0, **base)
    new = summary(1, **base)
    new["workload"]["session_sample"] = 1            # the default, recorded by a later bench.run
    assert claims.claim({"old": old, "new": new})["verdict"] == "open"   # both >= 4: one claim, undecided


def test_cli(tmp_path, capsys):
    run = tmp_path / "r"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps(
        summary(0, mux=sysd((4, True), (4.5, False)), **{"sglang-chunked-512": sysd((1, True), (2, False))})))
    assert claims.main([str(run), "--json", str(tmp_path / "c.json")]) == 0
    assert "mux ≥ 2x best chunked prefill: **holds**" in capsys.readouterr().out
    assert json.loads((tmp_path / "c.json").read_text())["ratio"] == [2.0, 4.5]
    (run / "summary.json").write_text(json.dumps(
        summary(0, mux=sysd((4, True)), **{"sglang-chunked-512": sysd((1, False))})))
    claims.main([str(run), "--json", str(tmp_path / "c.json")])
    # strict JSON: an unbounded end is null, not Infinity
    assert json.loads((tmp_path / "c.json").read_text(), parse_constant=pytest.fail)["ratio"] == [4.0, None]
    with pytest.raises(UsageError, match="no summary.json"):
        claims.main([str(tmp_path / "none")])
