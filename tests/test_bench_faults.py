"""bench.faults: every fault against the stub server, its outcome counted exactly."""
import json
import urllib.request

import pytest

from bench import faults as F
from bench import stub_server
from sglang_mux.cli import UsageError


@pytest.fixture(scope="module")
def stub():
    with stub_server.in_thread(stub_server.StubConfig(ttft_s=0.3, tbt_s=0.002, preempt_tokens=100)) as url:
        yield url


def test_every_fault_is_counted(stub):
    """The stub takes 300 ms to a first token (the disconnects before it land in 'prefill'),
    ends an aborted stream with finish_reason abort, and accepts any prompt length (so the
    context checks report what it did, not a 4xx). It counts a preemption when a short prompt
    arrives during a prompt of >= 100 tokens' prefill, as the mux's /metrics would."""
    r = F.run_faults(stub, repeat=3, workers=3, context_len=256, long_tokens=64, kv_burst=4, timeout_s=30,
                     preempt_tokens=128)
    c = r["counts"]
    assert set(c) == set(F.FAULTS) and all(sum(v.values()) == 3 for v in c.values())
    assert c["disconnect_prefill"] == {"closed-before-first-token": 3}
    assert c["disconnect_decode"] == {"closed-in-decode": 3}
    assert c["disconnect_preempted"] == {"closed after a preemption; shorts served": 3}
    assert r["preemptions"] >= 3
    assert c["abort_running"] == {"ended:abort": 3}
    assert c["prompt_past_context"] == {"status-200": 3}  # the stub has no context: not a 4xx
    assert c["max_new_tokens_past_context"] == {"ran-past-context": 3}
    assert c["kv_exhaustion"] == {"completed 4, errored 0": 3}
    after = F.settle(stub, wait_s=1)
    assert after["healthy"] and after["valid_request_ok"]


def test_a_preemption_that_never_comes_is_said():
    """A server whose long prompt ends its prefill before any preemption: the fault still
    closes it and serves the shorts, and says that it saw none (not a disconnect 'during' one)."""
    with stub_server.in_thread(stub_server.StubConfig(ttft_s=0.05, tbt_s=0.002)) as url:
        r = F.run_faults(url, repeat=1, workers=1, faults=("disconnect_preempted",), preempt_tokens=128,
                         preempt_wait_s=0.5, timeout_s=30)
    assert r["counts"] == {"disconnect_preempted": {"closed, no preemption seen; shorts served": 1}}
    assert r["preemptions"] == 0


def test_short_prompts_keep_coming_until_the_long_prefill_runs():
    """Under load the long prompt queues before its prefill starts: a short prompt sent with it
    is served first and preempts nothing; the ones that follow meet the prefill."""
    cfg = stub_server.StubConfig(ttft_s=2.0, tbt_s=0.002, preempt_tokens=100, long_queue_s=0.6)
    with stub_server.in_thread(cfg) as url:
        r = F.run_faults(url, repeat=1, workers=1, faults=("disconnect_preempted",), preempt_tokens=128,
                         preempt_wait_s=1.5, timeout_s=30)
    assert r["counts"] == {"disconnect_preempted": {"closed after a preemption; shorts served": 1}}
    assert r["preemptions"] == 1


def test_long_prompts_of_the_preemption_fault_never_overlap():
    """A server-wide counter says whether a preemption came: with two long prompts in flight one
    preemption would be credited to both. With three workers the stub still never holds two,
    while the other faults run beside them."""
    with stub_server.in_thread(stub_server.StubConfig(ttft_s=0.3, tbt_s=0.002, preempt_tokens=100)) as url:
        r = F.run_faults(url, repeat=3, workers=3, faults=("disconnect_preempted", "disconnect_decode"),
                         preempt_tokens=128, preempt_wait_s=2.0, timeout_s=30)
        page = urllib.request.urlopen(url + "/metrics", timeout=5).read().decode()
    assert "stub_long_prompts_open_max 1\n" in page
    assert r["counts"] == {"disconnect_preempted": {"closed after a preemption; shorts served": 3},
                           "disconnect_decode": {"closed-in-decode": 3}}


def test_an_unreachable_server_is_a_client_error_not_a_crash():
    r = F.run_faults("http://127.0.0.1:9", repeat=1, workers=1, faults=("disconnect_decode", "prompt_past_context"))
    assert r["counts"] == {"disconnect_decode": {"client-error:ConnectionRefusedError": 1},
                           "prompt_past_context": {"status-None": 1}}


def test_cli_checks_its_input():
    with pytest.raises(SystemExit):
        F.main(["--faults", "unplug_the_gpu"])
    with pytest.raises(UsageError, match="no server answers"):
        F.main(["--server-url", "http://127.0.0.1:9"])


