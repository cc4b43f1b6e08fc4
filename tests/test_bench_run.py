"""bench.run: resumable sweeps with the stub as the system, failed starts, budget, reports."""
import json
import socket
import sys

import numpy as np
import pytest

from bench import plots, report, run, stub_server, systems


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def args(out, rates, *extra):
    return ["--systems", "stub", "--workload", "sharegpt", "--rates", rates, "--duration-s", "1",
            "--out", str(out), "--port", str(free_port()), "--drain-s", "10", "--no-progress",
            "--warmup", "1", "--output-cap", "8", "--server-args", "--ttft-ms 10 --tbt-ms 5",
            "--client-procs", "1", *extra]


def test_resumable_sweep_with_stub_system(tmp_path, capsys):
    assert run.main(args(tmp_path, "2,4")) == 0
    files = {p.name: p.stat().st_mtime_ns for p in tmp_path.glob("stub__*.jsonl")}
    assert set(files) == {"stub__2.jsonl", "stub__4.jsonl"}
    recs = [json.loads(x) for x in (tmp_path / "stub__4.jsonl").read_text().splitlines()]
    assert len(recs) == 4 and all(r["ok"] for r in recs)
    meta = json.loads((tmp_path / "stub__4.meta.json").read_text())
    assert meta["flushed_cache"] and meta["workload"]["salt"] == "rate=4"
    if run.cpu_ticks() is not None:  # a Linux host: what its CPUs did over the point
        assert 0 <= meta["host_cpu"]["busy_share"] <= 1 and meta["host_cpu"]["steal_ms"] >= 0
        # and each process: the stub is its session's root, the client worked
        assert set(meta["proc_cpu"]) >= {"http+tokenizer", "client"} and meta["proc_cpu"]["client"] >= 0
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["systems"]["stub"]["goodput_rps"] == 4.0 and s["slo"]["tbt_ms"] == 50.0
    assert s["workload"]["workload"] == "sharegpt" and s["workload"]["output_cap"] == 8
    assert "bench.run" in s["command"] and s["systems"]["stub"]["start"]["ok"]
    cap = capsys.readouterr()
    assert "| stub | ≥ 4 |" in cap.out  # passed every rate it ran: a lower bound
    if run.cpu_ticks() is not None:  # the log says how busy the server's front process was
        assert "server's HTTP + tokenizer process" in cap.out + cap.err
    # resume: the existing points are skipped, only the new rate runs; summary merges all
    assert run.main(args(tmp_path, "2,4,8")) == 0
    assert all((tmp_path / n).stat().st_mtime_ns == t for n, t in files.items())
    s = json.loads((tmp_path / "summary.json").read_text())
    assert [p["rate"] for p in s["systems"]["stub"]["points"]] == [2.0, 4.0, 8.0]
    assert s["systems"]["stub"]["goodput_rps"] == 8.0 and not s["not_run"]
    assert "stub" in report.render(s)
    made = plots.plot_run(tmp_path)
    assert (tmp_path / "latency_vs_rate.png") in made


def test_failed_start_is_a_result(tmp_path, monkeypatch):
    real = systems.server_command

    def fake(system, *a, **k):           # upstream --enable-pdmux dies at start
        if system == "sglang-pdmux":
            return [sys.executable, "-c", "import sys; print('pdmux boom'); sys.exit(3)"]
        return real(system, *a, **k)
    monkeypatch.setattr(run.systems, "server_command", fake)
    argv = args(tmp_path, "2")
    argv[1] = "sglang-pdmux,stub"
    assert run.main(argv) == 0
    start = json.loads((tmp_path / "sglang-pdmux__start.json").read_text())
    assert start["ok"] is False and "exited with code 3" in start["reason"]
    assert "pdmux boom" in start["log_tail"]
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["systems"]["sglang-pdmux"]["goodput_rps"] is None
    assert s["systems"]["stub"]["goodput_rps"] == 2.0                 # the sweep went on
    assert "start failed: exited with code 3" in report.render(s)
    assert run.main(argv) == 0                                        # not retried by default
    assert not (tmp_path / "sglang-pdmux__2.jsonl").exists()


