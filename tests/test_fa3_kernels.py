"""FA3's prefill grid (fa3_kernels) and the FA3 tables it lets the estimator fit."""
import io
import json
from pathlib import Path

import pandas as pd
import pytest

from sglang_mux.estimator import Estimator, check_table
from sglang_mux.latency_model.fa3_kernels import Fa3Grid, decode_keys, num_splits
from sglang_mux.latency_model import DecodeHyper, PrefillReq, SoloLatencyModel, fit_decode_frame

ROOT = Path(__file__).resolve().parents[1]
FA3_TABLES = sorted([*(ROOT / "contention_tables").glob("*__fa3"), *(ROOT / "contention_tables").glob("*__fa3__tp*")])
LLAMA = Fa3Grid(heads=32, kv_heads=8, device_sms=132)


@pytest.mark.parametrize("tiles,blocks,want", [
    (32, 257, 4),     # 128 new over 32K cached: waves 0.24, 0.48, 0.73, 0.97 of 132 -> 4 (within 85 % of 1.0)
    (128, 257, 1),    # 512 new: 128 tiles >= 0.8 x 132 -> one split
    (106, 1000, 1),   # just over 0.8 x 132
    (16, 4, 1),       # at most 4 key blocks: never split
    (16, 5, 5),       # 16 x 5 / 132 = 0.61 is the best of 1..5 splits
    (8, 257, 15),     # 8 tiles: 14 splits fill 0.848 of a wave (< 0.85), 15 fill 0.91
])
def test_split_count_by_hand(tiles, blocks, want):
    assert num_splits(tiles, 132, blocks) == want


def test_packed_gqa_tiles():
    assert (LLAMA.block_tokens, LLAMA.tokens_per_sm) == (32, 4)  # 128 rows = 32 tokens x 4 heads
    assert [LLAMA.tiles(n) for n in (1, 32, 33, 128, 512)] == [8, 8, 16, 32, 128]
    assert LLAMA.splits(1, 128, 128 + 32768) == 4 and LLAMA.splits(4, 128, 128 + 32768) == 1


def test_a_grid_sized_for_the_whole_gpu_takes_two_waves_on_116_sms():
    """128 new tokens over 32K cached (4 splits, 128 blocks): the attention costs one wave on 132
    SMs and two on 116 (measured 3.6 vs 6.8 ms over the same batch without a prefix: 1.87x, where
    the SM counts alone make 1.14x)."""
    m = Estimator.from_table(ROOT / "contention_tables/llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3").solo
    r = [PrefillReq(128, 32768)]
    attn_132 = m.prefill_ms(132, r) - m.prefill_ms(132, [PrefillReq(128, 0)])
    attn_116 = m.prefill_ms(116, r) - m.prefill_ms(116, [PrefillReq(128, 0)])
    assert attn_116 > 1.6 * attn_132


def test_decode_keys_share_an_sm_instead_of_queueing():
    """16 requests of 32K keys: 128 tiles, one split (128 >= 0.8 x 132), 257 blocks of keys each;
    one block per SM on 132 SMs, two on 16 of 112 SMs: 1 + γ of a block's keys."""
    assert decode_keys(8, 132, 132, 16, 32769, 0.5) == 257 * 128
    assert decode_keys(8, 132, 112, 16, 32769, 0.5) == 257 * 128 * 1.5
    assert decode_keys(8, 132, 112, 16, 32769, 1.0) == 257 * 128 * 2  # γ = 1: whole waves
    # one request of 2K keys: 8 tiles over 17 key blocks, split 14 ways (the fewest within 85 %
    # of the best wave efficiency, 16 x 8 = 128 of 132): 2 blocks of keys each, 112 blocks
    assert num_splits(8, 132, 17) == 14
    assert decode_keys(8, 132, 132, 1, 2049, 0.5) == 256
    assert decode_keys(8, 132, 16, 1, 2049, 0.5) == 256 * (1 + 0.5 * 6)  # 7 blocks on an SM