def test_under_a_load_it_does_not_own_only_health_is_checked(stub, tmp_path, capsys):
    """With --external-load (a soak's backlog still running) the idle check is skipped and says
    so; without it the command waits for running + queued to reach 0 (the stub's: at once)."""
    out = tmp_path / "f.json"
    F.main(["--server-url", stub, "--faults", "prompt_past_context", "--repeat", "2", "--rate", "0",
            "--context-len", "64", "--external-load", "--out", str(out)])
    r = json.loads(out.read_text())
    assert r["after"] == {"healthy": True, "idle_check": "skipped: --external-load"}
    assert r["counts"] == {"prompt_past_context": {"status-200": 2}}
    F.main(["--server-url", stub, "--faults", "prompt_past_context", "--repeat", "1", "--rate", "0",
            "--context-len", "64", "--out", str(out)])
    after = json.loads(out.read_text())["after"]
    assert after["healthy"] and after["valid_request_ok"] and "idle_check" not in after
    assert json.loads(out.read_text())["partial"] is False
    capsys.readouterr()


def test_a_run_cut_short_keeps_what_it_counted(stub, tmp_path, monkeypatch, capsys):
    """Session 19 lost 20 preemption disconnects to a time limit that struck before the one write
    at the end: now each outcome is in the file as it comes."""
    seen = []
    r = F.run_faults(stub, repeat=2, workers=2, faults=("disconnect_decode", "prompt_past_context"),
                     context_len=64, on_outcome=lambda c, s: seen.append(sum(sum(v.values()) for v in c.values())))
    assert seen == [1, 2, 3, 4] and r["counts"]["disconnect_decode"] == {"closed-in-decode": 2}

    def killed(*_a, **_k):
        raise KeyboardInterrupt  # what the settle step would meet if the command were stopped there
    monkeypatch.setattr(F, "settle", killed)
    out = tmp_path / "f.json"
    with pytest.raises(KeyboardInterrupt):
        F.main(["--server-url", stub, "--faults", "prompt_past_context", "--repeat", "3", "--rate", "0",
                "--context-len", "64", "--out", str(out)])
    r = json.loads(out.read_text())
    assert r["partial"] is True and r["counts"] == {"prompt_past_context": {"status-200": 3}}
    assert "3 of 3 outcomes" in capsys.readouterr().err


def _fake_tp_server(tmp_path):
    """A 'server' process with two children titled as SGLang titles its TP schedulers (ranks 1 and
    10), which exits, as SGLang's subprocess watchdog makes it, once a child dies."""
    import subprocess
    import sys

    code = """
import subprocess, sys, time
kids = [subprocess.Popen(["bash", "-c", f'exec -a "sglang::scheduler_TP{r}" sleep 60']) for r in (10, 1)]
# Popen returns at the fork; the title is argv[0] only once bash has exec'd. bash's own command line
# names it too (in its -c string), and mid-exec the cmdline reads empty: CI raced both.
while not all(open(f"/proc/{k.pid}/cmdline", "rb").read().startswith(b"sglang::scheduler_TP") for k in kids):
    time.sleep(0.01)
print(" ".join(str(k.pid) for k in kids), flush=True)
while all(k.poll() is None for k in kids):
    time.sleep(0.05)
for k in kids:
    k.kill()
"""
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    tp10, tp1 = (int(x) for x in p.stdout.readline().split())
    return p, tp1, tp10


def test_a_killed_rank_ends_the_server_and_every_request(stub, tmp_path):
    """SIGKILL goes to rank 1's scheduler (not rank 10's), the server exits, and every in-flight
    request ends (the stub keeps serving them, so they complete)."""
    p, tp1, tp10 = _fake_tp_server(tmp_path)
    assert F.scheduler_of_rank(p.pid, 1) == tp1 and F.scheduler_of_rank(p.pid, 10) == tp10
    assert F.scheduler_of_rank(p.pid, 2) is None
    r = F.rank_kill(stub, p.pid, 1, inflight=2, exit_bound_s=10)
    p.wait(5)
    assert r["killed_pid"] == tp1 and r["exited"] and r["exit_s"] < 10
    assert r["outcomes"] == {"completed": 2}


def test_kill_rank_checks_its_input(stub):
    with pytest.raises(SystemExit):
        F.main(["--server-url", stub, "--kill-rank", "1"])  # no --server-pid
    with pytest.raises(UsageError, match="no process titled scheduler_TP3"):
        F.rank_kill(stub, 1, 3, inflight=1)
