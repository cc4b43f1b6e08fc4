"""The device plans' shell helpers (bench/plans/) and the GPU scripts' server cleanup, on the CPU
with a stand-in nvidia-smi."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench import run

ROOT = Path(__file__).resolve().parent.parent
PLANS = sorted((ROOT / "bench" / "plans").glob("*.sh"))


@pytest.mark.parametrize("plan", PLANS, ids=lambda p: p.name)
def test_plans_parse(plan):
    assert subprocess.run(["bash", "-n", str(plan)], capture_output=True).returncode == 0


def _fake_bin(tmp_path: Path, apps: str) -> dict:
    """A PATH where nvidia-smi reports ``apps`` as the compute processes (and logs its arguments)
    and sleep returns at once."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "nvidia-smi").write_text(
        "#!/bin/bash\necho \"$*\" >> \"$SMI_LOG\"\n"
        f"if [[ \"$*\" == *compute-apps* ]]; then printf '{apps}'; else echo 'NVIDIA H200, GPU-1'; fi\n")
    (bin_ / "sleep").write_text("#!/bin/bash\nexit 0\n")
    for f in bin_.iterdir():
        f.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "SMI_LOG": str(tmp_path / "smi.log")}


def _one_host(tmp_path: Path, env: dict) -> subprocess.CompletedProcess:
    script = f"BUDGET=60; source {ROOT}/bench/plans/one_host.sh; one_host {tmp_path}/out && echo ready"
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env)


def test_one_host_refuses_a_gpu_another_process_holds(tmp_path):
    p = _one_host(tmp_path, _fake_bin(tmp_path, "2413, 112838 MiB\\n"))
    assert p.returncode == 2 and "ready" not in p.stdout
    assert "GPU busy" in p.stdout and "2413, 112838 MiB" in p.stdout


def test_one_host_asks_about_the_visible_gpu_only(tmp_path):
    env = {**_fake_bin(tmp_path, ""), "CUDA_VISIBLE_DEVICES": "1"}
    p = _one_host(tmp_path, env)
    assert p.returncode == 0 and "ready" in p.stdout
    calls = (tmp_path / "smi.log").read_text().splitlines()
    assert calls and all(c.endswith("-i 1") for c in calls)


def test_one_host_compares_a_tp_servers_gpus_as_one_set(tmp_path):
    """A call that serves on several GPUs (TP) records them on one line: resumed on the same ones it
    goes on; on another set it stops, where one GPU per line had refused every multi-GPU call."""
    env = {**_fake_bin(tmp_path, ""), "CUDA_VISIBLE_DEVICES": "0,1"}
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.write_text(smi.read_text().replace("echo 'NVIDIA H200, GPU-1'", "printf \"$GPUS\""))
    env["GPUS"] = "NVIDIA H100, GPU-a\\nNVIDIA H100, GPU-b\\n"
    assert "ready" in _one_host(tmp_path, env).stdout and "ready" in _one_host(tmp_path, env).stdout
    assert (tmp_path / "out" / "host.txt").read_text().splitlines() == ["NVIDIA H100, GPU-a;NVIDIA H100, GPU-b"] * 2
    env["GPUS"] = "NVIDIA H100, GPU-a\\nNVIDIA H100, GPU-c\\n"
    p = _one_host(tmp_path, env)
    assert p.returncode == 2 and "began on another GPU" in p.stdout


