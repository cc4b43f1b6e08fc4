"""bench/plans/hostile_input.sh on the CPU: stub servers stand in for the mux (with its --api-key)
and for plain SGLang (which dies on an out-of-vocabulary token id, as SGLang 0.5.16 does), a
stand-in nvidia-smi for the GPU; the load, the fuzz and the auth probe are the real tools."""

import json
import os
import socket
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLAN = ROOT / "bench" / "plans" / "hostile_input.sh"
STUB = "exec python -m bench.stub_server --port $PORT --ttft-ms 1 --tbt-ms 0.2"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(tmp_path: Path, **kw) -> dict:
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    smi = bin_ / "nvidia-smi"  # no process on the GPU; its name for host.txt and summary.json
    smi.write_text("#!/bin/bash\n[[ \"$*\" == *compute-apps* ]] || echo 'NVIDIA H100 80GB HBM3, GPU-1'\n")
    smi.chmod(0o755)
    routes = tmp_path / "routes.json"
    routes.write_text(json.dumps([["POST", "/generate"], ["POST", "/v1/chat/completions"], ["POST", "/flush_cache"],
                                  ["GET", "/v1/models"], ["POST", "/abort_request"]]))
    return {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "PORT": str(_free_port()),
            "HOSTILE_KEY": "test-key", "MUX_CMD": STUB + " --api-key $KEY",
            "SGLANG_CMD": STUB + " --die-on-bad-ids 128256", "ROUTES": str(routes), "FUZZ_N": "300",
            "FUZZ_TIMEOUT_S": "2", "LOAD_RATE": "2", "LOAD_S": "3", **kw}


def _run_plan(tmp_path, out, *, budget_s, timeout):
    """Run the plan with the stand-ins into `out` and return its summary.json."""
    p = subprocess.run(["bash", str(PLAN), str(out), str(budget_s)], cwd=tmp_path, env=_env(tmp_path),
                       capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return json.loads((out / "summary.json").read_text())


def test_the_plan_serves_loads_fuzzes_probes_and_counts_plain_sglangs_death(tmp_path):
    out = tmp_path / "out"
    s = _run_plan(tmp_path, out, budget_s=600, timeout=180)
    assert s["device"] == "NVIDIA H100 80GB HBM3, GPU-1" and s["command"].endswith(f"{out} 600")
    assert [x["step"] for x in s["steps"]] == ["mux_start", "mux_load_and_fuzz", "auth_probe", "mux_stop",
                                               "sglang_start", "sglang_fuzz", "sglang_stop"]
    assert all(x["note"] == "rc=0" for x in s["steps"])
    mux, plain = s["systems"]["mux"], s["systems"]["sglang"]
    # the mux stand-in: alive through it all, the load all served with the key, auth as SGLang's
    assert mux["deaths"] == 0 and mux["server_at_stop"] == "alive" and mux["malformed_sent"] >= 300
    assert mux["load"]["sent"] == mux["load"]["completed"] > 0 and mux["fuzz_valid"]["completed"] == 30
    assert mux["valid_sent"] == mux["valid_completed"] and s["must_show"]["mux_every_valid_completed"]
    assert mux["auth_probe"]["served_without_key"] == 0 and mux["auth_probe"]["ok"]
    assert s["must_show"]["mux_0_deaths"] and s["must_show"]["mux_0_served_without_key"]
    assert not s["must_show"]["mux_0_5xx"]  # the stub answers a string max_new_tokens with a 500: counted
    # plain SGLang's stand-in died on a killer id: counted, and the fuzz stopped sending at once
    assert plain["deaths"] == 1 and plain["server_at_stop"] == "gone" and plain["unsent"] > 0
    assert plain["malformed_sent"] < 300 <= plain["malformed"] and "load" not in plain and "auth_probe" not in plain
    lines = (out / "mux_load.jsonl").read_text().splitlines()
    assert len(lines) == mux["load"]["sent"] and all(json.loads(x)["ok"] for x in lines)
    assert "test-key" not in json.dumps(s) and (out / "host.txt").read_text().startswith("NVIDIA H100")


def test_a_step_that_no_longer_fits_the_budget_is_skipped_and_said(tmp_path):
    out = tmp_path / "out"
    s = _run_plan(tmp_path, out, budget_s=100, timeout=60)
    notes = {x["step"]: x["note"] for x in s["steps"]}
    assert notes["mux_start"].startswith("skipped:") and notes["sglang_start"].startswith("skipped:")
    assert not s["systems"]["mux"]["ran"] and not any(s["must_show"].values())
