"""bench: the mux-off / preemption experiments -- systems mux-off and mux-nopreempt, the
--mux-ttft-ms-per-token run option, the mixed workload, TTFT per prompt token, the report's
throughput and preemption comparisons. CPU only (a stub plays every server)."""
import json
import socket
import sys
from pathlib import Path

import numpy as np
import pytest

from bench import metrics as M
from bench import report, run, systems
from bench import workloads as W
from sglang_mux.mux_args import split_argv

MODEL = "/models/llama"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------- systems

@pytest.mark.parametrize("kw", [
    {},
    dict(extra_args=["--attention-backend", "triton", "--grammar-backend", "none"]),
    dict(incremental=False, tokenizer_path="/tok", mem_fraction=0.7, extra_args=["--foo", "1"]),
])
def test_mux_off_is_sglang_plus_disable_mux(kw):
    sg = systems.server_command("sglang", MODEL, 30001, **kw)
    # the mux-only options must not leak into mux-off: multiplexing is off
    off = systems.server_command("mux-off", MODEL, 30001, tbt_slo_ms=50, ttft_slo_ms=5000,
                                 timeline="/tmp/t.jsonl", ttft_ms_per_token=0.1, **kw)
    extra = list(kw.get("extra_args", []))
    assert off[:3] == [sys.executable, "-m", "sglang_mux.launch_server"]
    assert off[3:] == sg[3:len(sg) - len(extra)] + ["--disable-mux"] + extra
    assert systems.kind("mux-off") == "sglang"
    # what sglang_mux.launch_server hands to SGLang's parser is exactly sglang's argv
    mux, rest = split_argv(off[3:])
    assert mux.disable_mux and rest == sg[3:]
    assert systems.mux_settings(off) is None and systems.mux_settings(sg) is None


def test_mux_nohost_turns_only_the_host_budget_off():
    mux, _ = split_argv(systems.server_command("mux-nohost", MODEL, 1, tbt_slo_ms=50)[3:])
    assert systems.kind("mux-nohost") == "mux"
    assert (mux.tbt_host_budget, mux.preemption, mux.policy, mux.tbt_slo_ms) == (False, True, "dispatcher", 50.0)
    assert split_argv(systems.server_command("mux", MODEL, 1)[3:])[0].tbt_host_budget is True


def test_mux_hostq_sets_the_host_time_quantile():
    mux, _ = split_argv(systems.server_command("mux-hostq99", MODEL, 1, tbt_slo_ms=50)[3:])
    assert systems.kind("mux-hostq99") == "mux"
    assert (mux.tbt_host_quantile, mux.tbt_host_budget, mux.policy) == (0.99, True, "dispatcher")
    assert split_argv(systems.server_command("mux", MODEL, 1)[3:])[0].tbt_host_quantile == 0.9
    with pytest.raises(ValueError, match="unknown system"):
        systems.kind("mux-hostq5")


def test_mux_hybrid_fq_sets_the_fused_budget_quantile():
    mux, _ = split_argv(systems.server_command("mux-hybrid-fq98", MODEL, 1, tbt_slo_ms=30)[3:])
    assert systems.kind("mux-hybrid-fq98") == "mux"
    assert (mux.fused_host_quantile, mux.policy, mux.tbt_slo_ms) == (0.98, "hybrid", 30.0)
    assert split_argv(systems.server_command("mux-hybrid", MODEL, 1)[3:])[0].fused_host_quantile == 0.99
    with pytest.raises(ValueError, match="unknown system"):
        systems.kind("mux-hybrid-fq9")


def test_mux_hybrid_fs_budgets_a_fused_streaks_first_iteration_apart():
    mux, _ = split_argv(systems.server_command("mux-hybrid-fs", MODEL, 1, tbt_slo_ms=30)[3:])
    assert systems.kind("mux-hybrid-fs") == "mux"
    assert (mux.fused_start_budget, mux.policy, mux.tbt_slo_ms) == (True, "hybrid", 30.0)
    assert split_argv(systems.server_command("mux-hybrid", MODEL, 1)[3:])[0].fused_start_budget is False


