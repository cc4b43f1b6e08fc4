"""The profiling grid (profiling/grid.py): counts, caps, cost estimate, the --plan-only CLI."""

import os
import subprocess
import sys
from collections import Counter

import pytest

from profiling import grid as G
from sglang_mux.tables import MODEL_KEYS, ModelShape

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LLAMA = os.path.join(ROOT, "launch/models/llama-3.1-8b/config.json")
QWEN = os.path.join(ROOT, "launch/models/qwen3-8b/config.json")
H100 = G.GpuSpec(mem_gib=79.2)
H200 = G.GpuSpec(mem_gib=139.8)
MUX_DECODE = [16, 32, 48, 64, 80, 96, 112]
MUX_PREFILL = [132 - d for d in MUX_DECODE]


@pytest.fixture(scope="module")
def llama():
    return ModelShape.from_config(LLAMA)


def test_sglang_capture_list_is_sglangs_default():
    bs = G.sglang_decode_capture_bs(256)
    assert bs[:6] == [1, 2, 4, 8, 12, 16]
    assert bs[-1] == 256 and all(b % 8 == 0 for b in bs[5:])
    assert len(bs) == 36 and bs == sorted(set(bs))
    assert G.sglang_decode_capture_bs(160)[-1] == 160


def test_model_shape_from_config(llama, tmp_path):
    assert (llama.num_layers, llama.hidden_size, llama.num_kv_heads, llama.context_len) == (32, 4096, 8, 131072)
    assert llama.name == "llama-3.1-8b"
    assert llama.kv_bytes_per_token == 32 * 2 * 8 * 128 * 2
    assert 15e9 < llama.weight_bytes < 17e9  # ~8B params in bf16
    assert set(llama.to_dict()) == {"architecture", "num_layers", "hidden_size", "num_heads", "num_kv_heads",
                                    "head_dim", "intermediate_size", "vocab_size"}
    assert ModelShape.from_config(os.path.dirname(LLAMA)) == llama  # the directory works too
    with pytest.raises(FileNotFoundError, match="config.json"):
        ModelShape.from_config(tmp_path)


def test_name_and_context_do_not_split_a_shape(llama):
    """The profiler's shape is the tables' shape: what meta.json records reads back equal (one
    table per shape), whatever the checkpoint's name or context length."""
    back = ModelShape.from_meta(llama.to_dict())
    assert back == llama and hash(back) == hash(llama) and back.mismatches(llama) == []
    assert (back.name, back.context_len) == ("model", None)
    assert list(back.to_dict()) == MODEL_KEYS
    other = ModelShape(**{**llama.to_dict(), "num_kv_heads": 4}, name=llama.name, context_len=llama.context_len)
    assert other != llama and other.mismatches(llama) == ["num_kv_heads 4 != 8"]


@pytest.mark.parametrize("gpu", [H100, H200], ids=["h100", "h200"])
def test_coarse_plan_covers_every_partition(llama, gpu):
    plan = G.make_plan(llama, gpu, "coarse")
    by = Counter(c.kind for c in plan.cells)
    assert all(by[k] > 0 for k in G.KINDS)
    pre = Counter(c.prefill_sms for c in plan.cells if c.kind == G.KIND_SOLO_PREFILL)
    dec = Counter(c.decode_sms for c in plan.cells if c.kind == G.KIND_SOLO_DECODE)
    con = Counter(c.decode_sms for c in plan.cells if c.kind == G.KIND_CONTENTION)
    # every partition the engine uses, and enough rows for the estimator's held-out check
    assert set(pre) == set(MUX_PREFILL) | {132} and min(pre.values()) >= 8
    assert set(dec) == set(MUX_DECODE) | {132} and min(dec.values()) >= 6
    assert set(con) == set(MUX_DECODE)
    # the same guard axes on every partition (grid corners exist everywhere)
    axes = {d: {(c.n, c.r, c.decode_bs, c.decode_reused) for c in plan.cells
                if c.kind == G.KIND_CONTENTION and c.decode_sms == d} for d in MUX_DECODE}
    assert len({frozenset(v) for v in axes.values()}) == 1
    pts = next(iter(axes.values()))
    assert {p[1] for p in pts} >= {0} and len({p[0] for p in pts}) >= 2 and len({p[2] for p in pts}) >= 3
    # bs>1 and r>0 prefill rows: Eq. 1's Σn·r and Σn² are not collinear
    assert any(c.prefill_bs > 1 for c in plan.cells if c.kind == G.KIND_SOLO_PREFILL)
    assert any(c.r > 0 for c in plan.cells if c.kind == G.KIND_SOLO_PREFILL)


@pytest.mark.parametrize("gpu", [H100, H200], ids=["h100", "h200"])
def test_coarse_fits_25_minutes_in_runs_of_9(llama, gpu):
    plan = G.make_plan(llama, gpu, "coarse")
    runs = plan.split_runs(500)
    assert all(plan.startup_s + plan.total_cells_s(r) <= 540 for r in runs)
    total = plan.total_cells_s() + len(runs) * plan.startup_s
    assert total <= 25 * 60, f"coarse grid estimated at {total / 60:.1f} min"
    assert len(runs) <= 3


