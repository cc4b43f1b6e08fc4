"""Estimator: table and cold-start construction, refinement, timing, and the CLI."""

import io
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from synth_tables import LLAMA_8B, TABLE_NAME as NAME, write_small_synthetic_table, write_synthetic_table  # noqa: E402

from sglang_mux.estimator import (COLD_START_GUARD, Estimator, PrefillReq, TableError,  # noqa: E402
                                  check_table, fit_table)
from sglang_mux.estimator.command import main  # noqa: E402
from sglang_mux.roofline import (DEFAULT_H100_PROBE, RooflineModel, batch_cost, decode_ops,  # noqa: E402
                                 prefill_ops, probe_at, roofline_ms)
from sglang_mux.latency_model import key_waves  # noqa: E402
from sglang_mux.tables import ModelShape, table_dirname  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LLAMA_CFG = ROOT / "launch/models/llama-3.1-8b/config.json"


@pytest.fixture
def est(good):
    return Estimator.from_table(good)


def _cli(*args):
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "sglang_mux.estimator", *map(str, args)],
                          capture_output=True, text=True, cwd=ROOT, env=env)


def test_from_table_interface(est):
    assert est.num_layers == 32 and est.total_sms == 132
    assert est.decode_sms_options == [16, 32, 48, 64, 80, 96, 112]
    reqs = [PrefillReq(4000, 0), PrefillReq(500, 2000)]
    assert est.prefill_ms(20, reqs) > est.prefill_ms(116, reqs) > est.prefill_ms(132, reqs) > 0
    assert est.decode_solo_ms(16, 64, 64 * 2000) > est.decode_solo_ms(112, 64, 64 * 2000) > 0
    solo = est.decode_solo_ms(48, 32, 32 * 4000)
    worst = est.decode_worst_ms(48, 32, 32 * 4000, 8192, 0)
    assert solo < worst <= solo * 1.25 * 1.1 * 1.05
    # No co-runner: no guard.
    assert est.decode_worst_ms(132, 32, 32 * 4000, 8192, 0) == est.decode_solo_ms(132, 32, 32 * 4000)
    assert est.decode_worst_ms(48, 32, 32 * 4000, 0, 0) == solo
    assert est.prefill_ms(20, []) == 0.0 and est.decode_worst_ms(48, 0, 0, 8192, 0) == 0.0


def test_observe_decode_raises_guard_and_drops_the_implausible(est):
    q = (64, 16, 16 * 3000, 8192, 2048)
    w0 = est.decode_worst_ms(*q)
    est.observe_decode(*q, w0 * 0.8)
    assert est.decode_worst_ms(*q) == w0
    est.observe_decode(*q, w0 * 1.2)
    assert est.decode_worst_ms(*q) == pytest.approx(w0 * 1.2)
    est.observe_decode(*q, w0 * 100)  # implausible (a pause, not contention): dropped
    assert est.decode_worst_ms(*q) == pytest.approx(w0 * 1.2)


def test_guard_reports_the_tables_value_beside_the_refined_one(est):
    q = (64, 16, 16 * 3000, 8192, 2048)
    g0 = est.guard_slowdown(*q)
    est.observe_decode(*q, est.decode_worst_ms(*q) * 1.3)
    assert est.guard_slowdown(*q) == pytest.approx(g0 * 1.3)
    assert est.guard_slowdown(*q, profiled=True) == g0
    assert est.guard_slowdown(132, 16, 16 * 3000, 8192, 2048, profiled=True) == 1.0  # decode alone


def test_decode_fixed_cost_learned_alone_and_kept_out_of_the_guard(est):
    """Serving times a whole run_batch (input copies, sampling) where the table timed graph
    replays: decode alone learns that fixed cost, every worst case adds it after the guard, and
    it is not taken for contention."""
    alone = (132, 8, 8 * 1000, 0, 0)
    t = est.decode_solo_ms(*alone[:3])
    for _ in range(200):
        assert est.observe_decode(*alone, t + 0.5) is False
    assert est.decode_offset_ms == pytest.approx(0.5 * (1 - 0.95**200))
    off = est.decode_offset_ms
    assert est.decode_worst_ms(*alone) == pytest.approx(t + off)
    assert est.decode_solo_ms(*alone[:3]) == t  # the solo fit itself is the table's
    co = (48, 32, 32 * 4000, 8192, 0)
    g = est.guard_slowdown(*co)
    w = est.decode_worst_ms(*co)
    assert w == pytest.approx(est.decode_solo_ms(*co[:3]) * g + off)
    assert est.observe_decode(*co, w) is False and est.guard_slowdown(*co) == g  # not a raise
    assert est.decode_worst_ms(48, 0, 0, 8192, 0) == 0.0  # no batch: no iteration, no fixed cost
    est.observe_decode(*alone, t + 3.5)  # a stall, not the fixed cost
    assert est.decode_offset_ms == off
    est.observe_decode(48, 32, 32 * 4000, 0, 0, est.decode_solo_ms(48, 32, 32 * 4000) + 1.0)
    assert est.decode_offset_ms > off  # a partition with no prefill beside it is decode alone too