def test_mux_defer_forms_prefill_batches_after_the_decode_launch():
    mux, _ = split_argv(systems.server_command("mux-defer", MODEL, 1, tbt_slo_ms=30)[3:])
    assert systems.kind("mux-defer") == "mux"
    assert (mux.defer_prefill_start, mux.policy, mux.tbt_slo_ms) == (True, "dispatcher", 30.0)
    assert split_argv(systems.server_command("mux", MODEL, 1)[3:])[0].defer_prefill_start is False


def test_mux_hybrid_serves_with_the_hybrid_policy_and_the_benchmarks_slos():
    mux, rest = split_argv(systems.server_command("mux-hybrid", MODEL, 1, tbt_slo_ms=30, ttft_slo_ms=5000)[3:])
    assert systems.kind("mux-hybrid") == "mux" and "--chunked-prefill-size" not in rest
    assert (mux.policy, mux.tbt_slo_ms, mux.ttft_slo_ms) == ("hybrid", 30.0, 5000.0)
    with pytest.raises(ValueError, match="unknown system"):  # the launcher adds the prefill graph to any hybrid
        systems.kind("mux-hybrid-graph")


def test_mux_nopreempt_and_ttft_per_token():
    cmd = systems.server_command("mux-nopreempt", MODEL, 1, tbt_slo_ms=50, ttft_slo_ms=800,
                                 ttft_ms_per_token=0.25, extra_args=["--x", "1"])
    assert systems.kind("mux-nopreempt") == "mux" and cmd[-2:] == ["--x", "1"]
    mux, rest = split_argv(cmd[3:])
    assert (mux.policy, mux.preemption, mux.ttft_slo_ms, mux.ttft_ms_per_token) == \
        ("dispatcher", False, 800, 0.25)
    assert "--mux-policy" not in rest and not mux.disable_mux
    assert systems.mux_settings(cmd) == {"ttft_slo_ms": 800, "ttft_ms_per_token": 0.25,
                                         "preemption": False}
    on = systems.server_command("mux", MODEL, 1, ttft_ms_per_token=0.25)
    assert split_argv(on[3:])[0].preemption and "--no-mux-preemption" not in on
    assert systems.mux_settings(on) == {"ttft_slo_ms": 2000, "ttft_ms_per_token": 0.25,
                                        "preemption": True}
    fixed = systems.server_command("mux-fixed-48", MODEL, 1, ttft_ms_per_token=0.5)
    assert split_argv(fixed[3:])[0].ttft_ms_per_token == 0.5
    # not given: the flag is absent and the server's length-aware default is what ran
    plain = systems.server_command("mux", MODEL, 1)
    assert "--mux-ttft-ms-per-token" not in plain
    assert systems.mux_settings(plain) == {"ttft_slo_ms": 2000, "ttft_ms_per_token": 0.2,
                                           "preemption": True}
    # --server-args may repeat a flag: the last wins, as in argparse
    assert systems.mux_settings(plain + ["--mux-ttft-ms-per-token=2", "--no-mux-preemption",
                                         "--mux-ttft-slo-ms", "300"]) == \
        {"ttft_slo_ms": 300, "ttft_ms_per_token": 2.0, "preemption": False}
    assert systems.expand("mux,mux-nopreempt,mux-off") == ["mux", "mux-nopreempt", "mux-off"]
    assert "mux-off" not in systems.expand("all") and "mux-nopreempt" not in systems.expand("all")


# ---------------------------------------------------------------------------- workload

