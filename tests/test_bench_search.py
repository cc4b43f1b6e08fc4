"""bench.run --search: the goodput found by bisection, resumable from the points on disk."""
import json
import socket

import pytest

from bench import run
from bench.search import bracket, next_rate


def test_bisection_by_hand():
    assert next_rate({}, 2, 6) == 2
    assert next_rate({2: False}, 2, 6) is None                       # goodput < lo
    assert next_rate({2: True}, 2, 6) == 6
    assert next_rate({2: True, 6: True}, 2, 6) is None               # goodput >= hi
    assert next_rate({2: True, 6: False}, 2, 6) == 4
    assert next_rate({2: True, 6: False, 4: True}, 2, 6) == 5
    assert next_rate({2: True, 6: False, 4: True, 5: False}, 2, 6) == 4.5   # 4.5 +- 11 %
    r = {2: True, 6: False, 4: True, 5: False, 4.5: True}
    assert next_rate(r, 2, 6) == 4.75                                # [4.5, 5): 4.75 +- 5.3 %
    r[4.75] = False
    assert next_rate(r, 2, 6) is None and bracket(r) == (4.5, 4.75)  # [4.5, 4.75): 4.625 +- 2.7 %
    with pytest.raises(ValueError):
        next_rate({}, 3, 3)


def test_tolerance_and_noise():
    r = {2: True, 6: False, 4: True, 5: False, 4.5: True, 4.75: False}
    assert next_rate(r, 2, 6, tol=0.01) == 4.62                      # 3 significant digits
    # a pass above a failure (noise) does not raise the lower bound
    assert bracket({2: True, 3: False, 4: True}) == (2, 3)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_search_with_the_stub_resumes(tmp_path):
    """The stub passes every rate its TBT allows; the search climbs to hi, then a second
    invocation replays the points and runs nothing new."""
    args = ["--systems", "stub", "--workload", "sharegpt", "--search", "1,3", "--duration-s", "1",
            "--out", str(tmp_path), "--port", str(free_port()), "--drain-s", "10", "--no-progress",
            "--warmup", "1", "--output-cap", "4", "--server-args", "--ttft-ms 5 --tbt-ms 2",
            "--client-procs", "1"]
    assert run.main(args) == 0
    s = json.loads((tmp_path / "summary.json").read_text())
    st = s["systems"]["stub"]
    assert [p["rate"] for p in st["points"]] == [1.0, 3.0]
    assert st["search"]["goodput_interval"] == [3.0, None] and st["goodput_rps"] == 3.0
    mtimes = {p.name: p.stat().st_mtime_ns for p in tmp_path.glob("stub__*.jsonl")}
    assert run.main(args) == 0
    assert {p.name: p.stat().st_mtime_ns for p in tmp_path.glob("stub__*.jsonl")} == mtimes


def test_search_arguments_are_checked():
    base = ["--systems", "stub", "--out", "x"]
    for bad in (["--search", "3,2"], ["--search", "x"], ["--search", "1,2", "--rates", "1"], []):
        with pytest.raises(SystemExit):
            run.parse_args(base + bad)