def test_decode_fixed_cost_never_below_the_table(est):
    alone = (132, 8, 8 * 1000, 0, 0)
    t = est.decode_solo_ms(*alone[:3])
    for _ in range(50):
        est.observe_decode(*alone, t - 1.0)  # a faster host: the table stays the floor
    assert est.decode_offset_ms == 0.0 and est.decode_worst_ms(*alone) == t


def test_observe_prefill_correction(est):
    reqs = [PrefillReq(3000, 1000)]
    base = est.prefill_ms(52, reqs)
    for _ in range(100):
        est.observe_prefill(52, reqs, base * 1.2)
    assert est.prefill_ms(52, reqs) == pytest.approx(base * 1.2, rel=1e-3)
    assert est.prefill_ms(68, reqs) == est.solo.prefill_ms(68, reqs)  # per partition
    est.observe_prefill(52, reqs, base * 50)  # glitch: ignored
    assert est.prefill_correction(52) == pytest.approx(1.2, rel=1e-3)


def test_host_launch_floor(est):
    """A short prefill takes as long as the host needs to launch every layer (observed online);
    host-bound chunks leave the GPU correction alone; stalls are not a launch rate."""
    small, big = [PrefillReq(128, 0)], [PrefillReq(16000, 0)]
    gpu_small, gpu_big = est.prefill_ms(84, small), est.prefill_ms(84, big)
    assert est.host_prefill_ms() == 0.0  # nothing observed yet: the GPU estimate alone
    per_layer = 4 * gpu_small / est.num_layers  # a host 4x slower than the GPU's small prefill
    assert est.observe_prefill_launch(2, 2 * per_layer)
    assert est.prefill_ms(84, small) == pytest.approx(4 * gpu_small)
    assert est.prefill_ms(84, big) == gpu_big  # the GPU is the longer part
    ratio = est.observe_prefill(84, small, 4 * gpu_small)  # host-bound: measured matches the host
    assert ratio == pytest.approx(1.0) and est.prefill_correction(84) == 1.0
    assert not est.observe_prefill_launch(1, 1e3)  # a 1 s stall for one layer: ignored
    assert not est.observe_prefill_launch(0, 5.0)
    assert est.observe_prefill_launch(1, 2 * per_layer)  # slower host: EWMA moves 20 % of the way
    assert est.host_prefill_ms() == pytest.approx(4 * gpu_small * 1.2)


def test_prediction_cost_under_20us(est):
    reqs = [PrefillReq(2000, 512), PrefillReq(300, 0), PrefillReq(64, 4096)]
    calls = [lambda: est.prefill_ms(84, reqs), lambda: est.decode_solo_ms(48, 96, 96 * 3000),
             lambda: est.decode_worst_ms(48, 96, 96 * 3000, 8192, 2048),
             lambda: est.decode_worst_ms(40, 96, 96 * 3000, 10**6, 0)]  # unprofiled + outside grid
    for f in calls:
        per_call = []
        for _ in range(15):
            t = time.perf_counter()
            for _ in range(500):
                f()
            per_call.append((time.perf_counter() - t) / 500)
        assert statistics.median(per_call) <= 20e-6, f"{statistics.median(per_call) * 1e6:.1f} µs"


def test_from_table_refuses_mismatch(good, table):
    with pytest.raises(TableError, match="meta.json: table was made on GPU"):
        Estimator.from_table(good, gpu_name="NVIDIA A100-SXM4-80GB")
    with pytest.raises(TableError, match="meta.json: table was made for another model"):
        Estimator.from_table(good, model_shape=ROOT / "launch/models/qwen3-8b/config.json")
    # The engine's partitions must be profiled: drop the 20-SM prefill rows.
    p = table / "solo_prefill.csv"
    df = pd.read_csv(p)
    df[df.prefill_sms != 20].to_csv(p, index=False)
    with pytest.raises(TableError, match=r"solo_prefill\.csv: SM counts \[20\] not in the table"):
        Estimator.from_table(table)