def test_mixed_workload_half_sharegpt_half_loogle():
    wl = W.build("mixed", rate=2.0, duration_s=101, salt="rate=2")
    assert wl.name == "mixed" and wl.kind == "generate" and len(wl.requests) == 202
    labels = [r.meta["subset"] for r in wl.requests]
    assert labels.count("sharegpt") == 101 and labels.count("loogle") == 101
    assert 0 < sum(a != b for a, b in zip(labels, labels[1:]))        # interleaved, not blocks
    # each class is its own generator's sequence, in order (same seed, salt): Table 1 lengths
    for name in ("sharegpt", "loogle"):
        ref = W.synthetic_workload(name, n=101, rate=2.0, salt="rate=2").requests
        mine = [r for r in wl.requests if r.meta["subset"] == name]
        assert all(np.array_equal(a.input_ids, b.input_ids) and a.max_new_tokens == b.max_new_tokens
                   for a, b in zip(mine, ref))
        lo, hi = W.SYNTHETIC[name]["inp"][2:]
        assert all(lo <= r.prompt_len <= hi for r in mine)
    short = np.mean([r.prompt_len for r in wl.requests if r.meta["subset"] == "sharegpt"])
    long_ = np.mean([r.prompt_len for r in wl.requests if r.meta["subset"] == "loogle"])
    assert short < 1000 < 10_000 < long_
    # one Poisson process over all requests, at the rate
    ts = [r.t for r in wl.requests]
    assert ts[0] == 0 and np.all(np.diff(ts) >= 0)
    assert np.array_equal(ts, W.poisson_arrivals(202, 2.0, 0))
    assert W.mean_rate(ts) == pytest.approx(2.0, rel=0.2)
    assert len({r.rid for r in wl.requests}) == 202
    o = wl.options
    assert o["workload"] == "mixed" and o["arrival"] == "poisson" and o["mix"] == \
        {"sharegpt": 0.5, "loogle": 0.5} and o["subset_counts"] == {"sharegpt": 101, "loogle": 101}
    assert set(o["distributions"]) == {"sharegpt", "loogle"} and "mixed" in W.WORKLOADS
    # seeded: same options, same workload; another seed or salt, another one
    again = W.build("mixed", rate=2.0, duration_s=101, salt="rate=2")
    assert [r.meta for r in again.requests] == [r.meta for r in wl.requests]
    assert all(np.array_equal(a.input_ids, b.input_ids) for a, b in zip(again.requests, wl.requests))
    other = W.build("mixed", rate=2.0, duration_s=101, salt="rate=2", seed=1)
    assert [r.meta["subset"] for r in other.requests] != labels
    odd = W.mixed_workload(n=5, rate=1.0, input_cap=2000, output_cap=4)
    assert [r.meta["subset"] for r in odd.requests].count("sharegpt") == 3
    assert max(r.prompt_len for r in odd.requests) <= 2000
    assert max(r.max_new_tokens for r in odd.requests) <= 4


# ---------------------------------------------------------------------------- metrics

def rec(rid, ttft, prompt, subset=None, ok=True):
    r = dict(rid=rid, scheduled=0.0, send=0.0, first_token=ttft / 1e3, end=ttft / 1e3 + 0.01,
             tok_ms=[ttft, ttft + 10], output_tokens=2, prompt_tokens=prompt, cached_tokens=0,
             ok=ok, error=None if ok else "timeout")
    if subset:
        r["subset"] = subset
    return r


def test_ttft_per_prompt_token():
    recs = [rec("a", 100, 200, "sharegpt"), rec("b", 3000, 30000, "loogle"),
            rec("c", 2000, 100, "sharegpt"), rec("d", 50, 10, "sharegpt", ok=False)]
    df = M.per_request(recs).set_index("rid")
    assert df.loc["a", "ttft_ms_per_token"] == 0.5 and df.loc["b", "ttft_ms_per_token"] == 0.1
    assert df.loc["c", "ttft_ms_per_token"] == 20
    s = M.summarize(recs)
    t = s["ttft_ms_per_token"]                        # finished requests only: 0.1, 0.5, 20
    assert t["p50"] == 0.5 and t["p90"] == pytest.approx(0.5 + 0.8 * 19.5)
    assert t["p99"] == pytest.approx(0.5 + 0.98 * 19.5) and t["mean"] == pytest.approx(20.6 / 3)
    b = s["by_subset"]
    assert set(b) == {"sharegpt", "loogle"}
    assert (b["sharegpt"]["n"], b["sharegpt"]["n_ok"], b["loogle"]["n"]) == (3, 2, 1)
    assert b["sharegpt"]["ttft_ms_per_token"]["p50"] == pytest.approx(10.25)
    assert b["loogle"]["ttft_ms"]["p99"] == 3000
    plain = M.summarize([rec("x", 10, 0), rec("y", 10, None), rec("z", 10, 5)])
    assert plain["by_subset"] is None                 # no subsets; no prompt -> not counted
    assert plain["ttft_ms_per_token"]["p50"] == 2 and plain["ttft_ms_per_token"]["p99"] == 2


