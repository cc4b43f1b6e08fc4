"""What a newcomer meets first: --help and start-up without the serving extra, contention
tables that a non-editable install finds too, and the wheel: only `sglang_mux`, with its tables
and data, and no GPU or benchmark library among its core dependencies."""

import importlib.util
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
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
    assert r.returncode == 2  # a setup the user can fix: the status of every other tool's error line
    assert r.stderr.startswith("error: SGLang is not installed") and r.stderr.count("\n") == 1
    assert "pip install -e '.[serve]'" in r.stderr and "offline wheel bundle" in r.stderr
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


GPU_OR_BENCH_ONLY = ("cuda-python", "matplotlib", "aiohttp")  # never a core dependency


def _requirements(meta: str) -> dict[str, set[str]]:
    """METADATA's Requires-Dist by extra ("" = core) as bare lower-case project names."""
    out: dict[str, set[str]] = {}
    for line in meta.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req, _, marker = line.split(":", 1)[1].partition(";")
        name = re.split(r"[<>=!~\[ ]", req.strip(), maxsplit=1)[0].lower()
        m = re.search(r"extra == ['\"]([^'\"]+)", marker)
        out.setdefault(m.group(1) if m else "", set()).add(name)
    return out


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel built from a copy of the checkout (bench/ and profiling/ included, so that
    leaving them out is the packaging's doing), as {name: bytes-less ZipInfo}, plus METADATA."""
    import setuptools

    if tuple(int(x) for x in setuptools.__version__.split(".")[:2]) < (70, 1) and not importlib.util.find_spec("wheel"):
        pytest.skip(f"setuptools {setuptools.__version__} cannot build a wheel without the `wheel` package "
                    f"(the test extra installs setuptools>=70.1: pip install -e '.[test]')")
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    junk = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "results")
    for d in ("sglang_mux", "contention_tables", "bench", "profiling"):
        shutil.copytree(ROOT / d, src / d, ignore=junk)
    out = tmp_path_factory.mktemp("dist")
    code = "import sys; from setuptools import build_meta; print(build_meta.build_wheel(sys.argv[1]))"
    r = subprocess.run([sys.executable, "-c", code, str(out)], cwd=src, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    whl = out / r.stdout.strip().splitlines()[-1]
    with zipfile.ZipFile(whl) as z:
        names = z.namelist()
        dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        meta = z.read(f"{dist_info}/METADATA").decode()
        entry = z.read(f"{dist_info}/entry_points.txt").decode()
    return {"src": src, "names": set(names), "dist_info": dist_info, "meta": meta, "entry_points": entry}


def test_wheel_installs_only_sglang_mux(wheel):
    assert {n.split("/")[0] for n in wheel["names"]} == {"sglang_mux", wheel["dist_info"]}
    assert wheel["dist_info"].startswith("sglang_mux-")
    assert "sglang-mux = sglang_mux.launch_server:main" in wheel["entry_points"]


def test_wheel_holds_every_module_table_and_data_file(wheel):
    """Every module of every subpackage (a subpackage missing from pyproject's list fails
    here), every shipped table file and the bundled tokenizer and trace slices."""
    src = wheel["src"]
    modules = {p.relative_to(src).as_posix() for p in (src / "sglang_mux").rglob("*.py")}
    assert modules - wheel["names"] == set()
    tables_ = {"sglang_mux/" + p.relative_to(src).as_posix()
               for p in (src / "contention_tables").rglob("*") if p.is_file()}
    assert any(f.endswith("/fit.json") for f in tables_)
    assert tables_ - wheel["names"] == set()
    data = {"sglang_mux/" + p.relative_to(src / "sglang_mux").as_posix()
            for p in (src / "sglang_mux" / "data").rglob("*") if p.is_file()}
    assert "sglang_mux/data/tokenizer/tokenizer.json" in data
    assert any(f.startswith("sglang_mux/data/traces/") and f.endswith(".jsonl") for f in data)
    assert data - wheel["names"] == set()


def test_core_dependencies_need_no_gpu_and_no_bench(wheel):
    req = _requirements(wheel["meta"])
    assert {"numpy", "pandas", "scipy"} <= req[""]
    assert not req[""] & set(GPU_OR_BENCH_ONLY), req[""]
    assert "cuda-python" in req["serve"] and {"sglang", "torch"} <= req["serve"]
    assert {"matplotlib", "aiohttp"} <= req["bench"]
    assert req["bench"] <= req["test"] and "transformers" in req["test"]


def test_package_imports_no_gpu_or_bench_library_at_import_time():
    """Every sglang_mux module imports with cuda-python, matplotlib and aiohttp made
    unimportable (only torch/sglang may be missing: the serving modules need them)."""
    code = textwrap.dedent("""
        import importlib, pkgutil, sys
        BLOCK = ("cuda", "matplotlib", "aiohttp")
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCK:
                    raise ImportError(f"blocked: {name}")
        sys.meta_path.insert(0, Block())
        import sglang_mux
        bad = []
        for m in pkgutil.walk_packages(sglang_mux.__path__, "sglang_mux."):
            try:
                importlib.import_module(m.name)
            except ImportError as e:
                if "blocked" in str(e):
                    bad.append(f"{m.name}: {e}")
                elif (e.name or "").split(".")[0] not in ("torch", "sglang", "triton"):
                    raise
        print(chr(10).join(bad))
        sys.exit(1 if bad else 0)
    """)
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_package_imports_nothing_from_the_checkout_tools():
    """bench/ and profiling/ are not installed: a module of sglang_mux that imports them fails
    after `pip install .` (outside the checkout)."""
    pat = re.compile(r"^\s*(?:from|import)\s+(?:bench|profiling)\b", re.M)
    hits = [f"{p.relative_to(ROOT)}: {m.group(0).strip()}" for p in sorted((ROOT / "sglang_mux").rglob("*.py"))
            for m in pat.finditer(p.read_text(encoding="utf-8"))]
    assert hits == []
