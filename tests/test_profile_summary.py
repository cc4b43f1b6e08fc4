"""bench.analysis.profile_summary: CUDA runtime calls and CPU operators of a torch-profiler trace."""
import gzip
import json

import pytest

from bench.analysis import profile_summary as P
from sglang_mux.cli import UsageError


def _trace(tmp_path, gz=True):
    ev = [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": 1, "tid": 7, "ts": 0, "dur": 40},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": 1, "tid": 7, "ts": 100, "dur": 60},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": 1, "tid": 7, "ts": 200, "dur": 9000},
        {"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "pid": 1, "tid": 7, "ts": 150, "dur": 9100},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 3, "ts": 0, "dur": 5000},  # GPU: not counted
        {"ph": "i", "cat": "cpu_op", "name": "instant", "pid": 1, "tid": 7, "ts": 0},  # not a complete event
    ]
    p = tmp_path / ("t.json.gz" if gz else "t.json")
    with (gzip.open(p, "wt") if gz else open(p, "w")) as f:
        json.dump({"traceEvents": ev}, f)
    return p


def test_runtime_calls_are_tabled_by_total_time(tmp_path, capsys):
    ev = P.load_events(_trace(tmp_path))
    assert sorted(ev.kind.unique()) == ["cpu_op", "cuda_runtime"] and len(ev) == 4
    rt = P.by_name(ev, "cuda_runtime", top=5)
    assert list(rt.index) == ["cudaStreamSynchronize", "cudaGraphLaunch"]  # the wait first: most time
    assert rt.loc["cudaGraphLaunch"].tolist() == [2, 0.1, 0.05, 0.06]
    assert P.main([str(_trace(tmp_path, gz=False)), "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "| `cudaStreamSynchronize` | 1 | 9.00 | 9.000 | 9.00 |" in out and "cudaGraphLaunch" not in out


def test_a_file_that_is_no_trace_says_what_to_give(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("not json")
    with pytest.raises(UsageError, match="/stop_profile"):
        P.load_events(bad)
    bad.write_text(json.dumps({"other": 1}))
    with pytest.raises(UsageError, match="traceEvents"):
        P.load_events(bad)


def test_waits_for_the_gpu_are_tabled_by_the_step_and_operator_that_made_them(tmp_path, capsys):
    ev = P.load_events(_trace(tmp_path))
    extra = [("user_annotation", "scheduler.run_batch", 1, 7, 100.0, 20000.0),
             ("user_annotation", "scheduler.process_batch_result", 1, 7, 30000.0, 5000.0),
             ("cuda_runtime", "cudaEventSynchronize", 1, 7, 31000.0, 2000.0),
             ("cuda_runtime", "cudaStreamSynchronize", 1, 8, 0.0, 500.0)]  # another thread: nothing around it
    ev = P.pd.concat([ev, P.pd.DataFrame(extra, columns=ev.columns)], ignore_index=True)
    t = P.syncs_by_caller(ev)
    assert list(t.index) == ["cudaStreamSynchronize in scheduler.run_batch / aten::copy_",
                             "cudaEventSynchronize in scheduler.process_batch_result / -",
                             "cudaStreamSynchronize in - / -"]
    assert t.iloc[0].tolist() == [1, 9.0, 9.0, 9.0]
    assert P.syncs_by_caller(ev[~ev.name.isin(["cudaStreamSynchronize", "cudaEventSynchronize"])]).empty
    assert P.main([str(_trace(tmp_path))]) == 0
    assert "| `cudaStreamSynchronize in - / aten::copy_` | 1 | 9.00 |" in capsys.readouterr().out
