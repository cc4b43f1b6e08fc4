"""Table store (profiling/store.py): exact columns, append + skip, torn-line repair; stats helpers;
engine.json merging."""

import json

import pandas as pd
import pytest

from profiling import grid as G
from profiling import stats
from profiling.engine_bench import graph_memory_summary, merge_entry
from profiling.store import COLUMNS, FILES, TableStore, check_meta_compatible
from sglang_mux import tables


def test_columns_are_design_md():
    assert COLUMNS[G.KIND_SOLO_PREFILL] == tables.SOLO_PREFILL_COLS == [
        "prefill_sms", "bs", "sum_new_sq", "sum_new_reused", "sum_new", "latency_ms"]
    assert COLUMNS[G.KIND_SOLO_DECODE] == tables.SOLO_DECODE_COLS == ["decode_sms", "bs", "sum_reused", "latency_ms"]
    assert COLUMNS[G.KIND_CONTENTION] == tables.CONTENTION_COLS == [
        "decode_sms", "prefill_new", "prefill_reused", "decode_bs", "decode_reused_per_req",
        "decode_solo_ms", "decode_corun_ms"]
    assert FILES[G.KIND_SOLO_PREFILL] == tables.SOLO_PREFILL
    assert FILES[G.KIND_SOLO_DECODE] == tables.SOLO_DECODE
    assert FILES[G.KIND_CONTENTION] == tables.CONTENTION


def _cells():
    return [G.solo_prefill_cell(116, 132, 2, 2048, 8192), G.solo_decode_cell(16, 132, 8, 2048),
            G.contention_cell(16, 132, 2048, 0, 8, 2048)]


def test_append_writes_exact_rows_and_resumes(tmp_path):
    s = TableStore(tmp_path)
    p, d, c = _cells()
    s.append(p, [12.3456789], {"samples": [1, 2]})
    s.append(d, [7.5])
    s.append(c, [7.5, 8.25])
    df = pd.read_csv(tmp_path / "solo_prefill.csv")
    assert list(df.columns) == COLUMNS[G.KIND_SOLO_PREFILL]
    assert df.iloc[0].tolist() == [116, 2, 2 * 2048 ** 2, 2 * 2048 * 8192, 4096, 12.3457]
    assert pd.read_csv(tmp_path / "contention.csv").iloc[0].tolist() == [16, 2048, 0, 8, 2048, 7.5, 8.25]
    s2 = TableStore(tmp_path)
    assert all(s2.done(x) for x in (p, d, c))
    assert not s2.done(G.solo_decode_cell(16, 132, 16, 2048))
    s2.append(G.solo_decode_cell(16, 132, 16, 2048), [9.0])
    assert (tmp_path / "solo_decode.csv").read_text().count("decode_sms") == 1  # one header
    log = [json.loads(x) for x in (tmp_path / "cells.jsonl").read_text().splitlines()]
    assert log[0]["samples"] == [1, 2] and log[0]["kind"] == G.KIND_SOLO_PREFILL
    with pytest.raises(ValueError):
        s2.append(c, [1.0])  # contention needs two values
    # tables.py validates what the store writes
    for kind, name in FILES.items():
        tables.validate_frame(pd.read_csv(tmp_path / name), name)


def test_torn_last_line_is_repaired(tmp_path):
    s = TableStore(tmp_path)
    d1, d2 = G.solo_decode_cell(16, 132, 8, 2048), G.solo_decode_cell(16, 132, 16, 2048)
    s.append(d1, [7.0])
    with open(tmp_path / "solo_decode.csv", "a") as f:
        f.write("16,16,327")  # crash mid-row
    s2 = TableStore(tmp_path)
    assert s2.done(d1) and not s2.done(d2)
    assert (tmp_path / "solo_decode.csv").read_text() == "decode_sms,bs,sum_reused,latency_ms\n16,8,16384,7.0\n"
    s2.append(d2, [8.0])
    assert len(pd.read_csv(tmp_path / "solo_decode.csv")) == 2