# ---------------------------------------------------------------------------- report

def _point(rate, **m):
    summ = {"n": 10, "n_ok": 10, "n_failed": 0, "ttft_ms": {"p99": 100}, "tbt_ms": {"p99": 20},
            "slo_attainment": 1.0, **m}
    return {"rate": rate, "pass": True, "summary": summ}


def _summary(systems_points, **extra):
    return {"slo": {"tbt_ms": 50, "ttft_ms": 5000}, "workload": {"workload": "sharegpt"},
            "systems": {n: {"goodput_rps": None, "points": pts, **extra.get(n, {})}
                        for n, pts in systems_points.items()}}


def test_throughput_comparison():
    s = _summary({
        "sglang": [_point(1, output_tok_s=1000, total_tok_s=3000),
                   _point(8, output_tok_s=5000, total_tok_s=15000)],
        "mux-off": [_point(1, output_tok_s=990, total_tok_s=2985),
                    _point(8, output_tok_s=4850, total_tok_s=14950),
                    _point(16, output_tok_s=5100, total_tok_s=15100)]})
    rows = report.throughput_comparison(s)
    assert [r["rate"] for r in rows] == [1, 8]                       # common rates only
    assert rows[0]["output_tok_s_ratio"] == pytest.approx(0.99)
    assert rows[0]["total_tok_s_ratio"] == pytest.approx(0.995) and rows[0]["within"] is True
    assert rows[1]["output_tok_s_ratio"] == pytest.approx(0.97) and rows[1]["within"] is False
    text = report.render(s)
    assert "mux-off vs sglang throughput" in text
    assert "| 1 | 1000 | 990 | 0.9900 | 3000 | 2985 | 0.9950 | ✓ yes |" in text
    assert "| 8 | 5000 | 4850 | 0.9700 |" in text and "✗ no" in text
    assert report.throughput_comparison(_summary({"sglang": [_point(1)]})) == []
    assert "throughput" not in report.render(_summary({"sglang": [_point(1)]}))
    missing = _summary({"sglang": [_point(1, output_tok_s=None, total_tok_s=None)],
                        "mux-off": [_point(1, output_tok_s=1, total_tok_s=1)]})
    assert report.throughput_comparison(missing)[0]["within"] is None


def test_preemption_comparison_and_per_token_column():
    def tpt(p50, p90, p99):
        return {"mean": None, "p50": p50, "p90": p90, "p99": p99}
    on = _point(0.5, ttft_ms_per_token=tpt(0.2, 0.5, 1.5), output_tok_s=100, by_subset={
        "sharegpt": {"ttft_ms_per_token": tpt(0.3, 1, 2)},
        "loogle": {"ttft_ms_per_token": tpt(0.1, 0.1, 0.2)}})
    on["preemptions"] = 7
    off = _point(0.5, ttft_ms_per_token=tpt(0.2, 2, 9.0), output_tok_s=100, by_subset={
        "sharegpt": {"ttft_ms_per_token": tpt(0.3, 5, 12)},
        "loogle": {"ttft_ms_per_token": tpt(0.1, 0.1, 0.15)}})
    off["preemptions"] = 0
    mux = {"ttft_slo_ms": 300, "ttft_ms_per_token": 0.1, "preemption": True}
    s = _summary({"mux": [on], "mux-nopreempt": [off]},
                 **{"mux": {"mux": mux}, "mux-nopreempt": {"mux": {**mux, "preemption": False}}})
    rows = report.preemption_comparison(s)
    assert len(rows) == 1 and rows[0]["lower"] is True
    assert rows[0]["p99_ratio"] == pytest.approx(1.5 / 9)
    assert (rows[0]["on_p90"], rows[0]["off_p90"]) == (0.5, 2)
    assert rows[0]["by_subset"]["sharegpt"] == {"on_p99": 2, "off_p99": 12}
    assert rows[0]["preemptions"] == {"mux": 7, "mux-nopreempt": 0}
    text = report.render(s)
    assert "TTFT/token P50/P90/P99 (ms)" in text and "| 0.2/0.5/1.5 |" in text
    assert ("| 0.5 | 0.2 / 0.2 | 0.5 / 2 | 1.5 / 9 | 0.167 | 0.2 / 0.15 | 2 / 12 | 7 | ✓ yes |"
            in text)
    assert "mux 300 ms + 0.1 ms/token, preemption on" in text
    assert "mux-nopreempt 300 ms + 0.1 ms/token, preemption off" in text
    # an old summary without the metric renders as before (no column, no comparison)
    old = _summary({"mux": [_point(2)], "sglang": [_point(2)]})
    assert "TTFT/token" not in report.render(old) and "Preemption" not in report.render(old)


