"""bench.workloads: trace blocks, reuse, caps, rate scaling, Poisson, Table-1 synthetic, chat."""
import json
from pathlib import Path

import numpy as np
import pytest

from bench import workloads as W


def test_block_tokens_deterministic_and_in_vocab():
    a, b = W.block_tokens(42), W.block_tokens(42)
    assert a is b or np.array_equal(a, b)
    W.block_tokens.cache_clear()
    assert np.array_equal(W.block_tokens(42), a)            # same id -> same tokens, uncached too
    assert not np.array_equal(W.block_tokens(43), a)
    assert not np.array_equal(W.block_tokens(42, salt="rate=2"), a)
    assert len(a) == W.BLOCK and a.min() >= W.VOCAB_LO and a.max() < W.VOCAB_HI


def test_trace_prompt_partial_last_block():
    ids = W.trace_prompt([7, 8, 9], 1100)
    assert len(ids) == 1100                                  # 512 + 512 + 76
    assert np.array_equal(ids[:512], W.block_tokens(7))
    assert np.array_equal(ids[1024:], W.block_tokens(9)[:76])


def test_prefix_sharing_reproduces_trace_reuse():
    rows = W.load_trace("conversation", W.DATA_DIR / "conversation_first1000.jsonl")[:300]
    wl = W.trace_workload(rows, n=300)
    prompts = [r.input_ids for r in wl.requests]
    # token-level prefix reuse of the generated prompts == the trace's own block reuse
    assert W.block_reuse(prompts) == pytest.approx(W.hash_block_reuse(rows), abs=1e-12)
    assert W.hash_block_reuse(rows) > 0.05
    # rows 0 and 1 share hash id 0 only: one equal block, then different tokens
    assert rows[0]["hash_ids"][0] == rows[1]["hash_ids"][0] and rows[0]["hash_ids"][1] != rows[1]["hash_ids"][1]
    assert np.array_equal(prompts[0][:512], prompts[1][:512])
    assert not np.array_equal(prompts[0][512:1024], prompts[1][512:1024])


def test_full_trace_reuse_matches_readme():
    if not (W.shared_traces() / "mooncake_conversation.jsonl").exists():
        pytest.skip("full trace not present")
    rows = W.load_trace("conversation")
    assert W.hash_block_reuse(rows, full_blocks_only=False) == pytest.approx(0.366, abs=0.001)


def test_shipped_session_slice_is_every_turn_of_one_session_in_20():
    rows = W.load_trace("conversation", W.DATA_DIR / "conversation_sessions20.jsonl")
    assert len(rows) == 640 and W.sample_sessions(rows, 20) == rows  # every session kept is whole
    assert max(r["input_length"] for r in rows) > 100_000  # uncapped: the long prompts are there
    if (W.shared_traces() / "mooncake_conversation.jsonl").exists():
        assert W.sample_sessions(W.load_trace("conversation"), 20) == rows


def test_input_cap_truncates_from_the_end():
    rows = W.load_trace("conversation", W.DATA_DIR / "conversation_first1000.jsonl")[:50]
    full = W.trace_workload(rows)
    cap = W.trace_workload(rows, input_cap=2000, output_cap=64)
    for f, c in zip(full.requests, cap.requests):
        assert c.prompt_len == min(f.prompt_len, 2000)
        assert np.array_equal(c.input_ids, f.input_ids[:2000])   # prefix kept
        assert c.max_new_tokens == min(f.max_new_tokens, 64)
    assert cap.options["input_cap"] == 2000