def test_time_budget_never_starts_what_does_not_fit(tmp_path):
    assert run.main(args(tmp_path, "2,4", "--time-budget-s", "30")) == 0   # start est. 120 s
    assert not list(tmp_path.glob("*.jsonl"))
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["budget_stopped"] and s["not_run"] == ["stub@2", "stub@4"]


def test_rates_above_a_failure_are_not_reported_as_not_run(tmp_path, capsys):
    # the stub's 5 ms token gaps fail a 1 ms TBT SLO at the first rate; stopping there is the rule
    assert run.main(args(tmp_path, "2,4", "--tbt-slo-ms", "1")) == 0
    assert not (tmp_path / "stub__4.jsonl").exists()
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["systems"]["stub"]["goodput_rps"] is None and s["not_run"] == []
    assert "not run" not in report.render(s).lower()


def test_server_url_mode(tmp_path):
    with stub_server.in_thread(stub_server.StubConfig(ttft_s=0.0, tbt_s=0.002)) as url:
        argv = args(tmp_path, "3", "--server-url", url)
        argv[1] = "external"
        assert run.main(argv) == 0
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["systems"]["external"]["goodput_rps"] == 3.0
    assert not list(tmp_path.glob("*.log"))


def test_system_commands():
    m = "/models/llama"
    cmd = systems.server_command("mux", m, 30001, tbt_slo_ms=50, ttft_slo_ms=5000,
                                 timeline="/tmp/t.jsonl")
    assert cmd[1:3] == ["-m", "sglang_mux.launch_server"]
    joined = " ".join(cmd)
    for part in ("--model-path /models/llama", "--load-format dummy", "--tokenizer-path /models/llama",
                 "--port 30001", "--host 127.0.0.1", "--mem-fraction-static",
                 "--mux-policy dispatcher", "--mux-tbt-slo-ms 50", "--mux-timeline /tmp/t.jsonl",
                 "--skip-tokenizer-init"):
        assert part in joined
    tok = systems.server_command("sglang", m, 1, tokenizer_path="/tok")
    assert "--tokenizer-path /tok" in " ".join(tok) and "--skip-tokenizer-init" not in tok
    assert "--mux-policy fixed --mux-fixed-decode-sms 48" in " ".join(
        systems.server_command("mux-fixed-48", m, 1))
    sg = systems.server_command("sglang-chunked-512", m, 1, extra_args=["--foo", "1"])
    assert sg[1:3] == ["-m", "sglang.launch_server"] and sg[-2:] == ["--foo", "1"]
    assert "--chunked-prefill-size 512 --enable-mixed-chunk" in " ".join(sg)
    nm = " ".join(systems.server_command("sglang-chunked-2048-nomix", m, 1))
    assert "--chunked-prefill-size 2048" in nm and "--enable-mixed-chunk" not in nm
    assert systems.kind("sglang-chunked-2048-nomix") == "sglang"
    assert "--enable-pdmux" in systems.server_command("sglang-pdmux", m, 1)
    assert "--chunked-prefill-size" not in " ".join(systems.server_command("sglang", m, 1))
    assert systems.expand("all")[0] == "mux" and "sglang-chunked-2048" in systems.expand("all")
    assert "sglang-chunked-512-nomix" in systems.expand("all") and len(systems.expand("sglang-chunked-*")) == 8
    with pytest.raises(ValueError):
        systems.expand("vllm")


def test_timeline_plot(tmp_path):
    tl = tmp_path / "mux.timeline.jsonl"
    # "time" is the key sglang_mux.mux_metrics.TimelineWriter writes ("t" works too)
    tl.write_text("".join(json.dumps({"time": 100 + i * 0.5, "decode_sms": 16 * (1 + i % 4),
                                      "prefill_sms": 132 - 16 * (1 + i % 4), "decode_bs": i})
                          + "\n" for i in range(20)))
    out = plots.plot_timeline(tl, tmp_path / "tl.png")
    assert out.exists() and out.stat().st_size > 1000
    assert (tmp_path / "mux.timeline.png") in plots.plot_run(tmp_path)