# ---------------------------------------------------------------------------- the runner

# Plays a mux server: a stub (it ignores SGLang/mux flags) that appends dispatcher decisions
# to --mux-timeline, preempting unless --no-mux-preemption.
FAKE_MUX = r"""
import json, sys, threading, time
from bench import stub_server
argv = sys.argv[1:]
path = argv[argv.index("--mux-timeline") + 1]
pre = "--no-mux-preemption" not in argv
def decide():
    with open(path, "a", buffering=1) as f:
        while True:
            f.write(json.dumps({"time": time.time(), "preempt": pre}, separators=(",", ":")) + "\n")
            time.sleep(0.02)
threading.Thread(target=decide, daemon=True).start()
stub_server.main(argv)
"""


def test_runner_mixed_preemption_sweep_with_stub(tmp_path, monkeypatch, capsys):
    real, seen = systems.server_command, {}

    def fake(system, *a, **k):
        cmd = real(system, *a, **k)
        seen[system] = cmd
        if systems.kind(system) == "mux":
            return [sys.executable, "-c", FAKE_MUX, *cmd[1:]]
        return [sys.executable, "-m", "bench.stub_server", *cmd[1:]]   # sglang / mux-off
    monkeypatch.setattr(run.systems, "server_command", fake)
    argv = ["--systems", "mux,mux-nopreempt", "--workload", "mixed", "--rates", "4",
            "--duration-s", "1", "--out", str(tmp_path), "--port", str(free_port()),
            "--drain-s", "10", "--no-progress", "--warmup", "1", "--output-cap", "4",
            "--server-args", "--ttft-ms 10 --tbt-ms 2", "--client-procs", "1",
            "--mux-ttft-slo-ms", "300", "--mux-ttft-ms-per-token", "0.1"]
    assert run.main(argv) == 0
    for name in ("mux", "mux-nopreempt"):
        assert systems.mux_settings(seen[name])["ttft_ms_per_token"] == 0.1
        assert systems.mux_settings(seen[name])["ttft_slo_ms"] == 300
    recs = [json.loads(x) for x in (tmp_path / "mux__4.jsonl").read_text().splitlines()]
    assert len(recs) == 4 and {r["subset"] for r in recs} == {"sharegpt", "loogle"}
    meta = json.loads((tmp_path / "mux__4.meta.json").read_text())
    lo, hi = meta["timeline_bytes"]
    assert 0 < lo < hi                                   # warmup decisions before the point
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["mux_ttft_ms_per_token"] == 0.1 and s["mux_ttft_slo_ms"] == 300
    assert s["slo"]["ttft_ms"] == 5000                   # the goodput check's SLO is apart
    assert s["workload"]["workload"] == "mixed" and not s["mixed_workload_options"]
    mux, nop = s["systems"]["mux"], s["systems"]["mux-nopreempt"]
    assert mux["mux"] == {"ttft_slo_ms": 300, "ttft_ms_per_token": 0.1, "preemption": True}
    assert nop["mux"] == {"ttft_slo_ms": 300, "ttft_ms_per_token": 0.1, "preemption": False}
    assert mux["points"][0]["preemptions"] > 0 and nop["points"][0]["preemptions"] == 0
    pt = mux["points"][0]["summary"]
    assert pt["ttft_ms_per_token"]["p99"] > 0 and set(pt["by_subset"]) == {"sharegpt", "loogle"}
    out = capsys.readouterr().out
    assert "Preemption: mux (on) vs mux-nopreempt (off)" in out and "TTFT/token" in out
    # dry run: the flags reach both servers; mux-off gets none of the mux ones
    capsys.readouterr()
    assert run.main(argv[:-4] + ["--systems", "sglang,mux-off", "--dry-run"]) == 0
    assert "--disable-mux" in " ".join(seen["mux-off"])
    assert "--mux-" not in " ".join(seen["mux-off"])