def test_rate_scaling():
    rows = W.load_trace("conversation", W.DATA_DIR / "conversation_first1000.jsonl")
    wl = W.trace_workload(rows, n=200, rate=2.0)
    ts = [r.t for r in wl.requests]
    assert ts[0] == 0 and W.mean_rate(ts) == pytest.approx(2.0)
    raw = W.trace_workload(rows, n=200)
    half = W.trace_workload(rows, n=200, time_scale=0.5)
    assert [r.t * 0.5 for r in raw.requests] == pytest.approx([r.t for r in half.requests])
    # the trace's burst structure survives scaling (same relative gaps)
    assert np.allclose(np.array(ts) / ts[-1], np.array([r.t for r in raw.requests]) / raw.requests[-1].t)
    with pytest.raises(ValueError):
        W.rescale(np.array([0.0, 1.0]), rate=1.0, time_scale=2.0)


def test_poisson_rate_and_seed():
    t = W.poisson_arrivals(5000, 3.0, seed=1)
    assert t[0] == 0 and np.all(np.diff(t) >= 0)
    assert W.mean_rate(t) == pytest.approx(3.0, rel=0.05)
    gaps = np.diff(t)
    assert np.std(gaps) / np.mean(gaps) == pytest.approx(1.0, abs=0.1)   # exponential gaps
    assert np.array_equal(t, W.poisson_arrivals(5000, 3.0, seed=1))
    assert not np.array_equal(t, W.poisson_arrivals(5000, 3.0, seed=2))
    wl = W.trace_workload(W.load_trace("conversation", W.DATA_DIR / "conversation_first1000.jsonl"),
                          n=500, rate=4.0, arrival="poisson", seed=3)
    assert W.mean_rate([r.t for r in wl.requests]) == pytest.approx(4.0, rel=0.15)


@pytest.mark.parametrize("name", ["sharegpt", "loogle", "openthoughts"])
def test_synthetic_table1(name):
    spec = W.SYNTHETIC[name]
    wl = W.synthetic_workload(name, n=2000, rate=5.0, seed=0)
    ins = np.array([r.prompt_len for r in wl.requests])
    outs = np.array([r.max_new_tokens for r in wl.requests])
    (mi, _, lo_i, hi_i), (mo, _, lo_o, hi_o) = spec["inp"], spec["out"]
    assert lo_i <= ins.min() and ins.max() <= hi_i and lo_o <= outs.min() and outs.max() <= hi_o
    assert ins.mean() == pytest.approx(mi, rel=0.12) and outs.mean() == pytest.approx(mo, rel=0.12)
    if spec["shared"]:
        first = wl.requests[0].input_ids[:spec["shared"]]
        assert all(np.array_equal(r.input_ids[:spec["shared"]], first) for r in wl.requests)
        assert not np.array_equal(wl.requests[0].input_ids[:300], wl.requests[1].input_ids[:300])
    again = W.synthetic_workload(name, n=2000, rate=5.0, seed=0)
    assert np.array_equal(again.requests[7].input_ids, wl.requests[7].input_ids)


def test_chat_workload():
    wl = W.chat_workload(n_sessions=50, rate=1.0, seed=0, think_s=2.0)
    assert wl.kind == "chat" and len(wl.sessions) == 50
    assert all(2 <= len(s.turns) <= 6 and s.turns[0].think_s == 0 for s in wl.sessions)
    assert all(s.system == wl.sessions[0].system for s in wl.sessions)   # shared system prompt
    assert wl.n_requests == sum(len(s.turns) for s in wl.sessions)
    assert W.chat_workload(n_sessions=50, rate=1.0, seed=0, think_s=2.0).sessions[3].turns[1].user \
        == wl.sessions[3].turns[1].user


def test_build_counts_and_salts():
    a = W.build("sharegpt", rate=2.0, duration_s=30, salt="x")
    assert len(a.requests) == 60 and a.options["rate"] == 2.0
    b = W.build("conversation", rate=0.5, duration_s=40, salt="x")
    c = W.build("conversation", rate=0.5, duration_s=40, salt="y")
    assert len(b.requests) == 20
    assert not np.array_equal(b.requests[0].input_ids, c.requests[0].input_ids)   # salted
    with pytest.raises(ValueError):
        W.build("nope", rate=1, duration_s=1)


