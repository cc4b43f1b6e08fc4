"""A comparison is fair only on one attention backend: bench.run passes it, records it, says so."""
import argparse
import json
import lzma
import shutil
from pathlib import Path

import pytest

from bench import report, run, systems

SGLANG_KINDS = ["mux", "mux-fixed-48", "mux-nopreempt", "mux-off", "sglang", "sglang-chunked-512",
                "sglang-chunked-2048-nomix", "sglang-pdmux"]
RUN = Path(__file__).resolve().parents[1] / "tests/data/conv8k_fa3_h100"


@pytest.mark.parametrize("system", SGLANG_KINDS)
def test_every_sglang_system_gets_the_backend(system):
    cmd = systems.server_command(system, "m", 1, attention_backend="fa3", extra_args=["--x", "1"])
    assert systems.flag_value(cmd, "--attention-backend") == "fa3"
    assert systems.server_command(system, "m", 1, extra_args=["--x", "1"]).count("--attention-backend") == 0


def test_stub_gets_no_backend():
    assert "--attention-backend" not in systems.server_command("stub", "m", 1, attention_backend="fa3")


def test_flag_value_takes_the_last_of_both_forms():
    assert systems.flag_value(["--attention-backend", "triton", "--attention-backend=fa3"], "--attention-backend") == "fa3"
    assert systems.flag_value(["--attention-backend"], "--attention-backend") is None


def test_backend_read_from_the_command_or_the_log(tmp_path):
    log = tmp_path / "sglang.log"
    assert systems.attention_backend_of(["--attention-backend", "triton"], log) == "triton"
    assert systems.attention_backend_of([], log) is None  # no log
    log.write_text("[2026-11-23] Attention backend not specified. Use fa3 backend by default.\n")
    assert systems.attention_backend_of([], log) == "fa3"
    log.unlink()
    (tmp_path / "sglang.log.xz").write_bytes(lzma.compress(b"x\nAttention backend not specified. "
                                                             b"Use flashinfer backend by default.\n"))
    assert systems.attention_backend_of([], log) == "flashinfer"


def test_conflicting_backends_are_refused():
    with pytest.raises(SystemExit):
        run.parse_args(["--systems", "stub", "--rates", "1", "--out", "x", "--attention-backend", "fa3",
                        "--server-args=--attention-backend triton"])
    a = run.parse_args(["--systems", "stub", "--rates", "1", "--out", "x", "--attention-backend", "fa3",
                        "--server-args=--attention-backend=fa3"])
    assert a.attention_backend == "fa3"


def _summary(out):
    a = argparse.Namespace(tbt_slo_ms=50.0, ttft_slo_ms=5000.0, workload="conversation",
                           mux_ttft_slo_ms=5000.0, mux_ttft_ms_per_token=None)
    return run.build_summary(out, a, {})


def test_the_fa3_run_is_recorded_as_fair_and_a_mixed_one_is_not(tmp_path):
    out = tmp_path / "run"
    shutil.copytree(RUN, out)
    s = _summary(out)
    assert s["attention_backend"] == "fa3" and "unfair" not in s
    assert all(v["attention_backend"] == "fa3" for v in s["systems"].values())
    assert "Attention backend: fa3 (every system)." in report.render(s)
    start = json.loads((out / "sglang__start.json").read_text())
    start["command"] = [x.replace("fa3", "triton") for x in start["command"]]
    (out / "sglang__start.json").write_text(json.dumps(start))
    s = _summary(out)
    assert s["attention_backend"] == ["fa3", "triton"]
    assert "sglang triton" in s["unfair"] and "Not a fair comparison" in report.render(s)


def test_the_report_names_the_host_a_run_measured_on(tmp_path):
    out = tmp_path / "run"
    shutil.copytree(RUN, out)
    s = _summary(out)
    s["device"] = "NVIDIA H100 80GB HBM3"
    s["hardware"] = {"gpu_uuids": ["GPU-ab0c3517"], "cpu_model": "AMD EPYC 9454", "cpus": 16}
    assert "Device: NVIDIA H100 80GB HBM3 (GPU-ab0c3517; AMD EPYC 9454 x 16)." in report.render(s)
    s["hardware"] = None  # summaries from before the hardware was recorded
    assert "Device: NVIDIA H100 80GB HBM3. Date" in report.render(s)
