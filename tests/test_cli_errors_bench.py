"""Every bench.* and profiling.* CLI answers a bad argument or input file with one line,
``error: ...``, on stderr and exit status 2, never a traceback; a profiling tool checks its
arguments before it needs torch. Mains run in-process through ``cli.run`` (fast); one
subprocess checks that ``--help | head`` ends quietly."""

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from sglang_mux import cli

ROOT = Path(__file__).resolve().parents[1]
LLAMA = str(ROOT / "launch/models/llama-3.1-8b/config.json")
TABLE_NAME = "llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3"
TABLE = str(ROOT / "contention_tables" / TABLE_NAME)
SLICE = str(ROOT / "bench/data/conversation_first1000.jsonl")


def _has_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def error_of(module: str, argv, capsys) -> str:
    """Run ``module``'s main on argv; assert the one error line and exit 2; return that line."""
    main = importlib.import_module(module).main
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        cli.run(main, [str(x) for x in argv])
    err = capsys.readouterr().err
    assert e.value.code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.fixture
def files(tmp_path):
    """Bad input files: missing, empty, not JSON, and a run directory of each."""
    f = {"missing": tmp_path / "missing.json", "empty": tmp_path / "empty.json",
         "notjson": tmp_path / "notjson.json", "dir": tmp_path}
    f["empty"].write_text("")
    f["notjson"].write_text("{not json")
    for name, text in (("run_empty", ""), ("run_notjson", "{"), ("run_list", "[1, 2]")):
        d = tmp_path / name
        d.mkdir()
        (d / "summary.json").write_text(text)
        f[name] = d
    return f


def write_trace(path: Path, rows) -> str:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return str(path)


GOOD_ROW = {"timestamp": 0, "input_length": 600, "output_length": 20, "hash_ids": [0, 1]}


# ---- bench ---------------------------------------------------------------------------------