def test_summary_rebuilt_without_a_gpu_keeps_the_measured_device(tmp_path, monkeypatch):
    """Merging pieces on a host with no GPU must not erase which GPU the points ran on."""
    assert run.main(args(tmp_path, "2")) == 0
    s = json.loads((tmp_path / "summary.json").read_text())
    s["device"], s["host"], s["hardware"] = "NVIDIA H200", "gpu-host", {"gpu_uuids": ["GPU-1"]}
    (tmp_path / "summary.json").write_text(json.dumps(s))
    monkeypatch.setattr(run, "device_name", lambda: None)
    assert run.main(args(tmp_path, "2")) == 0  # nothing to run: the summary is rebuilt
    s = json.loads((tmp_path / "summary.json").read_text())
    assert (s["device"], s["host"], s["hardware"]) == ("NVIDIA H200", "gpu-host", {"gpu_uuids": ["GPU-1"]})
    monkeypatch.setattr(run, "device_name", lambda: "NVIDIA H100 80GB HBM3")
    assert run.main(args(tmp_path, "2")) == 0  # a GPU host records its own device
    assert json.loads((tmp_path / "summary.json").read_text())["device"] == "NVIDIA H100 80GB HBM3"


def _proc(root, pid, session, ticks, argv):
    d = root / str(pid)
    d.mkdir(exist_ok=True)
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
    d.joinpath("stat").write_text(f"{pid} (py thon) S 1 {session} {session} 0 -1 0 0 0 0 0 {ticks} 0 0 0 20\n")
    d.joinpath("cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")