def test_cold_start_warns_and_estimates():
    with pytest.warns(UserWarning, match="python -m profiling.run --model-config"):
        e = Estimator.cold_start(LLAMA_8B, DEFAULT_H100_PROBE, 132, 16)
    assert e.decode_sms_options == [16, 32, 48, 64, 80, 96, 112] and e.num_layers == 32
    solo = e.decode_solo_ms(48, 32, 32 * 2000)
    assert e.decode_worst_ms(48, 32, 32 * 2000, 4096, 0) == pytest.approx(solo * COLD_START_GUARD)
    assert e.prefill_ms(20, [PrefillReq(4096)]) > e.prefill_ms(116, [PrefillReq(4096)]) > 0
    for _ in range(20):  # co-running 1.5x slower than solo: the correction learns it, the guard stays
        assert e.observe_decode(48, 32, 32 * 2000, 4096, 0, solo * 1.5) is False
    assert e.decode_worst_ms(48, 32, 32 * 2000, 4096, 0) == pytest.approx(solo * 1.5, rel=1e-3)
    assert e.guard_slowdown(48, 32, 32 * 2000, 4096, 0) == COLD_START_GUARD
    assert e.guard_slowdown(48, 32, 32 * 2000, 4096, 0, profiled=True) == COLD_START_GUARD


def test_cold_start_learns_the_roofline_decode_error():
    with pytest.warns(UserWarning):
        e = Estimator.cold_start(LLAMA_8B, DEFAULT_H100_PROBE, 132, 16)
    base132, base48 = e.decode_solo_ms(132, 8, 8 * 1000), e.decode_solo_ms(48, 8, 8 * 1000)
    for _ in range(12):  # decode-only iterations on the full GPU, 7x slower than the roofline
        assert e.observe_decode(132, 8, 8 * 1000, 0, 0, 7 * base132) is False  # no guard refinement
    assert 6.9 < e.decode_correction(132) <= 7.0
    # a partition never observed takes the largest correction seen (conservative)
    assert e.decode_solo_ms(48, 8, 8 * 1000) == pytest.approx(base48 * e.decode_correction(132))
    assert e.decode_worst_ms(48, 8, 8 * 1000, 4096, 0) == pytest.approx(
        base48 * e.decode_correction(132) * COLD_START_GUARD)
    # faster iterations lower it only slowly (it stays a worst case); glitches are ignored
    c = e.decode_correction(132)
    e.observe_decode(132, 8, 8 * 1000, 0, 0, 1 * base132)
    assert c * 0.98 < e.decode_correction(132) < c
    e.observe_decode(132, 8, 8 * 1000, 0, 0, 1000 * base132)
    assert e.decode_correction(132) < c


def test_only_a_tables_fused_price_is_acted_on_before_it_is_learned():
    """Through SGLang's prefill CUDA graph a table's base price is near what serving measures and
    is acted on from the start; a roofline's is not (session 49: a 4,096-token chunk of the tiny
    model at TP 2 priced 0.58 ms ran 4.4 ms), so a cold start's fused price is learned first: the
    hybrid cuts no long prompt on it (`HybridPolicy.fused_candidate`)."""
    from sglang_mux.fused_price import FusedPrice, sglang_graph_tokens
    table = Estimator.from_table(ROOT / "contention_tables" / "llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3")
    with pytest.warns(UserWarning):
        cold = Estimator.cold_start(LLAMA_8B, DEFAULT_H100_PROBE, 132, 16)
    assert not table.fused_prior_holds() and not cold.fused_prior_holds()  # eagerly: neither
    table.graph_tokens = cold.graph_tokens = sglang_graph_tokens(4096)
    assert table.fused_prior_holds() and not cold.fused_prior_holds()
    prices = {e.source: FusedPrice(prior_holds=e.fused_prior_holds()) for e in (table, cold)}
    assert prices[table.source].learned and not prices["cold-start"].learned


def test_table_estimator_does_not_learn_decode_solo(good):
    e = Estimator.from_table(good)
    before = e.decode_solo_ms(132, 8, 8 * 1000)
    e.observe_decode(132, 8, 8 * 1000, 0, 0, 5 * before)
    assert e.decode_solo_ms(132, 8, 8 * 1000) == before and e.decode_correction(132) == 1.0