def test_paper_grid_is_the_papers(llama):
    plan = G.make_plan(llama, H200, "paper")
    con = [c for c in plan.cells if c.kind == G.KIND_CONTENTION and c.decode_sms == 64]
    combos = {(c.n, c.r) for c in con}
    # new x reused at powers of 4 (reused may be 0), clipped to the 128K context: 2K/8K/32K x 5 + 128K x {0}
    assert {n for n, _ in combos} == set(G.POW4)
    assert len(combos) == 16 and (128 * 1024, 0) in combos
    assert max(n + r for n, r in combos) <= llama.context_len
    assert {c.decode_bs for c in con} == set(G.sglang_decode_capture_bs(256))
    assert len(plan.cells) > 3 * len(G.make_plan(llama, H200, "coarse").cells)


def test_caps_context_and_pool(llama):
    for gpu in (H100, H200):
        for grid in G.GRIDS:
            plan = G.make_plan(llama, gpu, grid)
            cap = plan.kv_pool_tokens * G.KV_MARGIN
            for c in plan.cells:
                assert c.kv_tokens <= cap
                if c.kind != G.KIND_SOLO_DECODE:
                    assert c.n + c.r <= llama.context_len
                if c.kind != G.KIND_SOLO_PREFILL:
                    assert c.decode_reused + 1 <= llama.context_len
                    assert c.decode_bs in plan.capture_bs
    small = G.make_plan(llama, H100, "coarse", kv_pool_tokens=60_000)
    big = G.make_plan(llama, H100, "coarse", kv_pool_tokens=600_000)
    assert len(small.cells) < len(big.cells)
    assert any("KV" in r for _, r in small.skipped)
    assert all(c.kv_tokens <= 60_000 * G.KV_MARGIN for c in small.cells)
    short = G.make_plan(ModelShape.from_hf_config({**llama.__dict__, "num_attention_heads": 32, "hidden_size": 4096,
                                                   "num_hidden_layers": 32, "intermediate_size": 14336,
                                                   "vocab_size": 128256, "max_position_embeddings": 32768}),
                        H100, "paper")
    assert all(c.n + c.r <= 32768 for c in short.cells if c.kind != G.KIND_SOLO_DECODE)
    assert all(c.decode_reused < 32768 for c in short.cells if c.kind != G.KIND_SOLO_PREFILL)


def test_replan_for_real_pool(llama):
    plan = G.make_plan(llama, H100, "coarse")
    re = G.replan_for_pool(plan, 100_000, 512, plan.capture_bs)
    assert re.cells and all(c.kv_tokens <= 100_000 * G.KV_MARGIN for c in re.cells)
    assert len(re.cells) + len(re.skipped) == len(plan.cells) + len(plan.skipped)


def test_clip_values():
    K = 1024
    assert G._clip_values([0, 2 * K, 8 * K, 32 * K, 128 * K], 128 * K - 2 * K) == [0, 2 * K, 8 * K, 32 * K, 126 * K]
    assert G._clip_values([2 * K, 8 * K], 100 * K) == [2 * K, 8 * K]
    assert G._clip_values([32 * K], 0) == []


def test_cell_keys_are_csv_keys_and_unique(llama):
    c = G.solo_prefill_cell(116, 132, 4, 2048, 8192)
    assert c.key == (116, 4, 4 * 2048 ** 2, 4 * 2048 * 8192, 4 * 2048)
    assert G.solo_prefill_cell(132, 132, 1, 8, 0).decode_sms == 0
    assert G.solo_decode_cell(32, 132, 8, 2048).key == (32, 8, 8 * 2048)
    assert G.contention_cell(48, 132, 2048, 0, 16, 8192).key == (48, 2048, 0, 16, 8192)
    for grid in G.GRIDS:
        plan = G.make_plan(llama, H200, grid)
        keys = [(c.kind, c.key) for c in plan.cells]
        assert len(keys) == len(set(keys))


def test_estimates_are_monotone(llama):
    assert G.est_prefill_ms(llama, H100, 20, [(8192, 0)]) > G.est_prefill_ms(llama, H100, 116, [(8192, 0)])
    assert G.est_prefill_ms(llama, H100, 132, [(8192, 32768)]) > G.est_prefill_ms(llama, H100, 132, [(8192, 0)])
    assert G.est_decode_ms(llama, H100, 16, 1, 2048) > G.est_decode_ms(llama, H100, 112, 1, 2048)
    assert G.est_decode_ms(llama, H100, 64, 64, 8192) > G.est_decode_ms(llama, H100, 64, 1, 8192)
    assert 1 <= G.layers_per_launch(llama, H100, 116, [(2048, 0)]) <= llama.num_layers
    assert G.layers_per_launch(llama, H100, 20, [(32768, 32768)]) == 1


def test_qwen_plan(llama):
    q = ModelShape.from_config(QWEN)
    plan = G.make_plan(q, H100, "coarse")
    assert q.num_layers == 36 and plan.cells


