"""Every sglang_mux CLI answers a bad argument or input file with one ``error:`` line on stderr
and exit status 2, never a traceback; ``--table`` takes a shipped table's name from any cwd.

The mains run in-process through ``cli.run`` (as ``python -m`` does); only the closed pipe of
``launch_server --help | head`` needs a subprocess."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sglang_mux.estimator.command import main as estimator_main
from sglang_mux import cli, dispatch, estimator, mux_args, sim, sim_chunked

ROOT = Path(__file__).resolve().parents[1]
TABLE = "llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3"  # shipped; 16..112 decode SMs
SIM = ["--table", TABLE, "--limit", "5", "--rate", "1"]
PLAN = ["plan", "--table", TABLE, "--decode-bs", "8", "--prefill-new", "1024"]


@pytest.fixture(autouse=True)
def elsewhere(tmp_path, monkeypatch):
    """Run every case from outside the checkout: a table's name must still resolve."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def fails(main, argv, capsys, *want):
    """Run ``main`` as its ``python -m`` does; the one stderr line it printed (status 2)."""
    with pytest.raises(SystemExit) as e:
        cli.run(main, argv)
    err = capsys.readouterr().err
    assert e.value.code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    for w in want:
        assert w in err, err
    return err


def trace(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("main, base", [(sim.main, SIM), (dispatch.main, PLAN)], ids=["sim", "dispatch-plan"])
@pytest.mark.parametrize("value", ["-5", "0"])
def test_slo_must_be_positive(main, base, value, capsys):
    fails(main, [*base, "--tbt-slo-ms", value], capsys, "--tbt-slo-ms", "must be > 0")
    fails(main, [*base, "--ttft-slo-ms", value], capsys, "--ttft-slo-ms", "must be > 0")


def test_sim_rate_zero(capsys):
    fails(sim.main, ["--table", TABLE, "--rate", "0"], capsys, "--rate", "must be > 0")


def test_sim_input_cap_negative(capsys):
    # Not silently a 100 % SLO point any more.
    fails(sim.main, [*SIM, "--input-cap", "-1"], capsys, "--input-cap", "must be > 0")
    fails(sim_chunked.main, [*SIM, "--input-cap", "-1"], capsys, "--input-cap")


@pytest.mark.parametrize("content, want", [
    ("", "no requests"),
    ("\n\n", "no requests"),
    ("not json\n", "line 1 is not JSON"),
    ('{"timestamp": 0, "input_length": 10, "output_length": 2}\n[1, 2]\n', "line 2 is not a JSON object"),
    ('{"input_length": 10, "output_length": 2, "hash_ids": [1]}\n', "line 1 lacks timestamp"),
    ('{"timestamp": "x", "input_length": 10, "output_length": 2}\n', "timestamp must be a number"),
    ('{"timestamp": 0, "input_length": 0, "output_length": 2}\n', "input_length must be >= 1"),
])
def test_sim_bad_trace_file(content, want, elsewhere, capsys):
    f = trace(elsewhere / "t.jsonl", content)
    fails(sim.main, [*SIM, "--trace", f], capsys, f, want)
    fails(sim_chunked.main, [*SIM, "--trace", f], capsys, want)


def test_sim_missing_trace(elsewhere, capsys):
    fails(sim.main, [*SIM, "--trace", str(elsewhere / "none.jsonl")], capsys, "--trace", "none.jsonl",
          "bundled: conversation, synthetic")


@pytest.mark.parametrize("main, base", [(sim.main, SIM), (dispatch.main, PLAN)], ids=["sim", "dispatch-plan"])
def test_bad_policy(main, base, capsys):
    fails(main, [*base, "--policy", "bogus"], capsys, "'bogus' is not a policy", "dispatcher, batch-size")
    fails(main, [*base, "--policy", "fixed:999"], capsys, "999 SMs is not a decode partition",
          "16, 32, 48, 64, 80, 96, 112")


def test_sim_bad_policy_in_a_list(capsys):
    fails(sim.main, [*SIM, "--policy", "dispatcher,fixed:40"], capsys, "fixed:40", "16, 32, 48")


@pytest.mark.parametrize("flag, value", [("--decode-bs", "-3"), ("--prefill-new", "-100"),
                                         ("--decode-reused", "-1"), ("--prefill-age-ms", "-2")])
def test_dispatch_plan_negative_counts(flag, value, capsys):
    fails(dispatch.main, [*PLAN, flag, value], capsys, flag, "must be >= 0")


def test_dispatch_plan_layers_beyond_the_model(capsys):
    fails(dispatch.main, [*PLAN, "--prefill-layers-done", "32"], capsys, "the model has 32 layers")


def test_estimator_check_missing_dir(elsewhere, capsys):
    fails(estimator_main, ["check", str(elsewhere / "no_such_table")], capsys, "no such table directory",
          "shipped tables:", TABLE)


def test_estimator_predict_bad_numbers(capsys):
    base = ["predict", TABLE, "--prefill-new", "1024", "--decode-bs", "8"]
    fails(estimator_main, [*base, "--decode-sms", "0"], capsys, "--decode-sms", "must be > 0")
    fails(estimator_main, [*base, "--decode-sms", "64", "--prefill-reused", "-1"], capsys, "--prefill-reused")


def test_mux_args_cli_bad_flag(capsys):
    fails(mux_args.main, ["--bogus"], capsys, "unrecognized arguments: --bogus")


def test_launch_server_bad_mux_args_without_sglang(capsys):
    from sglang_mux import launch_server

    fails(launch_server._run, ["--mux-tbt-slo-ms", "-5"], capsys, "--mux-tbt-slo-ms must be a finite number of ms > 0")
    fails(launch_server._run, ["--mux-tbt-slo-ms", "x"], capsys, "--mux-tbt-slo-ms", "invalid float value")
    fails(launch_server._run, ["--mux-policy", "magic"], capsys, "--mux-policy", "invalid choice")


def test_launch_server_help_into_a_closed_pipe():
    p = subprocess.run(f"{sys.executable} -m sglang_mux.launch_server --help | head -3", shell=True,
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.stdout.startswith("usage: python -m sglang_mux.launch_server")
    assert "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr, p.stderr


# ---- the same commands, right: a shipped table's name from another cwd ----------------------

def test_table_by_name_from_another_cwd(capsys):
    with pytest.raises(SystemExit) as e:
        cli.run(sim.main, [*SIM, "--json"])
    assert e.value.code == 0 and json.loads(capsys.readouterr().out)["setup"]["requests"] == 5
    with pytest.raises(SystemExit) as e:  # the server's default policy, the hybrid: a short prompt fused
        cli.run(dispatch.main, PLAN)
    assert e.value.code == 0 and json.loads(capsys.readouterr().out)["kind"] == "fused"
    with pytest.raises(SystemExit) as e:
        cli.run(dispatch.main, [*PLAN, "--policy", "dispatcher"])
    assert e.value.code == 0 and json.loads(capsys.readouterr().out)["decode_sms"] in range(16, 113, 16)
    with pytest.raises(SystemExit) as e:
        cli.run(estimator_main, ["predict", TABLE, "--prefill-new", "1024", "--decode-bs", "8",
                                 "--decode-sms", "64"])
    assert e.value.code == 0 and json.loads(capsys.readouterr().out)["prefill_sms"] == 68


def test_help_shows_defaults(capsys):
    with pytest.raises(SystemExit) as e:
        cli.run(sim.main, ["--help"])
    assert e.value.code == 0 and "(default: 50.0)" in capsys.readouterr().out


@pytest.mark.parametrize("bad", ["15", "a,b", "-1,0.8", "15,0"])
def test_sim_fused_price_needs_fixed_and_slope(bad, capsys):
    fails(sim.main, [*SIM, "--policy", "hybrid", "--fused-price", bad], capsys, "--fused-price")