def test_wrong_header_is_refused(tmp_path):
    (tmp_path / "solo_decode.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="header"):
        TableStore(tmp_path)


def test_skips_block_unless_plan_caps(tmp_path):
    s = TableStore(tmp_path)
    a, b = G.solo_decode_cell(16, 132, 8, 2048), G.solo_decode_cell(16, 132, 16, 2048)
    s.skip(a, "KV pool")
    s.skip(b, "plan cap: ...", blocking=False)
    with open(tmp_path / "skipped.jsonl", "a") as f:
        f.write('{"kind": "solo_de')  # torn
    s2 = TableStore(tmp_path)
    assert s2.was_skipped(a) and not s2.was_skipped(b)
    assert {(a.kind, a.key), (b.kind, b.key)} <= s2.logged_skips()


def test_meta_compatibility():
    m = {"gpu_name": "NVIDIA H100 80GB HBM3", "sm_count": 132, "granularity": 16, "model": {"num_layers": 32}}
    assert check_meta_compatible(m, dict(m)) == []
    assert check_meta_compatible(m, {**m, "gpu_name": "NVIDIA H200"})
    assert check_meta_compatible(m, {**m, "model": {"num_layers": 36}})


def test_stats_overlap():
    assert stats.merge_intervals([(5, 6), (0, 2), (2.01, 4)], gap_tol=0.05) == [(0, 4), (5, 6)]
    merged = stats.merge_intervals([(0, 10), (10.02, stats.INF)])
    assert stats.inside(3, 12, merged) and not stats.inside(-1, 2, merged)
    over, other = stats.classify_overlap([(1, 3), (9, 13), (20, 22), (-2, 0.5)], [(0, 10), (15, 21)])
    assert over == [2] and sorted(other) == [2, 2.5, 4]
    assert stats.spread_pct([10, 11, 9]) == pytest.approx(20.0)
    assert stats.spread_pct([5]) == 0.0
    assert stats.overhead_pct(100, 101.5) == pytest.approx(1.5)


def test_engine_json_merge(tmp_path):
    out = tmp_path / "r" / "engine.json"
    merge_entry(out, "nvidia-h100/llama", {"x": 1})
    merge_entry(out, "nvidia-h200/llama", {"x": 2})
    doc = merge_entry(out, "nvidia-h100/llama", {"x": 3})
    assert doc["entries"] == {"nvidia-h100/llama": {"x": 3}, "nvidia-h200/llama": {"x": 2}}
    assert json.loads(out.read_text()) == doc
    out.write_text("{not json")
    assert merge_entry(out, "k", {"y": 1})["entries"] == {"k": {"y": 1}}
    assert (tmp_path / "r" / "engine.json.corrupt").exists()


def test_graph_memory_summary():
    from profiling.harness import CaptureStat

    mib = 2 ** 20
    st = [CaptureStat(i, f"g{i}", 1.0, 1000 * mib, (1000 - m) * mib, 0, 0) for i, m in enumerate([300, 20, 20])]
    g = graph_memory_summary(st, 0.4)
    assert g["one_set_mib"] == 300 and g["total_mib"] == 340 and g["extra_for_all_partitions_mib"] == 40
    assert g["extra_per_additional_set_mib"] == 20 and g["overhead_vs_one_set_pct"] == pytest.approx(13.3)
    assert graph_memory_summary([], None)["per_stream_group"] == []


def test_merge_makes_one_table_of_parts_measured_apart(tmp_path, capsys):
    from profiling import merge

    meta = {"gpu_name": "NVIDIA H200", "sm_count": 132, "granularity": 16, "tp_size": 2, "runs": [{"wall_s": 1}]}
    a, b = TableStore(tmp_path / "a"), TableStore(tmp_path / "b")
    a.write_meta(meta)
    b.write_meta({**meta, "runs": [{"wall_s": 2}]})
    p, d, c = _cells()
    c2 = G.contention_cell(32, 132, 2048, 0, 8, 2048)
    a.append(p, [12.0])
    a.append(c, [7.5, 8.0])  # both parts hold c: a's row stays
    b.append(c, [9.0, 9.5], {"who": "b"})
    b.append(c2, [6.0, 7.0], {"who": "b"})
    b.skip(G.solo_decode_cell(16, 132, 256, 2048), "KV pool")
    assert merge.main([str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    assert "contention.csv +1" in capsys.readouterr().out
    whole = TableStore(tmp_path / "a")
    assert whole.done(p) and whole.done(c) and whole.done(c2) and not whole.done(d)
    assert pd.read_csv(tmp_path / "a" / "contention.csv").values.tolist() == [
        [16, 2048, 0, 8, 2048, 7.5, 8.0], [32, 2048, 0, 8, 2048, 6.0, 7.0]]
    logs = [json.loads(x) for x in (tmp_path / "a" / "cells.jsonl").read_text().splitlines()]
    assert [(x["key"], x.get("who")) for x in logs if x["kind"] == G.KIND_CONTENTION] == [
        (list(c.key), None), (list(c2.key), "b")]
    assert whole.was_skipped(G.solo_decode_cell(16, 132, 256, 2048))
    assert [r["wall_s"] for r in whole.read_meta()["runs"]] == [1, 2]
    # merging again adds nothing
    assert whole.merge(TableStore(tmp_path / "b")) == {"contention.csv": 0}


def test_merge_refuses_a_table_made_elsewhere(tmp_path):
    from profiling import merge

    TableStore(tmp_path / "a").write_meta({"gpu_name": "NVIDIA H200", "sm_count": 132, "tp_size": 2})
    TableStore(tmp_path / "b").write_meta({"gpu_name": "NVIDIA H100 80GB HBM3", "sm_count": 132, "tp_size": 2})
    assert merge.main([str(tmp_path / "a"), str(tmp_path / "b")]) == 2
    assert merge.main([str(tmp_path / "a"), str(tmp_path / "nope")]) == 2