def test_proc_cpu_names_the_server_processes_and_their_busy_cores(tmp_path):
    from bench import proc_cpu
    hz = __import__("os").sysconf("SC_CLK_TCK")
    _proc(tmp_path, 500, 500, 0, ["python", "-m", "sglang.launch_server"])
    _proc(tmp_path, 501, 500, 10, ["sglang::scheduler_TP0"])
    _proc(tmp_path, 502, 500, 0, ["sglang::detokenizer"])
    _proc(tmp_path, 900, 900, 0, ["python", "-m", "bench.run"])  # another session: not the server's
    (tmp_path / "self").mkdir()
    before = proc_cpu.snapshot(500, tmp_path)
    assert before == {500: ("http+tokenizer", 0), 501: ("sglang::scheduler_TP0", 10), 502: ("sglang::detokenizer", 0)}
    _proc(tmp_path, 500, 500, 2 * hz, ["python"])
    _proc(tmp_path, 501, 500, 10 + hz, ["sglang::scheduler_TP0"])
    _proc(tmp_path, 503, 500, hz // 2, ["python", "-c", "compile worker"])  # born during the point
    _proc(tmp_path, 504, 500, hz // 2, ["sglang::tokenizer_worker:504"])  # --tokenizer-worker-num 2
    _proc(tmp_path, 505, 500, hz, ["sglang::tokenizer_worker:505"])
    (tmp_path / "502" / "stat").unlink()  # gone
    after = proc_cpu.snapshot(500, tmp_path)
    assert proc_cpu.busy(before, after, 2.0) == {"http+tokenizer": 1.0, "sglang::scheduler_TP0": 0.5,
                                                 "sglang::tokenizer_worker": 0.5, "other": 0.25}
    assert proc_cpu.busy(before, after, 0) == {}


def test_host_cpu_over_a_point(tmp_path):
    """user nice system idle iowait irq softirq steal: 1 s of 4 vCPUs at 100 ticks/s."""
    f = tmp_path / "stat"
    f.write_text("cpu  1000 0 200 5000 10 0 5 40 0 0\ncpu0 1 1 1 1 1 1 1 1 1 1\n")
    before = run.cpu_ticks(str(f))
    assert before == [1000, 0, 200, 5000, 10, 0, 5, 40, 0, 0]
    after = [1000 + 200, 0, 200 + 40, 5000 + 150, 10 + 0, 0, 5 + 2, 40 + 8, 0, 0]
    tick_ms = 1000 / __import__("os").sysconf("SC_CLK_TCK")
    assert run.host_cpu(before, after) == {"busy_share": 0.605, "steal_share": 0.02, "steal_ms": 8 * tick_ms}
    assert run.host_cpu(None, after) is None and run.host_cpu(before, before) is None
    assert run.cpu_ticks(str(tmp_path / "none")) is None


def test_prompts_sglang_would_refuse_stop_the_run_before_a_server_starts(tmp_path, capsys):
    argv = ["--systems", "stub", "--workload", "conversation", "--trace-path", "bench/data/conversation_first1000.jsonl",
            "--rates", "2", "--duration-s", "2", "--out", str(tmp_path), "--no-progress",
            "--server-args", "--context-length 2048"]
    assert run.main(argv) == 2
    err = capsys.readouterr().err
    assert "longer than the 2041 tokens SGLang serves with a 2048-token context" in err
    assert "--input-cap 2041" in err and not list(tmp_path.glob("stub*"))


def test_prompt_check_takes_the_models_context_and_the_cap():
    a = run.parse_args(["--systems", "stub", "--workload", "conversation", "--rates", "1", "--duration-s", "3",
                        "--trace-path", "bench/data/conversation_first1000.jsonl", "--out", "/tmp/x"])
    assert a.context_len == 131072  # launch/models/llama-3.1-8b, the default model
    a.context_len, a.input_cap = 2048, 2041
    wl = run.build_workload(a, 1.0)
    assert [r.prompt_len for r in wl.requests] == [2041, 2041, 2041]  # every one capped, and served
    run.check_prompts(wl, None)  # a model without max_position_embeddings: nothing to check
    with pytest.raises(run.PromptTooLong, match="3 of 3 prompts are longer than the 2040 tokens"):
        run.check_prompts(wl, 2047)


def test_warm_history_prefills_the_reused_history_after_the_flush(tmp_path):
    rows = [([1, 2, 3], 1536), ([4, 5], 1024), ([1, 2, 9], 1536), ([1, 2, 3, 7], 2048), ([4, 8], 700), ([10], 512)]
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(json.dumps({"timestamp": 1000 * i, "input_length": n, "output_length": 4,
                                         "hash_ids": ids}) + "\n" for i, (ids, n) in enumerate(rows)))
    with stub_server.in_thread(stub_server.StubConfig(ttft_s=0.0, tbt_s=0.002)) as url:
        argv = args(tmp_path / "out", "4", "--server-url", url, "--workload", "mooncake-synthetic",
                    "--trace-path", str(trace), "--offset", "2", "--warm-history")
        argv[1] = "external"
        assert run.main(argv) == 0
    meta = json.loads((tmp_path / "out" / "external__4.meta.json").read_text())
    assert meta["workload"]["warm_history"] == {"prompts": 2, "tokens": 2048}
    assert meta["flushed_cache"] and meta["warmed_cache"].startswith("; warmed with 2 history prompts, 2048 tokens")
    recs = [json.loads(x) for x in (tmp_path / "out" / "external__4.jsonl").read_text().splitlines()]
    assert len(recs) == 4 and all("warm" not in r["rid"] for r in recs)  # the point's requests only
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert not s["mixed_workload_options"] and s["workload"]["warm_history"] == "prefilled after each flush"
    with pytest.raises(SystemExit) as e:  # no history to prefill: a usage error before anything starts
        run.main(args(tmp_path / "bad", "4", "--warm-history"))
    assert e.value.code == 2
    assert "warm_history=prefilled after each flush" in report.render(s)


def test_a_length_aware_ttft_slo_judges_the_points_and_is_recorded(tmp_path, capsys):
    # the stub answers every prompt in 300 ms: over a flat 250 ms SLO; LooGLE prompts are >= 3380
    # tokens, so less 0.2 ms a token every TTFT is under 0 and the same point passes
    base = args(tmp_path, "2", "--workload", "loogle", "--server-args", "--ttft-ms 300 --tbt-ms 5",
                "--ttft-slo-ms", "250")
    assert run.main(base) == 0
    s = json.loads((tmp_path / "summary.json").read_text())
    pt = s["systems"]["stub"]["points"][0]
    assert s["slo"]["ttft_ms_per_token"] == 0 and "P99 TTFT <= TTFT SLO" in s["slo"]["goodput_rule"]
    assert not pt["pass"] and pt["reasons"][0].startswith("P99 TTFT ") and "ttft_length_adjusted_ms" not in pt["summary"]
    capsys.readouterr()
    # the same point judged again (nothing re-run): the summary is rebuilt under the new rule
    assert run.main(base + ["--ttft-slo-ms-per-token", "0.2"]) == 0
    s = json.loads((tmp_path / "summary.json").read_text())
    pt = s["systems"]["stub"]["points"][0]
    assert {k: s["slo"][k] for k in ("tbt_ms", "ttft_ms", "ttft_ms_per_token", "percentile")} == \
        {"tbt_ms": 50.0, "ttft_ms": 250.0, "ttft_ms_per_token": 0.2, "percentile": 99}
    assert "TTFT - ttft_ms_per_token x prompt tokens" in s["slo"]["goodput_rule"]
    recs = [json.loads(x) for x in (tmp_path / "stub__2.jsonl").read_text().splitlines()]
    adjusted = [r["tok_ms"][0] - 0.2 * r["prompt_tokens"] for r in recs]
    assert pt["summary"]["ttft_length_adjusted_ms"]["p99"] == pytest.approx(float(np.percentile(adjusted, 99)))
    assert pt["pass"] and s["systems"]["stub"]["goodput_rps"] == 2.0 and pt["summary"]["ttft_ms"]["p99"] > 250
    out = capsys.readouterr().out
    assert "P99 of (TTFT − 0.2 ms × prompt tokens) ≤ 250 ms (length-aware)" in out and "P99 TTFT − 0.2×prompt (ms)" in out


def test_the_mux_servers_get_the_goodput_checks_ttft_slo_unless_told_otherwise():
    """A server preempts for the SLO it is judged by: --mux-ttft-ms-per-token defaults to the
    goodput check's K (and --mux-ttft-slo-ms to its S); given, it is the servers' alone."""
    a = run.parse_args(["--systems", "mux", "--rates", "1", "--out", "o", "--ttft-slo-ms", "2000",
                        "--ttft-slo-ms-per-token", "0.2"])
    assert (a.ttft_slo_ms, a.ttft_slo_ms_per_token, a.mux_ttft_ms_per_token, a.mux_ttft_slo_ms) == (2000, 0.2, 0.2, 2000)
    cmd = systems.server_command("mux", a.model_path, 30000, ttft_slo_ms=a.mux_ttft_slo_ms,
                                 ttft_ms_per_token=a.mux_ttft_ms_per_token)
    assert "--mux-ttft-ms-per-token" in cmd and systems.mux_settings(cmd)["ttft_ms_per_token"] == 0.2
    flat = run.parse_args(["--systems", "mux", "--rates", "1", "--out", "o", "--ttft-slo-ms-per-token", "0.2",
                           "--mux-ttft-ms-per-token", "0"])
    assert (flat.ttft_slo_ms_per_token, flat.mux_ttft_ms_per_token) == (0.2, 0.0)
    assert run.parse_args(["--systems", "stub", "--rates", "1", "--out", "o"]).ttft_slo_ms_per_token == 0


def test_a_point_file_kept_compressed_is_read_through(tmp_path):
    import lzma

    from bench import run as R

    p = tmp_path / "mux__3.meta.json"
    assert R.read_json(p) is None
    (tmp_path / "mux__3.meta.json.xz").write_bytes(lzma.compress(b'{"timeline_bytes": [0, 10]}'))
    assert R.read_json(p) == {"timeline_bytes": [0, 10]}
    p.write_text('{"timeline_bytes": [5, 6]}')  # the plain file wins where both exist
    assert R.read_json(p) == {"timeline_bytes": [5, 6]}


def test_a_port_already_served_is_refused_before_starting(tmp_path):
    """A server left on the port would answer /health and be measured in the started one's place."""
    import socket

    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        sk.listen(1)
        port = sk.getsockname()[1]
        s = run.Server(["true"], tmp_path / "x.log", f"http://127.0.0.1:{port}")
        with pytest.raises(run.cli.UsageError, match=f"port {port} already has a server listening"):
            s.start()
        assert s.proc is None
    assert not run.port_answers(port)


HEALTH_SERVER = ("import http.server, sys\n"
                 "class H(http.server.BaseHTTPRequestHandler):\n"
                 "    def do_GET(self):\n"
                 "        self.send_response(200); self.end_headers(); self.wfile.write(b'ok')\n"
                 "    def log_message(self, *a): pass\n"
                 "http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()\n")


def _free_port() -> int:
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        return sk.getsockname()[1]


@pytest.mark.skipif(not run.Path("/proc/net/tcp").exists(), reason="reads /proc (Linux)")
def test_health_from_another_process_on_the_port_is_not_the_started_server(tmp_path):
    """Two runs started together on one port both pass start()'s check, and the first server up
    answers both /health calls: the later run must refuse it, not measure the other's server."""
    import subprocess
    port = _free_port()
    s = run.Server([sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "x.log",
                   f"http://127.0.0.1:{port}")
    s.start()
    other = subprocess.Popen([sys.executable, "-c", HEALTH_SERVER, str(port)])
    try:
        ok, why = s.wait_healthy(20)
        assert not ok
        assert f"port {port} is answered by process {other.pid}, not by the server this run started" in why
    finally:
        other.kill()
        s.stop()


@pytest.mark.skipif(not run.Path("/proc/net/tcp").exists(), reason="reads /proc (Linux)")
def test_health_from_the_started_server_or_its_children_is_accepted(tmp_path):
    """SGLang's HTTP server may live in a child of the launched process: its session is the one."""
    port = _free_port()
    child = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {HEALTH_SERVER!r}, '{port}'])"
    s = run.Server([sys.executable, "-c", child], tmp_path / "x.log", f"http://127.0.0.1:{port}")
    s.start()
    try:
        assert s.wait_healthy(20) == (True, "ok")
    finally:
        s.stop()
    assert not run.port_answers(port)


