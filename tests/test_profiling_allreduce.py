"""profiling.allreduce on the CPU: its summaries and verdicts, and its refusals."""
import subprocess
import sys
from pathlib import Path

import pytest

from profiling import allreduce as AR

ROOT = Path(__file__).resolve().parent.parent


def test_a_cell_is_its_median_and_range():
    assert AR.summarize([3.0, 1.0, 2.0, 10.0]) == {"ms": 2.5, "min_ms": 1.0, "max_ms": 10.0, "n": 4}


def test_confinement_compares_the_lane_with_the_whole_gpu():
    c = AR.confinement(alone_ms=10.0, beside_lane_ms=10.5, beside_full_ms=14.0, lane_ar_ms=20.0, full_ar_ms=20.0)
    assert c == {"alone_ms": 10.0, "slowdown_beside_lane": 1.05, "slowdown_beside_full_gpu": 1.4, "covered": True}
    # All-reduces that ended before the matmul did not sit beside it throughout: said.
    assert not AR.confinement(10.0, 10.5, 14.0, lane_ar_ms=5.0, full_ar_ms=20.0)["covered"]


def _run(*args):
    return subprocess.run([sys.executable, "-m", "profiling.allreduce", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_it_needs_two_ranks_and_a_gpu(tmp_path):
    p = _run("--tp-size", "1", "--out", str(tmp_path / "a.json"))
    assert p.returncode == 2 and "at least 2" in p.stderr
    p = _run("--tp-size", "2", "--out", str(tmp_path / "a.json"), "--tokens", "1,x")
    assert p.returncode == 2 and "--tokens" in p.stderr
    try:
        import torch

        if torch.cuda.is_available():
            pytest.skip("a GPU is here: the refusal is for machines without one")
    except ImportError:
        pass
    p = _run("--tp-size", "2", "--out", str(tmp_path / "a.json"))
    assert p.returncode == 2 and "measures on a GPU" in p.stderr


def test_the_confinement_all_reduces_outlast_the_matmul_loop():
    """Twice the loop alone, in whole all-reduces, and never fewer than ten (a 16K-token one
    takes ~1 ms on 2 x H200, a 256-token one ~0.08)."""
    assert AR.covering_count(matmul_ms=18.0, all_reduce_ms=1.0) == 36
    assert AR.covering_count(matmul_ms=18.0, all_reduce_ms=0.08) == 450
    assert AR.covering_count(matmul_ms=1.0, all_reduce_ms=1.0) == 10
    assert AR.covering_count(matmul_ms=18.0, all_reduce_ms=0.0) == 36000  # a zero timing: bounded, not infinite
