"""Every command-line tool of the project refuses ``nan``, ``inf``, ``0`` and a negative value
where they make no sense, and a missing input file: exit status 2, one ``error:`` line naming
the flag or the file, no traceback, no hang. The cases (and the table of what each answers:
``python tests/cli_matrix.py``) live in tests/cli_matrix.py."""

from pathlib import Path

import pytest

from cli_matrix import ROWS, problems, run_case


def _cases():
    for row in ROWS:
        for column in row.cells():
            yield pytest.param(row, column, id=f"{row.id}-{column.replace(' ', '_')}")


@pytest.mark.parametrize("row, column", list(_cases()))
def test_bad_number_or_missing_file(row, column, tmp_path, capsys):
    o = run_case(row, column, tmp_path)
    bad = problems(row, column, o, tmp_path)
    assert not bad, f"{row.tool} {row.flag or ''} {column}: {'; '.join(bad)}\nstderr: {o.err[-2000:]}"


def test_every_tool_with_a_main_has_a_row():
    """A new tool (a module of sglang_mux, bench or profiling run as ``python -m``; not the
    one-off scripts kept beside results) gets a row."""
    import re

    from cli_matrix import ROOT

    tools = set()
    for pkg in ("sglang_mux", "bench", "profiling"):
        for f in (ROOT / pkg).rglob("*.py"):
            rel = f.relative_to(ROOT)
            if "results" in rel.parts or rel == Path("sglang_mux/cli.py"):
                continue
            if f.name == "__main__.py":  # a package run as python -m
                tools.add(".".join(rel.parent.parts))
            elif re.search(r"^if __name__ == .__main__.:", f.read_text(), re.M):
                tools.add(".".join(rel.with_suffix("").parts))
    assert len(tools) > 40 and tools - {r.module for r in ROWS} == set()


def test_a_hang_fails_its_case_not_the_suite(tmp_path, monkeypatch):
    """The time limit works: a tool that never answers is a failed case within its limit."""
    import sys
    import time
    import types

    from cli_matrix import Row

    fake = types.ModuleType("fake_tool_that_hangs")

    def main(argv=None):
        while True:
            time.sleep(0.01)

    fake.main = main
    monkeypatch.setitem(sys.modules, "fake_tool_that_hangs", fake)
    row = Row("fake_tool_that_hangs", "--rate", ("--rate={v}",), timeout_s=0.5)
    t0 = time.monotonic()
    o = run_case(row, "nan", tmp_path)
    assert o.status is None and time.monotonic() - t0 < 5
    assert problems(row, "nan", o, tmp_path)[0].startswith("no answer within 0.5 s")