def test_for_model_picks_table_or_cold_start(good, tmp_path):
    e = Estimator.for_model(LLAMA_CFG, "NVIDIA H200", 132, good.parent, "triton")
    assert e.source == f"table:{good} (triton)"
    with pytest.warns(UserWarning, match=r"--model-config .*config.json --attention-backend triton "
                                         r"--out .*llama-3.1-8b__nvidia-h100__triton"):
        e = Estimator.for_model(LLAMA_CFG, "NVIDIA H100", 132, good.parent, "triton")
    assert e.source == "cold-start"
    # The table of another backend is not used, and the warning says which one was passed over.
    with pytest.warns(UserWarning, match=r"--attention-backend fa3 .*__fa3 \(not used, made with another "
                                         r"attention backend: triton: .*" + good.name):
        e = Estimator.for_model(LLAMA_CFG, "NVIDIA H200", 132, good.parent, "fa3")
    assert e.source == "cold-start"
    with pytest.warns(UserWarning, match="looked for tables in .*none: no such directory"):
        e = Estimator.for_model(json.loads(LLAMA_CFG.read_text()), "NVIDIA H200", 132, tmp_path / "none", "triton")
    assert e.source == "cold-start"
    # An explicit table must match: no silent fallback.
    assert Estimator.for_model(LLAMA_CFG, "NVIDIA H200", 132, tmp_path, "triton",
                               table_dir=good).source == f"table:{good} (triton)"
    with pytest.raises(TableError, match="meta.json: table was made on GPU"):
        Estimator.for_model(LLAMA_CFG, "NVIDIA H100", 132, tmp_path, "triton", table_dir=good)
    with pytest.raises(TableError, match="meta.json: table was made with the 'triton' attention backend"):
        Estimator.for_model(LLAMA_CFG, "NVIDIA H200", 132, tmp_path, "fa3", table_dir=good)


def test_a_table_serves_only_its_tensor_parallel_degree(good, tmp_path):
    """A table profiled at --tp-size 2 (meta.json tp_size, directory __tp2) is what a TP=2 server
    picks, never a TP=1 one, and the reverse; an explicit table of another TP is refused naming both."""
    import shutil

    root = tmp_path / "tables"
    tp1 = shutil.copytree(good, root / good.name)
    tp2 = root / table_dirname("llama-3.1-8b", "NVIDIA H200", "triton", 2)
    shutil.copytree(good, tp2)
    meta = json.loads((tp2 / "meta.json").read_text())
    (tp2 / "meta.json").write_text(json.dumps({**meta, "tp_size": 2}))
    write_allreduce(tp2 / "allreduce.json", meta["model"]["hidden_size"])
    assert tp2.name == good.name + "__tp2"
    assert Estimator.for_model(LLAMA_CFG, "NVIDIA H200", 132, root, "triton").source == f"table:{tp1} (triton)"
    assert Estimator.for_model(LLAMA_CFG, "NVIDIA H200", 132, root, "triton",
                               tp_size=2).source == f"table:{tp2} (triton)"
    with pytest.warns(UserWarning, match=r"__triton__tp4 --tp-size 4 "
                                         r"\(not used, made with another attention backend or --tp-size: "
                                         r"triton, TP=1: .*; triton, TP=2: "):
        e = Estimator.for_model(LLAMA_CFG, "NVIDIA H200", 132, root, "triton", tp_size=4)
    assert e.source == "cold-start"
    # without a table, the roofline prices one rank's share: about a quarter of the weights to read
    with pytest.warns(UserWarning):
        one = Estimator.for_model(LLAMA_CFG, "NVIDIA H200", 132, tmp_path / "none", "triton")
    assert 0.2 < e.decode_solo_ms(132, 1, 1000) / one.decode_solo_ms(132, 1, 1000) < 0.35
    with pytest.raises(TableError, match=r"table was made at --tp-size 2 and this server runs --tp-size 1"):
        Estimator.for_model(LLAMA_CFG, "NVIDIA H200", 132, root, "triton", table_dir=tp2)
    (tp2 / "meta.json").write_text(json.dumps({**meta, "tp_size": 0}))
    with pytest.raises(TableError, match="tp_size must be a positive integer"):
        Estimator.from_table(tp2)


def write_allreduce(path, hidden, floor=0.08, fixed=0.05, per_mb=0.004):
    """profiling.allreduce's output for two ranks: a floor up to 512 tokens, a line above."""
    time = [{"lane": "prefill", "sms": 132, "tokens": t,
             "ms": floor if t <= 512 else fixed + per_mb * t * hidden * 2 / 1e6} for t in (1, 512, 1024, 8192)]
    path.write_text(json.dumps({"tp_size": 2, "ranks": [{"rank": r, "hidden": hidden, "time": time} for r in (0, 1)]}))


