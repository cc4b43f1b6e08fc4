"""Shared test setup: GPU tests (tests/gpu/, marker `gpu`) skip with the reason when no CUDA
device or no sglang==0.5.16 is present, so the CPU suite runs anywhere; the synthetic-table
fixtures that the table and estimator tests share: ``good``/``table`` (the full table) and
``small_good``/``small_table`` (fewer partitions, for the check/fit machinery), each written
and fitted once per session."""

import importlib.util
import os
import shutil
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
TESTS = os.path.dirname(os.path.abspath(__file__))
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)


def _gpu_skip_reason():
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed (GPU tests need torch 2.11 + CUDA)"
    import torch

    if not torch.cuda.is_available():
        return "no CUDA device"
    if importlib.util.find_spec("sglang") is None:
        return "sglang==0.5.16 is not installed (pip install '.[serve]')"
    return None


def pytest_configure(config):
    # The GPU tests load models onto the one GPU: two xdist workers doing so at once left no memory
    # for the KV cache (session 49's H200). Where they run, they share one xdist group, i.e. one
    # worker: the controller schedules by group, and a worker (which parses addopts' --dist anew)
    # names each test's group as xdist's loadgroup mode does.
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not (worker or getattr(config.option, "numprocesses", None)) or _gpu_skip_reason() is not None:
        return
    if worker:
        config.option.loadgroup = True
    elif config.option.dist != "no":
        config.option.dist = "loadgroup"


@pytest.hookimpl(tryfirst=True)  # before xdist's, which reads the groups
def pytest_collection_modifyitems(config, items):
    gpu_items = [it for it in items if "gpu" in it.keywords or "/gpu/" in str(it.fspath).replace(os.sep, "/")]
    if not gpu_items:
        return
    reason = _gpu_skip_reason()
    for it in gpu_items:
        it.add_marker(pytest.mark.gpu)
        if reason:
            it.add_marker(pytest.mark.skip(reason=f"GPU test skipped: {reason}"))
        else:
            it.add_marker(pytest.mark.xdist_group("gpu"))


@pytest.fixture(scope="session")
def _good_master(tmp_path_factory):
    from synth_tables import TABLE_NAME, write_synthetic_table

    return write_synthetic_table(tmp_path_factory.mktemp("synth-master") / TABLE_NAME)


@pytest.fixture(scope="session")
def _small_master(tmp_path_factory):
    from synth_tables import TABLE_NAME, write_small_synthetic_table

    return write_small_synthetic_table(tmp_path_factory.mktemp("small-master") / TABLE_NAME)


def _module_copy(master, tmp_path_factory, prefix):
    # Written (and fitted) once per session; each module reads its own copy in a directory of
    # its own (tests list and write the table's parent).
    dst = tmp_path_factory.mktemp(prefix) / master.name
    shutil.copytree(master, dst)
    return dst


@pytest.fixture(scope="module")
def good(_good_master, tmp_path_factory):
    """A complete synthetic table (tests/synth_tables.py, granularity 16: 7 partitions), one
    directory per module; read it only."""
    return _module_copy(_good_master, tmp_path_factory, "synth")


def _test_copy(src, tmp_path):
    dst = tmp_path / src.name
    shutil.copytree(src, dst)
    return dst


@pytest.fixture
def table(good, tmp_path):
    """A copy of ``good`` of this test's own, to edit."""
    return _test_copy(good, tmp_path)


@pytest.fixture(scope="module")
def small_good(_small_master, tmp_path_factory):
    """The small synthetic table (synth_tables.write_small_synthetic_table: decode 32/64/96,
    measured decode occupancy), one directory per module; read it only. Its held-out check
    and fit take ~1/8 of ``good``'s: for tests of the check/fit machinery."""
    return _module_copy(_small_master, tmp_path_factory, "small")


@pytest.fixture
def small_table(small_good, tmp_path):
    """A copy of ``small_good`` of this test's own, to edit."""
    return _test_copy(small_good, tmp_path)
