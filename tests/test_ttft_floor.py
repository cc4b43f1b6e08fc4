"""Session sampling keeps whole sessions; the TTFT floor is each prompt alone on the whole GPU."""
import json

import numpy as np
import pytest

from bench import run, ttft_floor, workloads
from sglang_mux import sim
from sglang_mux.estimator import Estimator
from sglang_mux.latency_model import PrefillReq
from sglang_mux.sim import TraceReq, load_trace

SLICE = "bench/data/conversation_first1000.jsonl"
TABLE = "contention_tables/llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3"


def rows():
    return [json.loads(x) for x in open(SLICE)]


def session(r):
    return r["hash_ids"][1] if len(r["hash_ids"]) > 1 else None


def test_sample_sessions_keeps_every_turn_of_a_kept_session():
    all_rows = rows()
    kept = workloads.sample_sessions(all_rows, 4)
    assert 0 < len(kept) < len(all_rows)
    ids = {session(r) for r in kept}
    # whole sessions: every row of a kept session is kept, in the trace's order
    assert kept == [r for r in all_rows if session(r) in ids]
    assert workloads.sample_sessions(all_rows, 1) == all_rows
    with pytest.raises(ValueError, match="one session in N"):
        workloads.sample_sessions(all_rows, 0)


def test_session_sample_reaches_the_workload_and_the_simulator():
    wl = workloads.build("conversation", rate=2.0, duration_s=10, trace_path_=SLICE, session_sample=4)
    assert wl.options["session_sample"] == 4
    first = workloads.sample_sessions(rows(), 4)[:20]
    assert [r.meta["trace_input_length"] for r in wl.requests] == [r["input_length"] for r in first]
    sim = load_trace(SLICE, limit=20, session_sample=4)
    assert [r.n_input for r in sim] == [r["input_length"] for r in first]
    with pytest.raises(ValueError, match="applies to the traces"):
        workloads.build("sharegpt", rate=1.0, duration_s=5, session_sample=2)


def test_floor_is_each_prompt_alone_on_the_whole_gpu():
    est = Estimator.from_table(TABLE)
    reqs = [TraceReq("a", 0.0, 8000, 10, 0), TraceReq("b", 0.0, 8000, 10, 7000)]
    t = ttft_floor.floor_s(est, reqs, 132)
    assert t[0] == pytest.approx(est.prefill_ms(132, [PrefillReq(8000, 0)]) / 1e3)
    assert t[1] == pytest.approx(est.prefill_ms(132, [PrefillReq(1000, 7000)]) / 1e3)
    assert t[1] < t[0]                                   # a cached prefix is not prefilled again


def test_summary_marks_a_p99_slo_infeasible_from_one_percent_over():
    t = np.array([0.1] * 98 + [6.0, 7.0])                # 2 % over 5 s: no P99 can hold
    s = ttft_floor.summarize(t, [5.0, 10.0])
    assert s["share_over"] == {"5s": 0.02, "10s": 0.0}
    assert s["p99_feasible"] == {"5s": False, "10s": True} and s["max_s"] == 7.0


def test_cli(capsys):
    assert ttft_floor.main(["--table", TABLE, "--trace", SLICE, "--limit", "50", "--slos-s", "5"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["requests"] == 50 and res["total_sms"] == 132 and set(res["share_over"]) == {"5s"}
    with pytest.raises(SystemExit):
        ttft_floor.main(["--table", "contention_tables/nope", "--trace", SLICE])
    assert "no table directory" in capsys.readouterr().err


def test_length_aware_floor_takes_k_ms_a_prompt_token_off_each_floor(capsys):
    argv = ["--table", TABLE, "--trace", SLICE, "--limit", "50", "--slos-s", "0.001"]
    assert ttft_floor.main(argv) == 0
    flat = json.loads(capsys.readouterr().out)
    assert ttft_floor.main([*argv, "--ttft-ms-per-token", "0.2"]) == 0
    aware = json.loads(capsys.readouterr().out)
    reqs = load_trace(SLICE, limit=50)
    t = ttft_floor.floor_s(Estimator.from_table(TABLE), reqs, 132) - 0.2e-3 * np.array([r.n_input for r in reqs])
    assert aware["ttft_ms_per_token"] == 0.2 and flat["ttft_ms_per_token"] == 0.0
    assert aware["max_s"] == round(float(t.max()), 3) < flat["max_s"]
    assert aware["share_over"]["0.001s"] == round(float((t > 0.001).mean()), 4) < flat["share_over"]["0.001s"] == 1.0


@pytest.mark.parametrize("cli", ["ttft_floor", "sim", "run"])
def test_a_session_sample_under_one_is_refused(cli, capsys):
    argv = ["--session-sample", "0"]
    with pytest.raises(SystemExit):
        if cli == "run":
            run.parse_args(["--systems", "mux", "--out", "/tmp/unused", "--rates", "1", *argv])
        else:
            (ttft_floor.main if cli == "ttft_floor" else sim.main)(["--table", TABLE, "--trace", SLICE, *argv])
    assert "give K >= 1" in capsys.readouterr().err