def test_a_tp_table_adds_the_ranks_all_reduces_to_prefill_and_needs_their_timings(good, tmp_path):
    """A TP-2 table's rows are one rank's slice on one GPU: each prefill (layer-wise or fused) adds
    two all-reduces a layer over its tokens, fitted from allreduce.json; decode (inside its CUDA
    graph) does not. Without the timings, or timed at another width, the table is refused with
    the command that measures them."""
    import shutil

    tp2 = shutil.copytree(good, tmp_path / (good.name + "__tp2"))
    meta = json.loads((tp2 / "meta.json").read_text())
    (tp2 / "meta.json").write_text(json.dumps({**meta, "tp_size": 2}))
    hidden, layers = meta["model"]["hidden_size"], meta["model"]["num_layers"]
    with pytest.raises(TableError, match=rf"allreduce.json: a TP-2 table needs its all-reduce timings .*python -m "
                                         rf"profiling.allreduce --tp-size 2 --hidden {hidden} --out {tp2}/allreduce.json"):
        Estimator.from_table(tp2)
    write_allreduce(tp2 / "allreduce.json", hidden * 2)
    with pytest.raises(TableError, match=f"all-reduces timed {hidden * 2} wide; the model's hidden size is {hidden}"):
        Estimator.from_table(tp2)
    write_allreduce(tp2 / "allreduce.json", hidden)
    one, two = Estimator.from_table(good), Estimator.from_table(tp2)
    assert one.allreduce is None and two.allreduce.ms(4096) == pytest.approx(0.05 + 0.004 * 4096 * hidden * 2 / 1e6)
    reqs = [PrefillReq(3000, 0), PrefillReq(1096, 500)]
    ar = 2 * layers * two.allreduce.ms(4096)
    assert two.prefill_ms(68, reqs) == pytest.approx(one.prefill_ms(68, reqs) + ar)
    assert two.fused_ms([PrefillReq(4000, 0)], [900] * 96) == pytest.approx(
        one.fused_ms([PrefillReq(4000, 0)], [900] * 96) + ar)
    assert two.decode_solo_ms(64, 32, 32000) == one.decode_solo_ms(64, 32, 32000)
    assert two.observe_prefill(68, reqs, two.prefill_ms(68, reqs)) == pytest.approx(1.0)


def test_roofline_pure_functions():
    m = ModelShape.from_meta(LLAMA_8B)
    F, B = probe_at(DEFAULT_H100_PROBE, 132)
    assert (F, B) == (789e12, 4.2e12)
    assert probe_at(DEFAULT_H100_PROBE, 20)[0] == pytest.approx(111e12 + 0.25 * 111e12)
    assert probe_at(DEFAULT_H100_PROBE, 8) == pytest.approx((55.5e12, 0.6e12))
    # Decode bs=1 on the full GPU is weight-bandwidth bound: ~16 GB of bf16 weights.
    f, b = batch_cost(decode_ops(m, 1, 1000))
    assert 15e9 < b < 17e9 and f < 2e10
    # Prefill FLOPs ~ 2 x params x tokens (+ attention).
    f, b = batch_cost(prefill_ops(m, [PrefillReq(4096)]))
    assert 2 * 6.9e9 * 4096 < f < 2 * 8.1e9 * 4096 * 1.3
    r = RooflineModel.from_probe(DEFAULT_H100_PROBE, m)
    reqs = [PrefillReq(3000, 200), PrefillReq(64, 9000)]
    assert r.prefill_ms(84, reqs) == pytest.approx(roofline_ms(prefill_ops(m, reqs), *probe_at(DEFAULT_H100_PROBE, 84))
                                                   + r.overhead_ms)
    assert r.decode_ms(16, 7, 7000) == pytest.approx(roofline_ms(decode_ops(m, 7, 7000), *probe_at(DEFAULT_H100_PROBE, 16))
                                                     + r.overhead_ms)


def test_check_in_process_detects_failures(small_table):
    out = io.StringIO()
    assert check_table(small_table, out=out)
    assert "check: OK" in out.getvalue()
    # A contention row slower than solo x guard (e.g. measured after fitting): bound missed.
    p = small_table / "contention.csv"
    df = pd.read_csv(p)
    df.loc[0, "decode_corun_ms"] *= 3
    df.to_csv(p, index=False)
    out = io.StringIO()
    assert not check_table(small_table, out=out)
    assert "FAIL" in out.getvalue()
    # Refitting folds the row into the guard, and the bound holds again.
    fit_table(small_table)
    assert check_table(small_table, out=io.StringIO())