def test_runner_throughput_pair_with_stub(tmp_path, monkeypatch, capsys):
    real = systems.server_command
    monkeypatch.setattr(run.systems, "server_command", lambda system, *a, **k: [
        sys.executable, "-m", "bench.stub_server", *real(system, *a, **k)[1:]])
    argv = ["--systems", "sglang,mux-off", "--workload", "sharegpt", "--rates", "4",
            "--duration-s", "1", "--out", str(tmp_path), "--port", str(free_port()),
            "--drain-s", "10", "--no-progress", "--warmup", "1", "--output-cap", "8",
            "--server-args", "--ttft-ms 10 --tbt-ms 2", "--client-procs", "1"]
    assert run.main(argv) == 0
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["mux_ttft_ms_per_token"] == 0.0 and s["mux_ttft_slo_ms"] == 5000  # the flat check's K
    assert s["systems"]["mux-off"]["mux"] is None and s["systems"]["sglang"]["mux"] is None
    rows = report.throughput_comparison(s)
    assert [r["rate"] for r in rows] == [4.0] and rows[0]["output_tok_s_ratio"] > 0
    assert "mux-off vs sglang throughput" in capsys.readouterr().out


@pytest.mark.parametrize("bad", [["--mux-ttft-ms-per-token", "-1"], ["--mux-ttft-slo-ms", "0"]])
def test_run_rejects_bad_mux_slo(tmp_path, bad):
    with pytest.raises(SystemExit):
        run.parse_args(["--systems", "mux", "--rates", "1", "--out", str(tmp_path), *bad])


def test_dry_run_costs_and_flat_slo_note(tmp_path, capsys):
    base = ["--systems", "mux,mux-nopreempt", "--workload", "mixed", "--rates", "0.5",
            "--duration-s", "120", "--out", str(tmp_path), "--dry-run",
            "--startup-estimate-s", "90"]
    assert run.main(base) == 0
    err = capsys.readouterr().err
    assert "preemption never fires" in err                          # K = 0: a vacuous comparison
    assert "rate 0.5: 60 requests" in err and "mux-nopreempt total <=" in err
    totals = [int(x.split("<= ")[1].split(" s")[0]) for x in err.splitlines() if " total <= " in x]
    assert len(totals) == 2 and f"dry run: <= {sum(totals)} s in all" in err
    assert run.main(base + ["--mux-ttft-ms-per-token", "0.5"]) == 0
    err = capsys.readouterr().err
    assert "preemption never fires" not in err and "--mux-ttft-ms-per-token 0.5" in err
    assert not list(tmp_path.iterdir())                             # a dry run writes nothing


def test_the_report_puts_the_share_of_requests_within_their_tbt_slo_beside_the_pooled_p99():
    """The mixed cell served on an H100: the hybrid's pooled P99 TBT 42.0 ms with 99 of its 100
    requests within the SLO by their own P99 gap, the capped baseline's 37.9 ms with all 100."""
    s = json.loads((Path(__file__).resolve().parents[1] / "bench/results/long_prompts_h100_2026-12-06/mixed"
                    / "summary.json").read_text())
    rows: dict[str, str] = {}
    for line in report.render(s).splitlines():  # the goodput table comes first
        if line.startswith("| "):
            rows.setdefault(line.split(" | ")[0][2:], line)
    assert "P99 TBT (ms; requests within it)" in rows["system"]
    assert " | 42.0 (99.0%) | " in rows["mux-hybrid"] and " | 37.9 (100.0%) | " in rows["sglang-chunked-2048-cap512"]