def test_a_run_records_the_cpus_it_was_pinned_to():
    """A cell's share of a multi-GPU host (plans/per_gpu.sh) goes into summary.json's hardware."""
    import subprocess
    from pathlib import Path
    code = ("import os; os.sched_setaffinity(0, {0}); from bench.run import host_hardware; "
            "print(host_hardware()['cpus_allowed'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.stdout.strip() == "0"


def test_a_length_aware_point_holds_at_least_100_requests():
    """The queue-drift test reads the last tenth of a point: with a length-aware TTFT SLO the span
    stretches to 100 requests (mixed at 0.5 req/s: 200 s, not 45); flat, or with --num-requests,
    or in sessions, it is --duration-s as given."""
    aware = run.parse_args(["--systems", "stub", "--workload", "mixed", "--rates", "0.5", "--out", "o",
                            "--duration-s", "45", "--ttft-slo-ms-per-token", "0.2"])
    assert run.point_duration_s(aware, 0.5) == 200.0 and run.point_duration_s(aware, 4.0) == 45.0
    assert run.build_workload(aware, 0.5).n_requests == 100
    flat = run.parse_args(["--systems", "stub", "--workload", "mixed", "--rates", "0.5", "--out", "o",
                           "--duration-s", "45"])
    assert run.point_duration_s(flat, 0.5) == 45.0
    fixed = run.parse_args(["--systems", "stub", "--workload", "mixed", "--rates", "0.5", "--out", "o",
                            "--duration-s", "45", "--ttft-slo-ms-per-token", "0.2", "--num-requests", "30"])
    assert run.point_duration_s(fixed, 0.5) == 45.0