@pytest.mark.slow  # a refit per fold on the whole table: ~40 s each (tests/test_shipped_tables.py is the quick one)
@pytest.mark.parametrize("table", FA3_TABLES, ids=lambda p: p.name)
def test_shipped_fa3_tables_pass_check(table):
    out = io.StringIO()
    assert check_table(table, out=out), out.getvalue()


@pytest.mark.parametrize("table", FA3_TABLES, ids=lambda p: p.name)
def test_hot_path_equals_the_row_model(table):
    """prefill_ms on a uniform batch is what the fit predicts for its table row."""
    est = Estimator.from_table(table)
    df = pd.read_csv(table / "solo_prefill.csv")
    want = est.solo.predict_prefill_frame(df)
    for (_, row), w in zip(df.iterrows(), want):
        bs, n = int(row.bs), int(row.sum_new // row.bs)
        r = int(round(row.sum_new_reused / row.sum_new))
        got = est.solo.prefill_ms(int(row.prefill_sms), [PrefillReq(n, r)] * bs)
        assert got == pytest.approx(w, rel=1e-6), (row.to_dict(), got, w)


def test_each_partition_gets_its_own_gamma():
    """Decode rows made with γ = 0.5 on 64 SMs and 0.75 on 112 (one β, every row on the floor):
    each partition's δ = βγ is fitted at the pooled β, so both come back within the β grid's
    step (β 4.08e-4 for 4e-4: 0.487 and 0.729) and the rows within 1 %. A γ grid at a β chosen
    for one γ had returned 0.38 and 0.62 (docs/latency_model.md, "FA3's grids")."""
    kernel = DecodeHyper(head_groups=8, max_kv_splits=128, device_sms=132, fa3=1)
    truth = {64: (0.0, 0.01, 5.0, 4e-4, 0.5), 112: (0.0, 0.01, 5.0, 4e-4, 0.75)}
    t = SoloLatencyModel({}, truth, decode_hyper=kernel, _partial=True)
    rows = [(s, bs, bs * r, t.decode_ms(s, bs, bs * r)) for s in truth
            for bs in (1, 2, 4, 8, 16, 32, 64, 128, 256) for r in (2048, 8192, 32768)]
    df = pd.DataFrame(rows, columns=["decode_sms", "bs", "sum_reused", "latency_ms"])
    hyper, th = fit_decode_frame(df, kernel)
    assert hyper == kernel and th[64][3] == th[112][3] == pytest.approx(4e-4, rel=0.03)  # β pooled
    assert th[64][4] == pytest.approx(0.5, abs=0.02) and th[112][4] == pytest.approx(0.75, abs=0.03)
    m = SoloLatencyModel({}, th, decode_hyper=hyper, _partial=True)
    assert abs(m.predict_decode_frame(df) / df.latency_ms - 1).max() < 0.01
    # a second block never costs more than a block: rows made with γ = 2 fit with γ at most 1
    t2 = SoloLatencyModel({}, {112: (0.0, 0.01, 5.0, 4e-4, 2.0)}, decode_hyper=kernel, _partial=True)
    df2 = df[df.decode_sms == 112].assign(latency_ms=[t2.decode_ms(112, int(b), int(r)) for b, r in
                                                      zip(df.bs[df.decode_sms == 112], df.sum_reused[df.decode_sms == 112])])
    assert fit_decode_frame(df2, kernel)[1][112][4] <= 1.0


def test_fa3_grid_in_an_older_format_is_refused():
    d = json.loads((FA3_TABLES[0] / "fit.json").read_text())
    assert d["format"] == 11 and d["prefill_hyper"]["split_kv_device_sms"] == 132
    d["format"] = 8
    with pytest.raises(ValueError, match="format 8 has no FA3 grid"):
        SoloLatencyModel.from_dict(d)