def test_token_range_follows_the_model():
    assert W.token_range(None) == W.VOCAB == W.token_range(128256)
    lo, hi = W.token_range(4096)                       # launch/models/tiny-llama
    assert 0 < lo < hi <= 4096 - 300
    wl = W.build("conversation", rate=1.0, duration_s=5, vocab=(lo, hi))
    assert all(r.input_ids.min() >= lo and r.input_ids.max() < hi for r in wl.requests)
    assert W.model_vocab_size(W.DATA_DIR.parent.parent / "launch/models/qwen3-8b") == 151936


def test_full_traces_are_found_beside_the_checkout_or_where_the_env_says(monkeypatch, tmp_path):
    assert W.shared_traces() == Path(W.__file__).resolve().parents[2] / "shared" / "traces"
    monkeypatch.setenv("SGLANG_MUX_TRACES", str(tmp_path))
    assert W.shared_traces() == tmp_path
    assert W.trace_path("conversation") == W.DATA_DIR / "conversation_first1000.jsonl"  # no full trace there
    (tmp_path / "mooncake_conversation.jsonl").write_text("")
    assert W.trace_path("conversation") == tmp_path / "mooncake_conversation.jsonl"


HISTORY = [  # (hash_ids, input_length): ids are prefix-chained, as in the Mooncake traces
    ([1, 2, 3], 1536), ([4, 5], 1024),                       # before the window (offset 2)
    ([1, 2, 9], 1536), ([1, 2, 3, 7], 2048), ([4, 8], 700), ([10], 512)]


def _rows():
    return [{"timestamp": 1000 * i, "input_length": n, "output_length": 4, "hash_ids": ids}
            for i, (ids, n) in enumerate(HISTORY)]


def test_warm_prefixes_are_the_history_the_window_reuses():
    # (1, 2) is inside (1, 2, 3); of [4, 8] only the first block is full (700 tokens)
    assert W.warm_prefixes(_rows(), 2, 4) == [(1, 2, 3), (4,)]
    assert W.warm_prefixes(_rows(), 2, 4, input_cap=1024) == [(1, 2), (4,)]  # prompts end at the cap
    assert W.warm_prefixes(_rows(), 0, 2) == []                              # no history
    assert W.warm_prefixes(_rows(), 5, 1) == []                              # [10] was never seen


def test_warm_history_prompts_are_the_window_prompts_prefixes():
    wl = W.trace_workload(_rows(), name="mooncake-synthetic", offset=2, n=4, salt="rate=1", warm_history=True)
    assert [r.prompt_len for r in wl.warm] == [1536, 512] and all(r.max_new_tokens == 1 for r in wl.warm)
    assert wl.options["warm_history"] == {"prompts": 2, "tokens": 2048}
    np.testing.assert_array_equal(wl.warm[0].input_ids, wl.requests[1].input_ids[:1536])  # same salt, same blocks
    np.testing.assert_array_equal(wl.warm[1].input_ids, wl.requests[2].input_ids[:512])
    assert not W.trace_workload(_rows(), offset=2, n=4).warm                 # off unless asked
    with pytest.raises(ValueError, match="--warm-history applies to the traces"):
        W.build("sharegpt", rate=1, duration_s=2, warm_history=True)


# issue 43's two production traffics: (name, input (target mean, lo, hi), output (target mean, lo, hi))
PRODUCTION = [("code", (2000, 100, 7500), (25, 1, 250)), ("chat-1k", (1000, 16, 8000), (250, 1, 1000))]


@pytest.mark.parametrize("name, inp, out", PRODUCTION)
@pytest.mark.parametrize("seed", [0, 1])
def test_production_workloads_keep_their_means_after_clipping(name, inp, out, seed):
    wl = W.synthetic_workload(name, n=10_000, rate=10.0, seed=seed)
    ins = np.array([r.prompt_len for r in wl.requests])
    outs = np.array([r.max_new_tokens for r in wl.requests])
    for got, (mean, lo, hi) in ((ins, inp), (outs, out)):
        assert got.mean() == pytest.approx(mean, rel=0.05)
        assert lo <= got.min() and got.max() <= hi
    assert W.SYNTHETIC[name]["shared"] == 0 and W.SYNTHETIC[name]["inp"][2:] == inp[1:]
    # no prefix reuse: no two prompts share their first 16 tokens
    assert len({r.input_ids[:16].tobytes() for r in wl.requests}) == len(wl.requests)


