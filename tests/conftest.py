"""Shared test setup: GPU tests (tests/gpu/, marker `gpu`) skip with the reason when no CUDA
device or no sglang==0.5.16 is present, so the CPU suite runs anywhere; the synthetic-table
fixtures ``good`` and ``table`` that the table and estimator tests share."""

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


def pytest_collection_modifyitems(config, items):
    gpu_items = [it for it in items if "gpu" in it.keywords or "/gpu/" in str(it.fspath).replace(os.sep, "/")]
    if not gpu_items:
        return
    reason = _gpu_skip_reason()
    for it in gpu_items:
        it.add_marker(pytest.mark.gpu)
        if reason:
            it.add_marker(pytest.mark.skip(reason=f"GPU test skipped: {reason}"))


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    """A complete synthetic table (tests/synth_tables.py), written once per module; read it only."""
    from synth_tables import TABLE_NAME, write_synthetic_table

    return write_synthetic_table(tmp_path_factory.mktemp("synth") / TABLE_NAME)


@pytest.fixture
def table(good, tmp_path):
    """A copy of ``good`` of this test's own, to edit."""
    dst = tmp_path / good.name
    shutil.copytree(good, dst)
    return dst
