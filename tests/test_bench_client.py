"""bench.client against bench.stub_server on localhost: timing, failures, chat, sharding."""
import numpy as np
import pytest

from bench import client, metrics, stub_server, workloads as W


def stub(**cfg):
    return stub_server.in_thread(stub_server.StubConfig(**cfg))


def small(n, rate, out=10, prompt=64, seed=0):
    rng = np.random.default_rng(seed)
    ts = W.poisson_arrivals(n, rate, seed)
    return W.Workload("small", "generate", requests=[
        W.Request(f"r{i}", float(ts[i]), W.random_tokens(rng, prompt), out) for i in range(n)])


def test_timing_matches_stub():
    with stub(ttft_s=0.05, tbt_s=0.02) as url:
        recs, info = client.run_workload(url, small(20, 20.0), deadline_s=10, progress=False)
    assert all(r["ok"] and r["error"] is None for r in recs), [r["error"] for r in recs]
    assert all(r["output_tokens"] == 10 == len(r["tok_ms"]) for r in recs)
    assert all(r["finish_reason"] == "length" and r["prompt_tokens"] == 64 for r in recs)
    s = metrics.summarize(recs)
    assert s["ttft_ms"]["p50"] == pytest.approx(50, abs=15)
    assert s["tbt_ms"]["p50"] == pytest.approx(20, abs=4)
    assert s["tpot_ms"]["p50"] == pytest.approx(20, abs=4)
    assert s["send_lateness_ms"]["p50"] < 10
    assert info["cancelled_at_deadline"] == 0


def test_multi_token_chunks_give_zero_gaps():
    with stub(ttft_s=0.0, tbt_s=0.01, chunk_tokens=3) as url:
        recs, _ = client.run_workload(url, small(3, 10.0, out=7), deadline_s=10, progress=False)
    for r in recs:
        gaps = np.diff(r["tok_ms"])
        assert r["output_tokens"] == 7
        assert list(gaps[[0, 1, 3, 4]]) == [0, 0, 0, 0]          # chunks of 3, 3, 1
        # chunk boundaries: one chunk every 3 x 10 ms on the stub's absolute schedule; a single
        # gap can be late on a loaded 2-core machine (46 ms seen in CI), never early
        assert 22 <= gaps[2] <= 130 and 22 <= gaps[5] <= 130


def test_errors_and_timeouts_are_failed_not_dropped():
    with stub(ttft_s=0.0, tbt_s=0.005, error_every=3) as url:
        recs, _ = client.run_workload(url, small(9, 30.0, out=4), deadline_s=10, progress=False)
    assert [r["ok"] for r in recs].count(False) == 3
    assert all(r["error"].startswith("http_500") for r in recs if not r["ok"])
    s = metrics.summarize(recs)
    assert s["n"] == 9 and s["n_failed"] == 3 and s["failures"] == {"http_500": 3}
    with stub(ttft_s=0.0, tbt_s=0.005, hang_every=2, hang_s=30) as url:
        # global deadline: hung requests (and nothing else) fail as 'timeout'. The stub hangs
        # every 2nd request it *receives*; sends 7 ms apart can reach it in either order on a
        # loaded machine, so which records hang is not fixed, how many is.
        recs, info = client.run_workload(url, small(4, 40.0, out=4), deadline_s=1.0, progress=False)
        assert sorted(r["error"] or "" for r in recs) == ["", "", "timeout", "timeout"]
        assert all(r["ok"] == (r["error"] is None) for r in recs)
        assert info["cancelled_at_deadline"] == 2
        # per-request client timeout
        recs, _ = client.run_workload(url, small(2, 40.0, out=4), deadline_s=5.0, progress=False,
                                      request_timeout_s=0.5)
        assert sorted(r["error"] or "" for r in recs) == ["", "request_timeout"]
    s = metrics.summarize(recs)
    assert s["n_failed"] == 1 and not metrics.check_point(s)[0]
    # nothing listening: connection errors, still recorded
    recs, _ = client.run_workload("http://127.0.0.1:9", small(2, 10.0), deadline_s=5, progress=False)
    assert all(r["error"].startswith("exception: ClientConnectorError") for r in recs)