def test_gpu_timed_tables_get_no_host_launch_floor(tmp_path):
    """A table whose prefill rows time the GPU alone (meta profiler.prefill_timing = "gpu")
    is fitted without the host's launch floor; the same rows without the mark get one."""
    p = write_synthetic_table(tmp_path / NAME, solo_model="mux")  # truth: a 12 ms floor
    fit_table(p)
    assert json.loads((p / "fit.json").read_text())["pooled"]["launch_floor_ms"] == pytest.approx(12.0, rel=0.02)
    meta = json.loads((p / "meta.json").read_text())
    meta.setdefault("profiler", {})["prefill_timing"] = "gpu"
    (p / "meta.json").write_text(json.dumps(meta))
    fit_table(p)
    assert json.loads((p / "fit.json").read_text())["pooled"]["launch_floor_ms"] == 0.0
    out = io.StringIO()
    check_table(p, out=out)
    assert "no launch floor (rows time the GPU alone)" in out.getvalue()


def test_check_and_guard_on_a_table_of_the_extended_model(tmp_path):
    """Uniform-batch table with attention waves, L2 spill, launch and occupancy floors, GEMM
    waves (1% noise): the extended fit meets the bounds held out, and solo x guard bounds every
    contention row with r_max = the per-request context."""
    p = write_synthetic_table(tmp_path / NAME, solo_model="mux", noise=0.01)
    out = io.StringIO()
    assert check_table(p, out=out), out.getvalue()
    fit = json.loads((p / "fit.json").read_text())
    assert fit["format"] == 11 and fit["prefill_hyper"]["wave_tokens_per_sm"] == 4 and "token knees" in out.getvalue()
    assert fit["prefill_hyper"]["cold_head_blocks"] == 32 and fit["gemm_curve"] is None
    assert "no GEMM curve" in out.getvalue() and "gemm     no gemm_curve.csv" in out.getvalue()
    assert fit["prefill_hyper"]["gemm_device_sms"] == 132 and fit["prefill_hyper"]["gemm_waves_lo"] > 0
    assert f"GEMM waves to {fit['prefill_hyper']['gemm_waves_lo']}..{fit['prefill_hyper']['gemm_waves_hi']} tokens" \
        in out.getvalue()
    est = Estimator.from_table(p)
    # The floor: one 130K-token request decodes slower than Eq. 2's share of its tokens.
    # (the truth's floor is β·r_max; with 1% noise the fit may also count waves: either form)
    t1, t2, t3, beta = est.solo.decode_theta(48)[:4]  # (no γ: triton's grid; no compute term at bs 1)
    dh = est.solo.decode_hyper
    floor = key_waves(dh, 48, 1, 130000) if dh.blocks_per_sm else 130000
    assert beta > 0 and est.decode_solo_ms(48, 1, 130000) == pytest.approx(beta * floor + t2 + t3)
    assert est.decode_solo_ms(48, 1, 130000) > t1 * 130000 + t2 + t3
    assert est.decode_solo_ms(48, 8, 8 * 2000, 130000) > est.decode_solo_ms(48, 8, 8 * 2000)
    # Online refinement divides by the solo estimate of the same batch, longest context included.
    seen = []
    est._guard.observe = lambda *a: seen.append(a[-1])
    solo = est.decode_solo_ms(48, 8, 8 * 2000, 130000)
    est.observe_decode(48, 8, 8 * 2000, 8192, 0, solo * 1.15, max_reused=130000)
    assert seen == [pytest.approx(1.15)]