def test_production_workloads_are_selectable_like_sharegpt():
    from bench import run
    for name, _, _ in PRODUCTION:
        assert name in W.WORKLOADS
        assert len(W.build(name, rate=2.0, duration_s=10).requests) == 20
        a = run.parse_args(["--systems", "stub", "--workload", name, "--rates", "1", "--out", "o"])
        assert a.workload == name and run.build_workload(a, 1.0).options["workload"] == name


def test_a_workload_as_a_trace_the_simulator_reads(tmp_path):
    from sglang_mux import traces
    wl = W.synthetic_workload("code", n=300, rate=14.0, seed=0, salt="rate=14")
    path = tmp_path / "code.jsonl"
    assert W.write_trace(wl, path) == 300
    rows = traces.read_rows(str(path))
    assert [r["input_length"] for r in rows] == [r.prompt_len for r in wl.requests]
    assert [r["output_length"] for r in rows] == [r.max_new_tokens for r in wl.requests]
    assert all(r["hash_ids"] == [] for r in rows)
    replay = traces.load_trace(str(path))  # the file's arrivals, in seconds, no reuse
    assert [q.arrival_s for q in replay] == pytest.approx([r.t for r in wl.requests], abs=1e-6)
    assert [q.n_input for q in replay] == [r.prompt_len for r in wl.requests] and not any(q.reused for q in replay)
    # --arrival poisson at the point's rate and seed: the arrivals bench.run sends
    drawn = traces.load_trace(str(path), arrival="poisson", rate=14.0, seed=0)
    assert [q.arrival_s for q in drawn] == pytest.approx([r.t for r in wl.requests], abs=1e-12)
    with pytest.raises(ValueError, match="chat sessions"):
        W.trace_rows(W.chat_workload(n_sessions=2, rate=1.0))
    with pytest.raises(ValueError, match="a trace already"):
        W.trace_rows(W.build("conversation", rate=1.0, duration_s=5))


def test_the_trace_command_writes_a_bench_run_points_requests(tmp_path, capsys):
    from bench import run
    from sglang_mux import sim
    out = tmp_path / "chat.jsonl"
    assert W.main(["chat-1k", "--rate", "4", "--duration-s", "10", "--out", str(out)]) == 0
    assert "40 requests" in capsys.readouterr().out
    a = run.parse_args(["--systems", "stub", "--workload", "chat-1k", "--rates", "4", "--duration-s", "10",
                        "--out", str(tmp_path / "o")])
    point = run.build_workload(a, 4.0)  # the same lengths as the point bench.run would send
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [(r["input_length"], r["output_length"]) for r in rows] == \
        [(q.prompt_len, q.max_new_tokens) for q in point.requests]
    a = sim.main(["--table", "llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3", "--trace", str(out), "--json"])
    res = json.loads(capsys.readouterr().out)
    assert a == 0 and res["setup"]["requests"] == 40 and res["setup"]["reused_share"] == 0


def test_the_trace_command_refuses_what_has_no_trace_form(tmp_path, capsys):
    from sglang_mux import cli
    for argv, want in ((["chat", "--rate", "1"], "invalid choice: 'chat'"), (["code", "--rate", "0"], "must be > 0")):
        with pytest.raises(SystemExit) as e:
            cli.run(W.main, argv + ["--out", str(tmp_path / "x.jsonl")])
        err = capsys.readouterr().err
        assert e.value.code == 2 and err.startswith("error: ") and want in err and err.count("\n") == 1