def test_trace_replay_cached_tokens():
    rows = W.load_trace("conversation", W.DATA_DIR / "conversation_first1000.jsonl")[:10]
    wl = W.trace_workload(rows, rate=20.0, input_cap=4096, output_cap=4)
    with stub(ttft_s=0.0, tbt_s=0.002) as url:
        recs, _ = client.run_workload(url, wl, deadline_s=10, progress=False)
    assert all(r["ok"] for r in recs)
    # all ten share hash block 0 (512 tokens); the stub's cache reports it from the 2nd on
    assert recs[0]["cached_tokens"] == 0
    assert sum(r["cached_tokens"] >= 512 for r in recs) >= 8


def test_chat_sessions_carry_the_conversation():
    wl = W.chat_workload(n_sessions=3, rate=10.0, seed=1, turns_min=3, turns_max=3, think_s=0.05,
                         output_cap=6)
    with stub(ttft_s=0.01, tbt_s=0.005) as url:
        recs, _ = client.run_workload(url, wl, deadline_s=15, progress=False)
    assert len(recs) == 9 and all(r["ok"] for r in recs), [r["error"] for r in recs]
    by = {(r["session"], r["turn"]): r for r in recs}
    for s in ("chat-0", "chat-1", "chat-2"):
        t0, t1, t2 = by[(s, 0)], by[(s, 1)], by[(s, 2)]
        assert t0["prompt_tokens"] < t1["prompt_tokens"] < t2["prompt_tokens"]
        # the next turn holds the previous prompt + answer: the cache covers all of it
        assert t2["cached_tokens"] >= t1["prompt_tokens"] + 6
        assert t1["send"] >= t0["end"] and t1["scheduled"] >= t0["end"]
        assert t0["output_tokens"] == 6 and len(t0["tok_ms"]) == 6


def test_chat_failed_turn_aborts_the_session():
    wl = W.chat_workload(n_sessions=1, rate=1.0, seed=1, turns_min=3, turns_max=3, think_s=0.01,
                         output_cap=4)
    with stub(ttft_s=0.0, tbt_s=0.002, error_every=2) as url:
        recs, _ = client.run_workload(url, wl, deadline_s=10, progress=False)
    assert [r["error"] and r["error"].split(":")[0] for r in recs] == [None, "http_500", "session_aborted"]


def test_sharded_client_processes():
    with stub(ttft_s=0.02, tbt_s=0.01) as url:
        recs, info = client.run_workload(url, small(30, 30.0, out=5), deadline_s=10,
                                         progress=False, procs=3)
    assert info["procs"] == 3 and info["workers_lost"] == 0
    assert [r["rid"] for r in recs] == [f"r{i}" for i in range(30)]
    assert all(r["ok"] for r in recs)
    s = metrics.summarize(recs)
    assert s["ttft_ms"]["p50"] == pytest.approx(20, abs=15)
    assert s["send_lateness_ms"]["p50"] < 10             # one schedule origin for all workers


def test_server_clock_lag_probe():
    with stub(ttft_s=0.0, tbt_s=0.005) as url:
        recs, _ = client.run_workload(url, small(5, 20.0, out=6), deadline_s=10, progress=False,
                                      server_clock=True)
    lags = np.concatenate([r["lag_ms"] for r in recs])
    assert len(lags) == 30 and 0 <= np.median(lags) < 20       # same clock in both processes


def test_scrape_metrics_keeps_only_the_prefix_and_counts():
    with stub() as url:
        assert client.flush_cache(url)
        page = client.scrape_metrics(url, prefix="sglang:")
    assert page == ("# HELP sglang:cache_flushes_total Cache flushes.\n"
                    "# TYPE sglang:cache_flushes_total counter\n"
                    "sglang:cache_flushes_total 1\n")


def test_scrape_metrics_none_without_endpoint():
    assert client.scrape_metrics("http://127.0.0.1:9") is None