def test_check_on_a_table_with_a_gemm_curve(tmp_path):
    """A GPU-timed, triton-profiled table with gemm_curve.csv (synth "mux-curve": slow token
    counts at 96 and 448): the fit uses the curve (θ10 pooled), models batches under 128
    tokens, pads query blocks for the triton extend grid, and meets the bounds held out."""
    p = write_synthetic_table(tmp_path / NAME, solo_model="mux-curve", noise=0.01, fitted=False)
    meta = json.loads((p / "meta.json").read_text())
    meta["profiler"]["attention_backend"] = "triton"
    (p / "meta.json").write_text(json.dumps(meta))
    fit_table(p)
    out = io.StringIO()
    assert check_table(p, out=out), out.getvalue()
    text = out.getvalue()
    fit = json.loads((p / "fit.json").read_text())
    assert fit["prefill_hyper"]["min_batch_tokens"] == 0 and fit["prefill_hyper"]["padded_query_blocks"] == 1
    assert sorted(fit["gemm_curve"]) == sorted(str(s) for s in (20, 36, 52, 68, 84, 100, 116, 132))
    assert 0.85 <= fit["pooled"]["gemm_curve_scale"][0] <= 0.95 and "GEMM curve x" in text
    assert "below 128 batch tokens" not in text  # fitted, not bounded
    assert "gemm     curve: 120 points on 8 partitions" in text
    est = Estimator.from_table(p)
    assert est.prefill_ms(84, [PrefillReq(448)]) > est.prefill_ms(84, [PrefillReq(512)])  # the slow count
    meta["attention_backend"] = meta["profiler"]["attention_backend"] = "fa3"  # FA3's grid, no padding
    (p / "meta.json").write_text(json.dumps(meta))
    fit_table(p)
    hp = json.loads((p / "fit.json").read_text())["prefill_hyper"]
    assert (hp["padded_query_blocks"], hp["split_kv_device_sms"], hp["kv_heads"], hp["block_tokens"]) == (0, 132, 8, 32)


def test_old_format_fit_json(table):
    """A fit.json of a format no shipped table uses (1-7, 9) or of an unknown one is a
    TableError that says how to rewrite it."""
    fit = json.loads((table / "fit.json").read_text())
    for fmt in (1, 7, 9, 12):
        (table / "fit.json").write_text(json.dumps({**fit, "format": fmt}))
        with pytest.raises(TableError, match=rf"fit.json: bad coefficients .*format {fmt}.*python -m "
                                             rf"sglang_mux.estimator fit"):
            Estimator.from_table(table)
    # a decode wave count without the kernel it counts on names the file and the fix
    (table / "fit.json").write_text(json.dumps({**fit, "decode_hyper": {"blocks_per_sm": 6}}))
    with pytest.raises(TableError, match=r"fit.json: bad coefficients .*needs head_groups.*estimator fit"):
        Estimator.from_table(table)


def test_check_fails_on_inaccurate_fit(tmp_path):
    p = write_small_synthetic_table(tmp_path / NAME, noise=0.15, seed=1)
    assert main(["check", str(p)]) == 1


def test_fit_command_rewrites_fit_and_guard(table, capsys):
    (table / "fit.json").write_text("{broken")
    (table / "guard.json").unlink()
    assert main(["check", str(table)]) == 2
    assert "fit.json: not valid JSON" in capsys.readouterr().err
    assert main(["fit", str(table)]) == 0
    assert "wrote" in capsys.readouterr().out
    assert Estimator.from_table(table).decode_sms_options[0] == 16


def test_cli_check_good_and_broken(small_good, small_table):
    r = _cli("check", small_good)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "check: OK" in r.stdout and "held-out" in r.stdout
    _df = pd.read_csv(small_table / "solo_decode.csv").drop(columns=["latency_ms"])
    _df.to_csv(small_table / "solo_decode.csv", index=False)
    r = _cli("check", small_table)
    assert r.returncode != 0
    assert "solo_decode.csv" in r.stderr and "missing column" in r.stderr


def test_cli_predict_json(good):
    r = _cli("predict", good, "--prefill-new", 5000, "--prefill-reused", 1000, "--decode-bs", 32,
             "--decode-reused", 2000, "--decode-sms", 48)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    # --decode-reused is per request: the batch's sum is 32 x 2000.
    est = Estimator.from_table(good)
    assert out["decode_solo_ms"] == pytest.approx(est.decode_solo_ms(48, 32, 64000))
    assert {"decode_solo_ms", "decode_worst_ms", "guard_slowdown", "prefill_solo_ms", "decode_sms",
            "prefill_sms"} <= set(out)
    assert out["prefill_sms"] == 84
    assert out["decode_worst_ms"] == pytest.approx(out["decode_solo_ms"] * out["guard_slowdown"])
    assert out["guard_slowdown"] >= 1.0 and out["prefill_solo_ms"] > 0
    # --decode-max-reused: the longest context (default: the per-request value, uniform).
    assert out["decode_solo_ms"] == pytest.approx(est.decode_solo_ms(48, 32, 64000, 2000))
    r = _cli("predict", good, "--prefill-new", 5000, "--decode-bs", 32, "--decode-reused", 2000,
             "--decode-max-reused", 60000, "--decode-sms", 48)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["decode_solo_ms"] == pytest.approx(est.decode_solo_ms(48, 32, 64000, 60000))
    r = _cli("predict", good, "--prefill-new", 5000, "--decode-bs", 32, "--decode-reused", 2000,
             "--decode-max-reused", 1000, "--decode-sms", 48)
    assert r.returncode == 2 and "cannot be below --decode-reused" in r.stderr


