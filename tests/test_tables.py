"""Table dirs: every malformed table fails loudly, naming the file and the problem."""

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from synth_tables import LLAMA_8B, TABLE_NAME as NAME, write_synthetic_table  # noqa: E402

from sglang_mux.tables import (ModelShape, TableError, find_table, other_tables, read_table,  # noqa: E402
                               slug, table_dirname, write_table)

ROOT = Path(__file__).resolve().parents[1]


def _edit_csv(path, fn):
    df = pd.read_csv(path)
    df = fn(df)
    df.to_csv(path, index=False)


def _edit_meta(path, fn):
    meta = json.loads((path / "meta.json").read_text())
    fn(meta)
    (path / "meta.json").write_text(json.dumps(meta))


def test_slugs():
    assert slug("NVIDIA H200") == "nvidia-h200"
    assert slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert slug("Llama-3.1-8B") == "llama-3.1-8b"
    assert table_dirname("llama-3.1-8b", "NVIDIA H200", "triton") == "llama-3.1-8b__nvidia-h200__triton" == NAME
    with pytest.raises(ValueError):
        slug("  / ")


def test_model_shape_from_hf_config_matches_meta():
    shape = ModelShape.coerce(ROOT / "launch/models/llama-3.1-8b/config.json")
    assert shape == ModelShape.from_meta(LLAMA_8B)
    qwen = ModelShape.coerce(json.loads((ROOT / "launch/models/qwen3-8b/config.json").read_text()))
    assert qwen.num_layers == 36 and qwen.mismatches(shape)
    # head_dim / kv heads default like HF does.
    s = ModelShape.from_hf_config({"num_attention_heads": 8, "hidden_size": 512, "num_hidden_layers": 2,
                                   "intermediate_size": 1024, "vocab_size": 100})
    assert s.head_dim == 64 and s.num_kv_heads == 8


def test_reads_good_table(good):
    t = read_table(good, model_shape=LLAMA_8B, gpu_name="NVIDIA H200", total_sms=132,
                   decode_sms=[16, 112], prefill_sms=[20, 116, 132])
    assert t.sm_count == 132 and t.granularity == 16 and t.model_shape.num_layers == 32
    assert t.fit is not None and t.guard is not None


def _rm(name):
    return lambda p: (p / name).unlink()


def _csv(name, fn):
    return lambda p: _edit_csv(p / name, fn)


def _set(col, row, value):
    def fn(df):
        df[col] = df[col].astype(object if isinstance(value, str) else float)
        df.loc[row, col] = value
        return df
    return fn


