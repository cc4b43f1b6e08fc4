"""What a newcomer meets first: --help and start-up without the serving extra, and contention
tables that a non-editable install finds too."""

import fnmatch
import importlib.util
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from sglang_mux import tables

ROOT = Path(__file__).resolve().parents[1]
no_sglang = pytest.mark.skipif(importlib.util.find_spec("sglang") is not None,
                               reason="sglang is installed: the no-sglang path does not run")


def _launch(*args):
    return subprocess.run([sys.executable, "-m", "sglang_mux.launch_server", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


@no_sglang
def test_help_without_sglang_lists_mux_flags_and_how_to_install():
    r = _launch("--help")
    assert r.returncode == 0, r.stderr
    assert "--mux-tbt-slo-ms" in r.stdout and "--mux-contention-table" in r.stdout
    assert "pip install 'sglang_mux[serve]'" in r.stdout and "Traceback" not in r.stdout + r.stderr


@no_sglang
def test_start_without_sglang_fails_in_one_line():
    r = _launch("--model-path", "launch/models/llama-3.1-8b")
    assert r.returncode == 1
    assert r.stderr.startswith("sglang_mux: error: SGLang is not installed") and "[serve]" in r.stderr
    assert "Traceback" not in r.stderr


def test_tables_root_order(monkeypatch, tmp_path):
    monkeypatch.setenv("SGLANG_MUX_TABLES", str(tmp_path))
    assert tables.tables_root() == tmp_path
    monkeypatch.delenv("SGLANG_MUX_TABLES")
    assert tables.tables_root() == ROOT / "contention_tables"  # the checkout
    # An installed package (no checkout beside it) reads its own copy.
    monkeypatch.setattr(tables, "__file__", str(tmp_path / "site" / "sglang_mux" / "tables.py"))
    assert tables.tables_root() == tmp_path / "site" / "sglang_mux" / "contention_tables"


def test_resolve_table_by_name_or_path(monkeypatch, tmp_path):
    name = "llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3"
    assert tables.resolve_table(name) == ROOT / "contention_tables" / name
    assert tables.resolve_table(f"contention_tables/{name}").name == name
    monkeypatch.chdir(tmp_path)  # not in the checkout: the name still finds the shipped table
    assert tables.resolve_table(name) == ROOT / "contention_tables" / name
    with pytest.raises(tables.TableError, match="shipped tables: .*" + name):
        tables.resolve_table("no-such-table")


def test_every_table_file_is_package_data():
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "sglang_mux.contention_tables" in cfg["packages"]
    assert cfg["package-dir"]["sglang_mux.contention_tables"] == "contention_tables"
    globs = cfg["package-data"]["sglang_mux.contention_tables"]
    files = [p.relative_to(ROOT / "contention_tables").as_posix()
             for p in (ROOT / "contention_tables").rglob("*") if p.is_file()]
    assert any(f.endswith("/fit.json") for f in files)
    missed = [f for f in files if not any(fnmatch.fnmatch(f, g) and f.count("/") == g.count("/") for g in globs)]
    assert missed == []