@pytest.mark.parametrize("module, argv, want", [
    ("bench.claims", ["--factor", "0", "x"], "--factor: must be > 0"),
    ("bench.client_capacity", ["--point-s", "0"], "--point-s: must be > 0"),
    ("bench.client_capacity", ["--start-rate", "100", "--max-rate", "10"], "above --max-rate"),
    ("bench.faults", ["--repeat", "0"], "--repeat: must be > 0"),
    ("bench.faults", ["--faults", "unplug_the_gpu"], "unknown unplug_the_gpu"),
    ("bench.faults", ["--server-url", "http://127.0.0.1:9", "--rate", "0"], "no server answers"),
    ("bench.fuzz", ["--n", "-1"], "--n: must be > 0"),
    ("bench.fuzz", ["--paths", "/nope"], "--paths: unknown /nope"),
    ("bench.fuzz", ["--skip", "generate:nope"], "--skip names no case"),
    ("bench.fuzz", ["--api-key", "k", "--server-url", "http://127.0.0.1:9"], "no server answers"),
    ("bench.auth_probe", ["--routes", "r.json"], "--api-key"),
    ("bench.auth_probe", ["--api-key", " ", "--routes", "r.json"], "--api-key is empty"),
    ("bench.plots", [], "give a bench.run output directory"),
    ("bench.prefill_mixed", ["--batches", "0"], "--batches: must be > 0"),
    ("bench.prefill_mixed", ["--table", TABLE], "needed to measure"),
    ("bench.record", ["--run", "r", "--system", "mux", "--rate", "-2", "--into", "f.json", "--key", "k"],
     "--rate: must be > 0"),
    ("bench.run", ["--systems", "bogus", "--rates", "1", "--out", "o"], "unknown system 'bogus'"),
    ("bench.run", ["--systems", "stub", "--rates", "1,0", "--out", "o"], "--rates: takes values > 0"),
    ("bench.run", ["--systems", "stub", "--rates", "fast", "--out", "o"], "comma list"),
    ("bench.run", ["--systems", "stub", "--rates", "1", "--out", "o", "--port", "70000"], "at most 65535"),
    ("bench.run", ["--systems", "stub", "--rates", "1", "--out", "o", "--tbt-slo-ms", "-5"], "must be > 0"),
    ("bench.run", ["--systems", "stub", "--rates", "1", "--out", "o", "--duration-s", "0"], "must be > 0"),
    ("bench.run", ["--systems", "stub", "--rates", "1", "--out", "o", "--turns", "5", "2"], "MIN <= MAX"),
    ("bench.run", ["--systems", "stub", "--rates", "1", "--out", "o", "--mem-fraction-static", "1.5"],
     "within (0, 1]"),
    ("bench.slo_map", ["r", "--tbt", "fast"], "--tbt: takes a comma list"),
    ("bench.soak", ["--out", "o", "--rate", "0"], "--rate: must be > 0"),
    ("bench.soak", ["--out", "o", "--chat-share", "2"], "--chat-share"),
    ("bench.stub_server", ["--port", "-1"], "--port: must be >= 0"),
    ("bench.stub_server", ["--chunk-tokens", "0"], "--chunk-tokens: must be > 0"),
    ("bench.timeline_profile", ["r", "--rate", "0"], "--rate: must be > 0"),
    ("bench.ttft_floor", ["--table", "contention_tables/nope"], "no table directory"),
    ("bench.ttft_floor", ["--table", TABLE, "--slos-s", "two"], "--slos-s: takes a comma list"),
    ("bench.ttft_floor", ["--table", TABLE, "--limit", "0"], "--limit: must be > 0"),
    ("bench.work_bound", ["--table", TABLE, "--rates", "0"], "--rates: takes values > 0"),
    ("bench.work_bound", ["--table", TABLE, "--rates", "3", "--tbt-slo-ms", "0"], "--tbt-slo-ms: must be > 0"),
    ("bench.work_bound", ["--table", TABLE, "--rates", "3", "--tbt-slo-ms", "2", "--host-ms", "5"],
     "no decode time"),
    ("bench.work_bound", ["--table", TABLE, "--rates", "3", "--bogus"], "unrecognized arguments: --bogus"),
])
def test_bench_bad_argument(module, argv, want, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative paths above name nothing
    assert want in error_of(module, argv, capsys)


@pytest.mark.parametrize("module, argv", [
    ("bench.claims", ["{run}"]),
    ("bench.report", ["{run}"]),
    ("bench.slo_map", ["{run}"]),
    ("bench.plots", ["{run}"]),
    ("bench.record", ["--run", "{run}", "--system", "mux", "--rate", "2", "--into", "{dir}/f.json", "--key", "k"]),
])
@pytest.mark.parametrize("run", ["missing", "run_empty", "run_notjson", "run_list"])
def test_bench_bad_run_directory(module, argv, run, files, capsys):
    argv = [a.format(run=files[run], dir=files["dir"]) for a in argv]
    err = error_of(module, argv, capsys)
    assert "summary.json" in err or "no directory" in err


@pytest.mark.parametrize("which", ["empty", "notjson", "missing"])
def test_bench_bad_input_files(which, files, capsys, tmp_path):
    bad = files[which]
    err = error_of("bench.prefill_mixed", ["--rescore", bad], capsys)
    assert str(bad) in err
    err = error_of("bench.plots", ["--timeline", bad], capsys)
    assert str(bad) in err
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    (run / "summary.json").write_text(json.dumps({"systems": {"mux": {"points": [{"rate": 2}]}}}))
    if which != "missing":  # a missing --into is created
        err = error_of("bench.record", ["--run", run, "--system", "mux", "--rate", "2", "--into", bad, "--key", "k"],
                       capsys)
        assert str(bad) in err


def test_bench_run_bad_trace_path(files, capsys, tmp_path):
    base = ["--systems", "stub", "--rates", "1", "--out", tmp_path / "o", "--dry-run"]
    assert "no trace file" in error_of("bench.run", base + ["--trace-path", files["missing"]], capsys)
    assert "is empty" in error_of("bench.run", base + ["--trace-path", files["empty"]], capsys)


def test_bench_soak_report_needs_pieces(tmp_path, capsys):
    assert "pieces.jsonl" in error_of("bench.soak", ["--out", tmp_path, "--report"], capsys)
    (tmp_path / "pieces.jsonl").write_text('{"start": 1}\nnot json\n')
    assert "line 1 lacks" in error_of("bench.soak", ["--out", tmp_path, "--report"], capsys)


def test_bench_timeline_profile_bad_inputs(tmp_path, capsys):
    assert "no directory" in error_of("bench.timeline_profile", [tmp_path / "none", "--rate", "2"], capsys)
    assert "no point mux@2" in error_of("bench.timeline_profile", [tmp_path, "--rate", "2"], capsys)
    err = error_of("bench.timeline_profile", [tmp_path, "--rate", "2", "--table", "nope"], capsys)
    assert err.startswith("error: --table: no table directory nope")


@pytest.mark.parametrize("module", ["bench.ttft_floor", "bench.work_bound"])
def test_bench_bad_trace(module, tmp_path, capsys):
    extra = ["--rates", "3"] if module == "bench.work_bound" else []

    def err(trace):
        return error_of(module, ["--table", TABLE, "--trace", trace, *extra], capsys)

    assert "no trace file" in err(tmp_path / "none.jsonl")
    assert "no requests (an empty trace)" in err(write_trace(tmp_path / "empty.jsonl", []))
    assert "line 2 is not JSON" in err(write_trace(tmp_path / "bad.jsonl", [GOOD_ROW, "{oops"]))
    assert "line 1 is not a JSON object" in err(write_trace(tmp_path / "list.jsonl", ["[1, 2]"]))
    no_ts = {k: v for k, v in GOOD_ROW.items() if k != "timestamp"}
    assert "line 2 lacks timestamp" in err(write_trace(tmp_path / "nots.jsonl", [GOOD_ROW, no_ts]))


def test_a_table_by_its_shipped_name(tmp_path, capsys, monkeypatch):
    """--table takes a shipped table's name from any directory, as after a non-editable install."""
    from bench import ttft_floor

    monkeypatch.chdir(tmp_path)
    assert ttft_floor.main(["--table", TABLE_NAME, "--limit", "20"]) == 0
    assert json.loads(capsys.readouterr().out)["requests"] == 20


def test_help_shows_defaults(capsys):
    with pytest.raises(SystemExit) as e:
        cli.run(importlib.import_module("bench.run").main, ["--help"])
    assert e.value.code == 0
    assert "(default: 120.0)" in capsys.readouterr().out


def test_help_into_a_closed_pipe_is_quiet():
    p = subprocess.run(f"{sys.executable} -m bench.run --help | head -3", shell=True, cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert len(p.stdout.splitlines()) == 3 and p.stdout.startswith("usage: python -m bench.run")
    assert p.stderr == ""


# ---- profiling -----------------------------------------------------------------------------

@pytest.mark.parametrize("module, argv, want", [
    ("profiling.corun_shapes", ["--model-config", LLAMA, "--prefill", "8192"], "expected [K x]N+R"),
    ("profiling.corun_shapes", ["--model-config", LLAMA, "--prefill", "8192+0", "--decode-sms", "0"],
     "--decode-sms: must be > 0"),
    ("profiling.decode_kernel", ["--model-config", LLAMA, "--table", "nope"], "--table: no table directory nope"),
    ("profiling.engine_bench", ["--model-config", LLAMA, "--repeats", "0"], "--repeats: must be > 0"),
    ("profiling.engine_bench", ["--model-config", LLAMA, "--decode-bs", "1,x"], "--decode-bs: takes a comma list"),
    ("profiling.gemm_curve", ["--model-config", LLAMA, "--out", "o", "--tokens", "128,0"], "--tokens: takes values > 0"),
    ("profiling.gemm_waves", ["--model-config", LLAMA, "--repeats", "-1"], "--repeats: must be > 0"),
    ("profiling.host_floor", ["--model-config", LLAMA, "--prefill-sms", "132,x"], "--prefill-sms: takes a comma"),
    ("profiling.partitions_bench", ["--granularity", "0"], "--granularity: must be > 0"),
    ("profiling.run", ["--model-config", LLAMA, "--what", "bogus", "--plan-only"], "--what: unknown bogus"),
    ("profiling.run", ["--model-config", LLAMA, "--time-budget-s", "0", "--plan-only"], "must be > 0"),
    ("profiling.run", ["--model-config", LLAMA, "--log-level", "loud", "--plan-only"], "invalid choice"),
])
def test_profiling_bad_argument(module, argv, want, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert want in error_of(module, argv, capsys)


PROFILING = {  # each tool's smallest good command line, {cfg} the model config
    "profiling.corun_shapes": ["--model-config", "{cfg}", "--prefill", "8192+0"],
    "profiling.decode_kernel": ["--model-config", "{cfg}"],
    "profiling.engine_bench": ["--model-config", "{cfg}"],
    "profiling.gemm_curve": ["--model-config", "{cfg}", "--out", "{tmp}/t"],
    "profiling.gemm_waves": ["--model-config", "{cfg}"],
    "profiling.host_floor": ["--model-config", "{cfg}"],
    "profiling.run": ["--model-config", "{cfg}", "--plan-only"],
}


@pytest.mark.parametrize("module", sorted(PROFILING))
def test_profiling_bad_model_config(module, files, capsys, tmp_path):
    nokey = tmp_path / "nokey.json"
    nokey.write_text(json.dumps({"hidden_size": 4096}))
    for which, want in (("missing", "no model config.json"), ("empty", "is empty"), ("notjson", "not valid JSON"),
                        ("nokey", "lacks")):
        cfg = nokey if which == "nokey" else files[which]
        argv = [a.format(cfg=cfg, tmp=tmp_path) for a in PROFILING[module]]
        assert want in error_of(module, argv, capsys)


@pytest.mark.skipif(_has_torch(), reason="checks the CPU machine's answer; torch is installed here")
@pytest.mark.parametrize("module", sorted(set(PROFILING) - {"profiling.run"}) + ["profiling.partitions_bench",
                                                                                   "bench.prefill_mixed"])
def test_a_good_profiling_command_on_a_cpu_machine_says_it_needs_a_gpu(module, capsys, tmp_path):
    argv = [a.format(cfg=LLAMA, tmp=tmp_path) for a in PROFILING.get(module, [])]
    if module == "bench.prefill_mixed":
        argv = ["--model-config", LLAMA, "--table", TABLE_NAME, "--out", tmp_path / "o.json"]
    before = set(sys.modules)
    assert "needs torch and sglang" in error_of(module, argv, capsys)
    assert not any(m.startswith("sglang.") for m in set(sys.modules) - before)