def _plan_only(*extra):
    return subprocess.run([sys.executable, "-m", "profiling.run", "--model-config", LLAMA, "--plan-only", *extra],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_plan_only_cli():
    p = _plan_only()
    assert p.returncode == 0, p.stderr
    assert "solo_prefill" in p.stdout and "contention" in p.stdout and "run(s)" in p.stdout
    assert "cells, est" in p.stdout
    assert "gemm curve: 560 of 560 points to do" in p.stdout  # 8 prefill partitions x 70 token counts
    p = _plan_only("--grid", "paper", "--what", "contention", "--gpu-mem-gib", "139.8")
    assert p.returncode == 0, p.stderr
    assert " 0 cells" in p.stdout.split("solo_decode")[1].splitlines()[0] and "gemm curve" not in p.stdout
    p = _plan_only("--out", os.path.join(ROOT, "contention_tables", "llama-3.1-8b__nvidia-h200__triton"))
    assert "gemm curve: 0 of 560 points to do" in p.stdout  # the shipped table has its curve
    p = _plan_only("--what", "nonsense")
    assert p.returncode == 2 and "--what" in p.stderr


def test_plan_only_at_tp_plans_a_ranks_slice():
    p1, p2 = _plan_only(), _plan_only("--tp-size", "2")
    assert p2.returncode == 0, p2.stderr
    assert p2.stdout != p1.stdout  # a rank's weights leave a larger KV pool: other caps
    p = _plan_only("--tp-size", "3")
    assert p.returncode == 2 and "--tp-size 3 does not divide 32 attention heads" in p.stderr


def test_a_tp_run_profiles_a_ranks_config(tmp_path):
    from profiling import run
    from sglang_mux.tables import ModelShape

    m = ModelShape.from_config(LLAMA)
    assert run.write_rank_config(LLAMA, m, 1) == LLAMA
    cfg = ModelShape.from_config(run.write_rank_config(LLAMA, m, 4))
    assert cfg.mismatches(m.per_rank(4)) == [] and cfg.num_heads == 8


def test_a_table_of_another_tp_is_not_resumed():
    from profiling.store import check_meta_compatible

    assert check_meta_compatible({"tp_size": 2}, {}) == ["tp_size: table has 2, this run 1"]
    assert check_meta_compatible({}, {"tp_size": 1}) == []


def test_plan_only_imports_no_torch(capsys):
    from profiling import run

    before = set(sys.modules)
    assert run.main(["--model-config", LLAMA, "--plan-only"]) == 0
    new = set(sys.modules) - before
    assert not any(m == "torch" or m.startswith("torch.") or m.startswith("sglang.") for m in new)
    assert "total:" in capsys.readouterr().out


def test_coarse_plus_solo_tops_up_a_coarse_table(llama):
    """Every coarse cell (same keys: a coarse table is topped up in place) plus the extra solo
    cells on every partition, with their decode graphs captured."""
    for gpu in (H100, H200):
        coarse = G.make_plan(llama, gpu, "coarse")
        dense = G.make_plan(llama, gpu, "coarse+solo")
        ck = {(c.kind, c.key) for c in coarse.cells}
        extra = [c for c in dense.cells if (c.kind, c.key) not in ck]
        assert ck <= {(c.kind, c.key) for c in dense.cells}
        assert {c.kind for c in extra} == {G.KIND_SOLO_PREFILL, G.KIND_SOLO_DECODE}
        assert {2, 4, 16} <= set(dense.capture_bs) and set(coarse.capture_bs) <= set(dense.capture_bs)
        pre = Counter(c.prefill_sms for c in extra if c.kind == G.KIND_SOLO_PREFILL)
        dec = Counter(c.decode_sms for c in extra if c.kind == G.KIND_SOLO_DECODE)
        assert set(pre) == set(MUX_PREFILL) | {132} and set(pre.values()) == {len(G.SOLO_PREFILL_EXTRA)}
        assert set(dec) == set(MUX_DECODE) | {132}
        # On the H200's pool every extra decode cell fits.
        if gpu is H200:
            assert set(dec.values()) == {len(G.SOLO_DECODE_EXTRA)}
        assert dense.total_cells_s(extra) < 0.35 * coarse.total_cells_s()
    assert G.grid_spec("coarse").solo_prefill_extra == () == G.grid_spec("coarse").solo_decode_extra


def test_plan_counts_what_a_run_spends_before_and_after_its_cells(llama):
    """A run starts a cell only while start-up, the cell's estimate x BUDGET_SAFETY and the end's
    reserve fit its budget: the plan splits by that rule, and a budget below it is said."""
    plan = G.make_plan(llama, H100, "coarse+solo", what=[G.KIND_SOLO_DECODE])
    overhead = plan.startup_s + G.FIT_RESERVE_S
    assert plan.run_overhead_s == overhead
    for r in plan.split_runs(400):
        assert len(r) == 1 or overhead + G.BUDGET_SAFETY * plan.total_cells_s(r) <= 400
    assert "budget too small" in plan.format(overhead)
    assert "budget too small" not in plan.format(400)