BAD = {
    "no meta": (_rm("meta.json"), "meta.json", "missing file"),
    "no solo_prefill": (_rm("solo_prefill.csv"), "solo_prefill.csv", "missing file"),
    "no solo_decode": (_rm("solo_decode.csv"), "solo_decode.csv", "missing file"),
    "no contention": (_rm("contention.csv"), "contention.csv", "missing file"),
    "no fit": (_rm("fit.json"), "fit.json", "missing file"),
    "no guard": (_rm("guard.json"), "guard.json", "missing file"),
    "missing column": (_csv("solo_decode.csv", lambda df: df.drop(columns=["sum_reused"])),
                       "solo_decode.csv", "missing column"),
    "NaN": (_csv("solo_prefill.csv", _set("sum_new_sq", 3, float("nan"))), "solo_prefill.csv", "NaN"),
    "negative latency": (_csv("solo_decode.csv", _set("latency_ms", 0, -1.0)), "solo_decode.csv", "negative"),
    "zero latency": (_csv("solo_prefill.csv", _set("latency_ms", 5, 0.0)), "solo_prefill.csv", "zero"),
    "zero corun": (_csv("contention.csv", _set("decode_corun_ms", 7, 0.0)), "contention.csv", "zero"),
    "negative tokens": (_csv("contention.csv", _set("prefill_reused", 2, -5.0)), "contention.csv", "negative"),
    "text in numbers": (_csv("solo_decode.csv", _set("bs", 1, "many")), "solo_decode.csv", "not numeric"),
    "empty csv": (lambda p: (p / "contention.csv").write_text(""), "contention.csv", "unreadable"),
    "header only": (lambda p: (p / "solo_decode.csv").write_text("decode_sms,bs,sum_reused,latency_ms\n"),
                    "solo_decode.csv", "no rows"),
    "bad json": (lambda p: (p / "meta.json").write_text("{not json"), "meta.json", "not valid JSON"),
    "meta key": (lambda p: _edit_meta(p, lambda m: m.pop("granularity")), "meta.json", "missing key"),
    "model key": (lambda p: _edit_meta(p, lambda m: m["model"].pop("head_dim")), "meta.json", "model lacks"),
    "sm_count": (lambda p: _edit_meta(p, lambda m: m.update(sm_count=0)), "meta.json", "positive integer"),
    "decode occupancy": (lambda p: _edit_meta(p, lambda m: m.setdefault("profiler", {}).update(
        decode_blocks_per_sm=0)), "meta.json", "decode_blocks_per_sm must be a positive integer"),
    "profiler shape": (lambda p: _edit_meta(p, lambda m: m.update(profiler=[])), "meta.json",
                       "profiler must be an object"),
    "fit shape": (lambda p: (p / "fit.json").write_text("[]"), "fit.json", "must be an object"),
    "guard shape": (lambda p: (p / "guard.json").write_text("{}"), "guard.json", "must be an object"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_table_names_file_and_problem(table, case):
    mutate, file, problem = BAD[case]
    mutate(table)
    with pytest.raises(TableError) as ei:
        read_table(table)
    msg = str(ei.value)
    assert file in msg and problem in msg, msg
    assert ei.value.file.endswith(file)


def test_other_gpu_model_or_sm_count(good):
    with pytest.raises(TableError, match=r"meta\.json: table was made on GPU 'NVIDIA H200', not on 'NVIDIA H100"):
        read_table(good, gpu_name="NVIDIA H100 80GB HBM3")
    qwen = ROOT / "launch/models/qwen3-8b/config.json"
    with pytest.raises(TableError, match=r"meta\.json: table was made for another model .*num_layers 32 != 36"):
        read_table(good, model_shape=qwen)
    with pytest.raises(TableError, match=r"meta\.json: .*132-SM device, this one has 114"):
        read_table(good, total_sms=114)


def test_sm_counts_not_in_table(good):
    with pytest.raises(TableError, match=r"solo_decode\.csv: SM counts \[24\] not in the table"):
        read_table(good, decode_sms=[16, 24])
    with pytest.raises(TableError, match=r"solo_prefill\.csv: SM counts \[10\] not in the table"):
        read_table(good, prefill_sms=[10])


def test_raw_table_without_fit(good, tmp_path):
    t = read_table(good)
    p = write_table(tmp_path / "raw", t.meta, t.solo_prefill, t.solo_decode, t.contention)
    assert read_table(p, require_fit=False).fit is None
    with pytest.raises(TableError, match="fit.json: missing file"):
        read_table(p)
    with pytest.raises(TableError, match="solo_decode.csv: missing column"):
        write_table(tmp_path / "bad", t.meta, t.solo_prefill, t.solo_decode.drop(columns=["bs"]), t.contention)
    assert not (tmp_path / "bad").exists()


def test_find_table(good, tmp_path):
    root = good.parent
    assert find_table(root, LLAMA_8B, "NVIDIA H200", "triton") == good
    assert find_table(root, ROOT / "launch/models/llama-3.1-8b/config.json", "nvidia-h200", "triton") == good
    assert find_table(root, LLAMA_8B, "NVIDIA H100 80GB HBM3", "triton") is None
    assert find_table(root, ROOT / "launch/models/qwen3-8b/config.json", "NVIDIA H200", "triton") is None
    assert find_table(tmp_path / "nowhere", LLAMA_8B, "NVIDIA H200", "triton") is None
    # A table of another attention backend is never picked, but is named for the message.
    assert find_table(root, LLAMA_8B, "NVIDIA H200", "fa3") is None
    assert other_tables(root, LLAMA_8B, "NVIDIA H200", "fa3") == [("triton", 1, good)]
    assert other_tables(root, LLAMA_8B, "NVIDIA H200", "triton", tp_size=2) == [("triton", 1, good)]
    assert other_tables(root, LLAMA_8B, "NVIDIA H200", "triton") == []
    # A broken neighbour is skipped, not fatal.
    (root / "broken__nvidia-h200").mkdir(exist_ok=True)
    (root / "broken__nvidia-h200" / "meta.json").write_text("{")
    assert find_table(root, LLAMA_8B, "NVIDIA H200", "triton") == good


def test_backend_is_part_of_a_table(table):
    assert read_table(table, attention_backend="triton").attention_backend == "triton"
    with pytest.raises(TableError, match=r"meta.json: table was made with the 'triton' attention backend and this "
                                         r"server runs 'fa3'.*--attention-backend fa3.*--attention-backend triton"):
        read_table(table, attention_backend="fa3")


@pytest.mark.parametrize("edit,msg", [
    (lambda m: m.pop("attention_backend"), r"missing key\(s\) \['attention_backend'\]"),
    (lambda m: m.update(attention_backend=""), "attention_backend must name"),
    (lambda m: m.update(profiler={"attention_backend": "fa3"}), "profiler.attention_backend 'fa3'"),
])
def test_bad_backend_in_meta(table, edit, msg):
    _edit_meta(table, edit)
    with pytest.raises(TableError, match=msg):
        read_table(table)


def test_shipped_tables_name_their_backend():
    for d in sorted((ROOT / "contention_tables").iterdir()):
        t = read_table(d)
        tp = f"__tp{t.tp_size}" if t.tp_size > 1 else ""  # a TP table is one rank's slice (table_dirname)
        assert d.name.endswith("__" + t.attention_backend + tp), d


def test_corun_cells_of_a_shipped_table_and_their_errors(tmp_path):
    """Every shipped FA3 H100 table has its raw log: one entry per co-run cell, the last
    measurement of each, with the prefill launches timed."""
    from sglang_mux.tables import corun_cells

    cells = corun_cells(ROOT / "contention_tables" / "llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3")
    ct = pd.read_csv(ROOT / "contention_tables" / "llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3" / "contention.csv")
    assert len(cells) == len(ct) and all(c["prefill_launch_ms"] > 0 and c["decode_corun_ms"] > 0 for c in cells)
    assert {c["decode_sms"] for c in cells} == set(ct["decode_sms"])
    with pytest.raises(TableError, match="no such file"):
        corun_cells(tmp_path)
    (tmp_path / "cells.jsonl").write_text(json.dumps({"kind": "solo_decode", "cell": {}}) + "\n")
    with pytest.raises(TableError, match="timed its prefill launches"):
        corun_cells(tmp_path)


def test_a_tensor_parallel_rank_computes_its_share_of_the_model():
    m = ModelShape.from_meta(LLAMA_8B)
    assert m.per_rank(1) is m
    r = m.per_rank(2)
    assert (r.num_heads, r.num_kv_heads, r.intermediate_size, r.vocab_size) == (16, 4, 7168, 64128)
    assert (r.num_layers, r.hidden_size, r.head_dim) == (m.num_layers, m.hidden_size, m.head_dim)
    assert m.per_rank(16).num_kv_heads == 1  # 8 KV heads over 16 ranks: replicated, one each
    assert r.layer_params * 2 == pytest.approx(m.layer_params, rel=0.02)
    with pytest.raises(ValueError, match="--tp-size 3 does not divide 32 attention heads"):
        m.per_rank(3)


def test_a_ranks_config_is_its_share_with_the_head_size_kept():
    cfg = json.loads((ROOT / "launch/models/llama-3.1-8b/config.json").read_text())
    m = ModelShape.from_config(ROOT / "launch/models/llama-3.1-8b/config.json")
    r = m.rank_config(cfg, 2)
    assert (r["num_attention_heads"], r["num_key_value_heads"], r["intermediate_size"], r["vocab_size"]) == \
        (16, 4, 7168, 64128)
    assert r["head_dim"] == 128 and r["hidden_size"] == cfg["hidden_size"]  # 4096 / 16 would make it 256
    assert ModelShape.from_hf_config(r).mismatches(m.per_rank(2)) == []


def test_a_tp_tables_kernels_are_a_ranks(good, tmp_path):
    """The fit reads heads and KV heads (FA3's grid, the decode kernel) from the rank's slice."""
    from sglang_mux.estimator.table_fit import table_decode_kernel, table_fa3

    t = read_table(good)
    meta = {**t.meta, "tp_size": 2, "attention_backend": "fa3"}
    p = write_table(tmp_path / "tp2", meta, t.solo_prefill, t.solo_decode, t.contention)
    t2 = read_table(p, require_fit=False)
    assert t2.model_shape == t.model_shape and t2.rank_shape.num_heads == t.model_shape.num_heads // 2
    assert table_fa3(t2).heads == t.model_shape.num_heads // 2
    assert table_decode_kernel(t2).head_groups == t.model_shape.num_kv_heads // 2


def test_the_70b_shape_fits_two_h200s_and_not_one():
    """launch/models/llama-3.1-70b (issue 44's model): at TP 2 a rank holds ~66 GiB of weights,
    which leaves an H200 (~140 GiB) a KV pool of hundreds of thousands of tokens; one GPU holds none."""
    from profiling.grid import GpuSpec, estimate_kv_pool_tokens

    m = ModelShape.from_config(ROOT / "launch/models/llama-3.1-70b/config.json")
    assert (m.num_layers, m.hidden_size, m.num_heads, m.num_kv_heads, m.intermediate_size) == (80, 8192, 64, 8, 28672)
    assert m.weight_bytes / 1e9 == pytest.approx(141.1, rel=0.01)  # 70.6B parameters in bf16
    r = m.per_rank(2)
    h200, h100 = GpuSpec(mem_gib=139.8), GpuSpec()
    assert r.weight_bytes / 2**30 == pytest.approx(65.7, rel=0.01)
    assert 300_000 < estimate_kv_pool_tokens(r, h200, 0.85) < 400_000
    assert estimate_kv_pool_tokens(m, h200, 0.85) == 0
    assert estimate_kv_pool_tokens(m.per_rank(4), h100, 0.85) > 100_000