def test_run_names_the_visible_gpu_only(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert "-i" not in run.smi_command("uuid")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert run.smi_command("uuid")[-2:] == ["-i", "1"]


def test_sigterm_stops_a_scripts_servers():
    """A GPU script cut by ``timeout`` (SIGTERM) stops the server it started (its own session)."""
    code = f"""
import subprocess, sys, time
sys.path.insert(0, {str(ROOT / 'tests' / 'gpu')!r})
import serve_util
class Sleeper(serve_util.Server):
    def start(self, timeout_s=300):
        serve_util._stop_on_sigterm()
        self.proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
        print(self.proc.pid, flush=True)
s = Sleeper([], 1, "/dev/null")
try:
    s.start()
    time.sleep(60)
finally:
    s.stop()
"""
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    server = int(p.stdout.readline())
    p.send_signal(signal.SIGTERM)
    assert p.wait(20) == 143
    deadline = time.time() + 5
    while time.time() < deadline:
        try:
            os.kill(server, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(server, signal.SIGKILL)
    pytest.fail("the server outlived the script's SIGTERM")


def test_a_gpu_script_refuses_a_port_already_served(tmp_path):
    import socket

    sys.path.insert(0, str(ROOT / "tests" / "gpu"))
    import serve_util

    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        sk.listen(1)
        s = serve_util.Server([], sk.getsockname()[1], str(tmp_path / "log"))
        with pytest.raises(RuntimeError, match="already has a server listening"):
            s.start(5)
        assert s.proc is None


def test_a_request_to_a_server_that_never_answers_comes_back_as_a_timeout():
    """A hung server (it accepts, never answers) must not hang the GPU check that asked it: the
    request returns {"error": "timeout"} after its timeout."""
    import socket

    sys.path.insert(0, str(ROOT / "tests" / "gpu"))
    import serve_util

    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        sk.listen(1)
        t0 = time.time()
        r = serve_util.post(f"http://127.0.0.1:{sk.getsockname()[1]}/generate", {"text": "x"}, timeout=0.5)
        assert r == {"error": "timeout", "body": "no answer within 0.5 s"} and time.time() - t0 < 5


def test_muxoff_pairs_alternate_the_order_then_take_the_ratio(tmp_path):
    """one_host.sh's muxoff_pairs: PAIRS runs of bench.run, plain SGLang first in odd pairs, each
    given what is left of BUDGET less 20 s and the caller's arguments, a report each, then
    bench.analysis.muxoff_ratio over them; it stops when fewer than MIN_LEFT seconds remain."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python").write_text(f'#!/bin/bash\necho "$*" >> {tmp_path}/calls\n')
    (fake / "python").chmod(0o755)
    script = (f'source {ROOT}/bench/plans/one_host.sh; BUDGET=1000; '
              f'muxoff_pairs {tmp_path}/out 3 100 --workload sharegpt; BUDGET=50; muxoff_pairs {tmp_path}/o2 2 100')
    (tmp_path / "out" / "pair1").mkdir(parents=True)
    (tmp_path / "out" / "pair2").mkdir()
    (tmp_path / "out" / "pair3").mkdir()
    p = subprocess.run(["bash", "-c", script], env={**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"},
                       capture_output=True, text=True, timeout=60)
    calls = (tmp_path / "calls").read_text().splitlines()
    runs = [c for c in calls if c.startswith("-m bench.run")]
    assert [c.split("--systems ")[1].split()[0] for c in runs] == ["sglang,mux-off", "mux-off,sglang", "sglang,mux-off"]
    assert all(f"--out {tmp_path}/out/pair" in c and c.endswith("--workload sharegpt") for c in runs)
    assert 970 <= int(runs[0].split("--time-budget-s ")[1].split()[0]) <= 980
    assert sum(c.startswith("-m bench.report") for c in calls) == 3
    assert calls[-2:] == [f"-m bench.analysis.muxoff_ratio {tmp_path}/out", f"-m bench.analysis.muxoff_ratio {tmp_path}/o2"]
    assert "budget: stopping before pair 1" in p.stdout


def test_server_pattern_finds_the_server_and_not_a_shell_that_names_it(tmp_path):
    """SERVER_PAT and SERVER_TREE_PAT (one_host.sh) match the server's own command line, not a
    shell whose command names the server (a plan watching that shell for the server's exit would
    wait for good)."""
    pkg = tmp_path / "sglang_mux"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "launch_server.py").write_text("import time\ntime.sleep(30)\n")
    server = subprocess.Popen([sys.executable, "-m", "sglang_mux.launch_server", "--port", "1"], cwd=tmp_path)
    shell = subprocess.Popen(["bash", "-c", "sleep 30; : sglang_mux.launch_server sglang::"])
    try:
        time.sleep(0.5)
        script = f'source {ROOT}/bench/plans/one_host.sh; pgrep -f "$SERVER_PAT"; echo --; pgrep -f "$SERVER_TREE_PAT"'
        out = subprocess.run(["bash", "-c", script], capture_output=True, text=True).stdout.split("--")
        # pgrep sees the whole machine: tests running beside this one may start servers too
        for found in ({int(x) for x in o.split()} for o in out):
            assert server.pid in found and shell.pid not in found
    finally:
        for p in (server, shell):
            p.kill()
            p.wait()


def test_a_plan_finds_the_server_on_its_own_port_only(tmp_path):
    """server_pat_on (one_host.sh): with servers on ports 1 and 10 of one host (one cell per GPU),
    the pattern for port 1 matches that server alone, so reliability.sh stops and signals only its own."""
    pkg = tmp_path / "sglang_mux"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "launch_server.py").write_text("import time\ntime.sleep(30)\n")
    servers = [subprocess.Popen([sys.executable, "-m", "sglang_mux.launch_server", "--port", port, "--x"],
                                cwd=tmp_path) for port in ("1", "10")]
    last = subprocess.Popen([sys.executable, "-m", "sglang_mux.launch_server", "--port", "1"], cwd=tmp_path)
    try:
        time.sleep(0.5)
        script = f'source {ROOT}/bench/plans/one_host.sh; pgrep -f "$(server_pat_on 1)"'
        found = {int(x) for x in subprocess.run(["bash", "-c", script], capture_output=True, text=True).stdout.split()}
        assert {servers[0].pid, last.pid} <= found and servers[1].pid not in found  # others' servers may show too
        assert 'MY_PAT=$(server_pat_on "$PORT")' in (ROOT / "bench/plans/reliability.sh").read_text()
    finally:
        for p in (*servers, last):
            p.kill()
            p.wait()


def test_rechunk_bundle_makes_the_largest_chunks_a_call_carries_beside_the_tree(tmp_path):
    """bench/plans/rechunk_bundle.sh: the same bytes, chunks as large as LIMIT less the tree (in
    whole MiB, 1 MB spare), a checksum list install.sh accepts; a tree that leaves no room is refused."""
    import hashlib
    import shutil

    repo = tmp_path / "repo"
    (repo / "bench" / "plans").mkdir(parents=True)
    shutil.copy(ROOT / "bench" / "plans" / "rechunk_bundle.sh", repo / "bench" / "plans")
    (repo / "data.bin").write_bytes(b"t" * 3_000_000)  # the tracked tree: ~3 MB
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True)
    gpu = repo / ".gpu"
    gpu.mkdir()
    (repo / ".gitignore").write_text(".gpu/\n")
    blob = bytes(range(256)) * 40_000  # 10.24 MB of bundle in three old chunks
    for i, k in enumerate(range(0, len(blob), 4_000_000)):
        (gpu / f"c{i:02d}").write_bytes(blob[k:k + 4_000_000])
    for name in ("install.sh", "env.sh", "chunks.sha256"):
        (gpu / name).write_text("x\n")
    limit = 4_600_000 + 5 * 1048576  # the tree, 1 MB spare and 5.5 MiB: 5-MiB chunks
    p = subprocess.run(["bash", str(repo / "bench/plans/rechunk_bundle.sh"), str(limit)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    chunks = sorted(gpu.glob("c[0-9][0-9]"))
    assert [c.stat().st_size for c in chunks] == [5 * 1048576, len(blob) - 5 * 1048576]
    assert b"".join(c.read_bytes() for c in chunks) == blob
    listed = [line.split() for line in (gpu / "chunks.sha256").read_text().splitlines()]
    assert listed == [[hashlib.sha256(c.read_bytes()).hexdigest(), c.name] for c in chunks]
    p = subprocess.run(["bash", str(repo / "bench/plans/rechunk_bundle.sh"), "5000000"], capture_output=True, text=True)
    assert p.returncode == 1 and "prune bench/results" in p.stdout
    assert b"".join(c.read_bytes() for c in sorted(gpu.glob("c[0-9][0-9]"))) == blob  # untouched


def test_rechunk_bundle_lean_leaves_bench_results_out_of_the_tree_only_when_git_holds_them(tmp_path):
    """LEAN=1: chunks sized for the tree without bench/results (removed before the install calls);
    refused while bench/results has changes git does not hold, since removing it would lose them."""
    import shutil

    repo = tmp_path / "repo"
    (repo / "bench" / "plans").mkdir(parents=True)
    (repo / "bench" / "results").mkdir()
    shutil.copy(ROOT / "bench" / "plans" / "rechunk_bundle.sh", repo / "bench" / "plans")
    (repo / "data.bin").write_bytes(b"t" * 1_000_000)
    (repo / "bench" / "results" / "run.bin").write_bytes(b"r" * 3_000_000)
    (repo / ".gitignore").write_text(".gpu/\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "t"], check=True)
    gpu = repo / ".gpu"
    gpu.mkdir()
    blob = bytes(range(256)) * 40_000
    (gpu / "c00").write_bytes(blob)
    for name in ("install.sh", "env.sh", "chunks.sha256"):
        (gpu / name).write_text("x\n")
    limit = 2_100_000 + 8 * 1048576  # 1 MB of tree, 1 MB spare: 8-MiB chunks; with the results, 5 MiB
    env = {**os.environ, "LEAN": "1"}
    sh = str(repo / "bench/plans/rechunk_bundle.sh")
    p = subprocess.run(["bash", sh, str(limit)], capture_output=True, text=True, env=env)
    assert p.returncode == 0 and "rm -rf bench/results" in p.stdout, p.stdout + p.stderr
    assert [c.stat().st_size for c in sorted(gpu.glob("c[0-9][0-9]"))] == [8 * 1048576, len(blob) - 8 * 1048576]
    p = subprocess.run(["bash", sh, str(limit)], capture_output=True, text=True)
    assert p.returncode == 0 and "lean" not in p.stdout, p.stdout + p.stderr
    assert [c.stat().st_size for c in sorted(gpu.glob("c[0-9][0-9]"))] == [5 * 1048576, len(blob) - 5 * 1048576]
    (repo / "bench" / "results" / "new.json").write_text("{}")
    p = subprocess.run(["bash", sh, str(limit)], capture_output=True, text=True, env=env)
    assert p.returncode == 1 and "commit them" in p.stdout
    assert b"".join(c.read_bytes() for c in sorted(gpu.glob("c[0-9][0-9]"))) == blob  # untouched


def _soak_step(tmp_path, *args) -> tuple[subprocess.CompletedProcess, str | None]:
    """reliability.sh soak ARGS against no server: its output and the loop it wrote (stopped at once)."""
    rel = tmp_path / "rel"
    rel.mkdir(parents=True)
    (rel / "server.pid").write_text("1\n")
    env = {**os.environ, "REL_OUT": str(rel), "PORT": "59999"}
    p = subprocess.run(["bash", "bench/plans/reliability.sh", "soak", *map(str, args)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=60)
    if (rel / "soak.pid").exists():  # its own session once setsid has run: until then no group to kill
        pid = int((rel / "soak.pid").read_text())
        for _ in range(50):
            try:
                os.killpg(pid, signal.SIGKILL)
                break
            except ProcessLookupError:
                time.sleep(0.1)
    loop = (rel / "soak.sh").read_text() if (rel / "soak.sh").exists() else None
    return p, loop


def test_a_soak_given_an_end_cuts_its_arrivals_to_fit_the_tail_and_sigterm_before_it(tmp_path):
    """25 minutes asked, 600 s left to END: 450 s of arrivals (END less 150 s); no END: all 25
    minutes; too little left: refused, no soak started."""
    p, loop = _soak_step(tmp_path, 4.8, 25, int(time.time()) + 600)
    assert p.returncode == 0 and "do not fit" in p.stdout, p.stdout + p.stderr
    left = int(loop.splitlines()[0].split(";")[0].split("=")[1])
    assert 440 <= left <= 450 and "--piece-s $p" in loop
    p, loop = _soak_step(tmp_path / "b", 4.8, 25)
    assert p.returncode == 0 and loop.startswith("left=1500;")
    p, loop = _soak_step(tmp_path / "c", 4.8, 25, int(time.time()) + 200)
    assert p.returncode == 1 and "too little" in p.stdout and loop is None


def _lease_tree(tmp_path: Path, gpu: str) -> tuple[Path, dict]:
    """A copy of bench/plans in a scratch tree whose cells only log how they were called (each
    sweep and reliability.sh: its GPUs, port, systems, rates, arguments), on a host of four
    ``gpu`` (a stand-in nvidia-smi; taskset runs the command)."""
    tree = tmp_path / "t"
    (tree / ".gpu").mkdir(parents=True)
    (tree / ".gpu" / "env.sh").write_text("")
    plans = tree / "bench" / "plans"
    plans.mkdir(parents=True)
    for p in PLANS:
        (plans / p.name).write_text(p.read_text())
    for stub in ("fa3_conv8k_sweep.sh", "conv_uncapped_sweep.sh", "reliability.sh"):
        (plans / stub).write_text(
            f'#!/bin/bash\necho "{stub} gpus=$CUDA_VISIBLE_DEVICES port=$PORT sys=$SYSTEMS rates=$RATES '
            f'model=${{MODEL:-}} sa=${{EXTRA_SA:-}}${{SERVER_ARGS:-}} dur=${{DURATION_S:-}} k=${{TTFT_K:-}} args=$*" '
            '>> "$LEASE_OUT/calls"\n')
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "nvidia-smi").write_text(
        "#!/bin/bash\nif [[ \"$*\" == *-L* ]]; then for i in 0 1 2 3; do echo \"GPU $i: NVIDIA " + gpu
        + " (UUID: GPU-$i)\"; done; else echo 'NVIDIA " + gpu + ", GPU-0'; fi\n")
    (bin_ / "taskset").write_text("#!/bin/bash\nshift 2\nexec \"$@\"\n")
    (bin_ / "lscpu").write_text("#!/bin/bash\nexit 1\n")
    for f in bin_.iterdir():
        f.chmod(0o755)
    out = tmp_path / "res"
    return tree, {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "LEASE_OUT": str(out)}


def _calls(tree: Path, env: dict, plan: str, *args: str) -> list[str]:
    end = str(int(time.time()) + 1500)
    p = subprocess.run(["bash", str(tree / "bench" / "plans" / plan), end, *args], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    calls = Path(env["LEASE_OUT"]) / "calls"
    return sorted(calls.read_text().splitlines()) if calls.exists() else []


def test_the_70b_plan_runs_each_pair_of_an_h200_host_at_tp_2(tmp_path):
    """Capped: the sweep takes each system's rates as its argument; uncapped: conv_uncapped_sweep.sh
    reads them from RATES and takes only the seconds. Each pair serves on its own port."""
    tree, env = _lease_tree(tmp_path, "H200")
    capped = _calls(tree, env, "issue44_70b_x4.sh", "capped")
    assert len(capped) == 4 and all("model=llama-3.1-70b sa=--tp-size 2 dur=150 " in c for c in capped)
    assert {c.split()[1] + " " + c.split()[2] for c in capped} == {"gpus=0,1 port=31000", "gpus=2,3 port=33000"}
    # one system a pair on the same rates, then one point of the other on each pair
    rates = {(c.split()[1], c.split()[3]): c.split(" args=")[1].split()[1] for c in capped}
    assert rates == {("gpus=0,1", "sys=mux-hybrid"): "0.65,0.7,0.75,0.8", ("gpus=0,1", "sys=sglang-chunked-512"): "0.7",
                     ("gpus=2,3", "sys=sglang-chunked-512"): "0.65,0.7,0.75,0.8", ("gpus=2,3", "sys=mux-hybrid"): "0.7"}
    (Path(env["LEASE_OUT"]) / "calls").unlink()
    unc = _calls(tree, env, "issue44_70b_x4.sh", "uncapped")
    # under the TTFT rule scaled to the 70B, which the servers are told (their preemption decides on it)
    assert len(unc) == 2 and all(c.startswith("conv_uncapped_sweep.sh") and " dur=600 k=0.8 " in c for c in unc)
    # the two points that would show the simulator's lead: the hybrid above a rate chunked 512 fails
    assert {(c.split()[1], c.split()[3], c.split()[4]) for c in unc} == {
        ("gpus=0,1", "sys=mux-hybrid", "rates=0.125"), ("gpus=2,3", "sys=sglang-chunked-512", "rates=0.09")}
    for c in unc:
        args = c.split(" args=")[1].split()  # OUT and the seconds: no rates among the arguments
        assert len(args) == 2 and args[0].endswith(("/unc70", "/unc70_b")) and args[1].isdigit(), c


def test_on_an_h200_pair_the_2_gpu_plan_runs_the_tp_soak(tmp_path):
    """The 70B's capped cell is measured; an H200 pair now serves the 20-minute run at the TP
    goodput: serve, soak, preempt, wait, end, on both GPUs."""
    tree, env = _lease_tree(tmp_path, "H200")
    _calls(tree, env, "issue44_x2.sh")
    lines = (Path(env["LEASE_OUT"]) / "calls").read_text().splitlines()
    assert [c.split(" args=")[1].split()[0] for c in lines] == ["serve", "soak", "preempt", "wait", "end"]
    assert all(c.startswith("reliability.sh gpus=0,1 port=32000") and "sa=--tp-size 2" in c for c in lines)
    assert "args=soak 7.75 20" in lines[1]


def test_the_tp_soak_plan_serves_soaks_preempts_and_ends_in_that_order(tmp_path):
    tree, env = _lease_tree(tmp_path, "H200")
    _calls(tree, env, "issue44_x4.sh")
    lines = (Path(env["LEASE_OUT"]) / "calls").read_text().splitlines()
    soak = [c for c in lines if c.startswith("reliability.sh")]
    assert [c.split(" args=")[1].split()[0] for c in soak] == ["serve", "soak", "preempt", "wait", "end"]
    assert all("gpus=0,1 port=32000" in c and "sa=--tp-size 2" in c for c in soak)
    assert "args=soak 7.75 20" in soak[1] and "args=end 7.75 60" in soak[4]
    unc = [c for c in lines if c.startswith("conv_uncapped_sweep.sh")]
    assert len(unc) == 1 and "gpus=2,3" in unc[0] and "sys=mux-hybrid rates=0.125" in unc[0] and " dur=600 k=0.8 " in unc[0]


def test_on_h100s_the_4_gpu_issue_44_plan_serves_the_70b_at_tp_4(tmp_path):
    tree, env = _lease_tree(tmp_path, "H100 80GB HBM3")
    calls = _calls(tree, env, "issue44_x4.sh")
    assert len(calls) == 1 and "gpus=0,1,2,3" in calls[0] and "sa=--tp-size 4" in calls[0]
    assert "sys=mux-hybrid sglang-chunked-512 sglang-chunked-1024" in calls[0]


@pytest.mark.parametrize("workload,k,want", [
    ("conversation", None, "--ttft-slo-ms 2000 --ttft-slo-ms-per-token 0.2 --mux-ttft-ms-per-token 0.2"),
    ("loogle", "0.8", "--ttft-slo-ms 2000 --ttft-slo-ms-per-token 0.8 --mux-ttft-ms-per-token 0.8"),
    ("mooncake-synthetic", "0.8", "--ttft-slo-ms 10000 --seed")])
def test_the_uncapped_sweep_judges_and_tells_the_mux_the_length_aware_rule(tmp_path, workload, k, want):
    """On the conversation and loogle the check's TTFT SLO is 2 s + TTFT_K ms a prompt token, and the
    mux servers are told the same (their preemption decides on each prompt's own deadline);
    another workload keeps 10 s flat."""
    plans = tmp_path / "bench" / "plans"
    plans.mkdir(parents=True)
    (plans / "conv_uncapped_sweep.sh").write_text((ROOT / "bench" / "plans" / "conv_uncapped_sweep.sh").read_text())
    (plans / "one_host.sh").write_text("left() { echo 10000; }\none_host() { :; }\n")
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "python").write_text('#!/bin/bash\necho "$*" >> "$PY_LOG"\n')
    (bin_ / "python").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "PY_LOG": str(tmp_path / "py.log"),
           "WORKLOAD": workload, "SYSTEMS": "mux-hybrid"}
    if k:
        env["TTFT_K"] = k
    p = subprocess.run(["bash", str(plans / "conv_uncapped_sweep.sh"), str(tmp_path / "out")], env=env,
                       capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    run = next(l for l in (tmp_path / "py.log").read_text().splitlines() if l.startswith("-m bench.run "))
    assert want in run