def test_server_stamps_split_the_ttft():
    """SGLang's --enable-metrics stamps on the final chunk (the stub's: its wait, then the first
    token, handed to the stream at once) are recorded, and ttft_parts cuts a TTFT at each of them."""
    from bench.analysis import ttft_parts
    with stub(ttft_s=0.08, tbt_s=0.005) as url:
        recs, info = client.run_workload(url, small(6, 20.0, out=4), deadline_s=10, progress=False)
    assert all(set(r["server"]) == set(client.SERVER_STAMPS) for r in recs)
    df = metrics.stamp_parts(recs, info["t0_wall"])
    assert len(df) == 6
    assert (df.server_ms > 70).all() and (df.server_ms < df.ttft_ms).all()
    assert (df.rest_ms < 30).all()
    assert (df.in_ms.abs() < 30).all() and (df.to_tm_ms.abs() < 1).all() and (df.to_client_ms.abs() < 30).all()
    assert (df.in_ms + df.server_ms + df.to_tm_ms + df.to_client_ms - df.ttft_ms).abs().max() < 1e-6
    assert (df.server_ms + df.to_tm_ms - df.through_ms).abs().max() < 1e-6
    b = ttft_parts.by_bin(df, bin_s=100.0)
    assert list(b.n) == [6] and b.server_ms_p50.iloc[0] > 70
    # without the client's clock the way in and out stay unknown, the rest does not
    df = metrics.stamp_parts(recs)
    assert df.in_ms.isna().all() and df.to_client_ms.isna().all() and (df.rest_ms < 30).all()
    assert "in_ms" not in ttft_parts.overall(df).columns


def test_ttft_parts_without_the_schedulers_stamps():
    """With --tokenizer-worker-num > 1 SGLang 0.5.16 returns the tokenizer manager's stamps only
    (session 49's H200, queue_time 0.0): the server's part is ``through`` alone, its split unknown."""
    from bench.analysis import ttft_parts
    rec = {"ok": True, "send": 1.0, "tok_ms": [130.0], "server": {
        "request_received_ts": 100.01, "queue_time": 0.0, "response_sent_to_client_ts": 100.1}}
    df = metrics.stamp_parts([rec], t0_wall=99.0)
    row = df.iloc[0]
    assert (round(row.in_ms, 6), round(row.through_ms, 6), round(row.to_client_ms, 6)) == (10.0, 90.0, 30.0)
    assert df[["server_ms", "queue_ms", "to_tm_ms", "rest_ms"]].isna().all().all()
    assert list(ttft_parts.overall(df).columns) == ["ttft_ms", "in_ms", "through_ms", "to_client_ms"]


def test_ttft_parts_reads_a_compressed_point_and_says_what_is_missing(tmp_path, capsys):
    import json
    import lzma
    from bench.analysis import ttft_parts
    rec = {"ok": True, "send": 1.0, "tok_ms": [120.0], "server": {
        "request_received_ts": 100.0, "prefill_finished_time": 100.08, "queue_time": 0.05}}
    (tmp_path / "mux-hybrid__50.jsonl.xz").write_bytes(lzma.compress((json.dumps(rec) + "\n").encode()))
    assert ttft_parts.main([str(tmp_path), "--rate", "50"]) == 0
    out = capsys.readouterr().out
    assert "1 of 1 requests with server stamps" in out and "40.0" in out  # 120 ms less 80 ms
    assert "in_ms" not in out  # no .meta.json: the client's clock is unknown
    (tmp_path / "mux-hybrid__50.meta.json").write_text(json.dumps({"client": {"t0_wall": 98.99}}))
    assert ttft_parts.main([str(tmp_path), "--rate", "50"]) == 0
    out = capsys.readouterr().out
    assert "in_ms" in out and "10.0" in out  # sent at 98.99 + 1.0, received at 100.0
    assert ttft_parts.main([str(tmp_path), "--rate", "55"]) != 0
    assert "no such point" in capsys.readouterr().err


def test_a_points_start_is_on_the_monotonic_clock_a_mux_timeline_keeps():
    """The server's timeline stamps decisions with time.monotonic(), the machine's monotonic clock;
    the point's t0 on that clock puts them on the requests' own (a timeline row's time less it is
    seconds since t0, as each record's ``send`` is), where matching wall clocks had to be guessed."""
    import time

    before = time.monotonic()
    with stub(ttft_s=0.0, tbt_s=0.005) as url:
        recs, info = client.run_workload(url, small(3, 20.0, out=2), deadline_s=10, progress=False)
    after = time.monotonic()
    assert before <= info["t0_monotonic"] <= after
    assert info["t0_monotonic"] + max(r["send"] for r in recs) <= after