def test_probe_runs_only_for_a_cold_start(tmp_path, good):
    """The start-up probe (GPU time) is taken lazily: not at all when a table matches."""
    calls = []

    def probe():
        calls.append(1)
        return {16: (100e12, 1e12), 132: (800e12, 4e12)}

    table_root = Path(good).parent
    meta = json.loads((Path(good) / "meta.json").read_text())
    est = Estimator.for_model(meta["model"], gpu_name=meta["gpu_name"], total_sms=132,
                              tables_root=table_root, attention_backend="triton", probe=probe)
    assert est.source.startswith("table") and calls == []
    with pytest.warns(UserWarning, match="profil"):
        cold = Estimator.for_model(meta["model"], gpu_name="Some Other GPU", total_sms=132,
                                   tables_root=table_root, attention_backend="triton", probe=probe)
    assert cold.source == "cold-start" and calls == [1]


@pytest.mark.parametrize("table", ["llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3", "llama-3.1-8b__nvidia-h200__triton",
                                   "cold start"])
def test_summed_decode_rows_price_as_the_rows_themselves(table):
    """A fused iteration's decode rows summed once (`decode_rows`) give the price of the same
    rows walked one by one: FA3's waves and cold reads, triton's padded queries (rows re-read),
    the roofline of a cold start."""
    import random

    if table == "cold start":
        with pytest.warns(UserWarning):
            e = Estimator.cold_start(LLAMA_8B, DEFAULT_H100_PROBE, 132, 16)
    else:
        e = Estimator.from_table(ROOT / "contention_tables" / table)
    rng = random.Random(0)
    for _ in range(60):
        pieces = [PrefillReq(rng.randint(1, 1500), rng.choice([0, rng.randint(1, 40000)]))
                  for _ in range(rng.randint(0, 4))]
        ctx = [rng.choice([0, rng.randint(1, 60000)]) for _ in range(rng.randint(0, 400))]
        rows = [*pieces, *(PrefillReq(1, c) for c in ctx)]
        want = e.fused_price.price(e.fused_base_ms(rows)) if rows else 0.0
        assert e.fused_ms(pieces, e.decode_rows(ctx)) == pytest.approx(want, rel=1e-12, abs=1e-12)
        assert e.fused_ms(pieces, ctx) == pytest.approx(want, rel=1e-12, abs=1e-12)


def test_a_fused_batch_is_priced_and_learned_at_the_size_its_prefill_graph_runs():
    """Rows of 500 prompt tokens and 3 decode rows run padded to 512 tokens, 600 and 3 to 640: where
    the 640s serve 3 ms over their base price and the 512s at it, the price learns that size's
    excess and prices the next 640 with it; a batch run eagerly (nothing captured, or past the
    graph) has no size of its own."""
    from sglang_mux.fused_price import SIZE_MIN_OBS, sglang_graph_tokens
    e = Estimator.from_table(ROOT / "contention_tables" / "llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3")
    small, large, ctx = [PrefillReq(300, 0), PrefillReq(200, 1000)], [PrefillReq(600, 0)], [500, 900, 4000]
    dec = e.decode_rows(ctx)
    assert e.fused_tokens(small, dec) is None  # eagerly: no size of its own
    e.graph_tokens = sglang_graph_tokens(4096)
    assert e.fused_tokens(small, dec) == 512 and e.fused_tokens(large, dec) == 640
    assert e.fused_tokens([PrefillReq(509, 0)], dec) == 512  # a captured size itself
    assert e.fused_tokens([PrefillReq(5000, 0)]) is None  # past the graph
    e.fused_price.prior_holds = True
    b_small, b_large = e.fused_base_ms(small, dec), e.fused_base_ms(large, dec)
    line = e.fused_ms(large, ctx)
    for _ in range(32 * ((2 * SIZE_MIN_OBS + 31) // 32)):  # until a refit has seen the minimum of each
        e.observe_fused(small, b_small, dec)
        e.observe_fused(large, b_large + 3.0, dec)
    assert set(e.fused_price.bias) == {640}
    assert e.fused_ms(large, ctx) - e.fused_price.price(b_large) == pytest.approx(e.fused_price.bias[640])
    assert e.fused_ms(large, ctx) > line
