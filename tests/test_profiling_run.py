"""The profiling loop (profiling/run.py) on a fake harness: budget stop, resume, re-measure of
noisy cells, skips and errors, and the estimator fit at the end."""

import json
import os
from dataclasses import dataclass

import pandas as pd
import pytest

from profiling import grid as G
from profiling.harness import CellSkipped, CorunResult
from profiling.run import AbortRun, Profiler, fit_table_dir
from profiling.store import FILES, TableStore
from sglang_mux import tables
from sglang_mux.tables import ModelShape

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LLAMA = os.path.join(ROOT, "launch/models/llama-3.1-8b/config.json")


@dataclass(frozen=True)
class FakeCfg:
    decode_sms: int
    prefill_sms: int

    @property
    def is_multiplexed(self):
        return self.decode_sms > 0 and self.prefill_sms > 0


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


class FakeHarness:
    """Latencies from the planning cost model (deterministic); time advances on a fake clock."""

    def __init__(self, plan, clock, noisy=(), skip=(), fail=()):
        self.plan, self.clock = plan, clock
        self.m, self.gpu = plan.model, plan.gpu
        self.noisy, self.skip, self.fail = set(noisy), set(skip), set(fail)
        self.calls = []

    def config(self, d, p):
        return FakeCfg(d, p)

    def _tick(self, kind, key):
        self.calls.append((kind, key))
        if (kind, key) in self.fail:
            raise ZeroDivisionError("boom")
        if (kind, key) in self.skip:
            raise CellSkipped("KV pool: test")
        self.clock.t += 1.0

    def _jit(self, base, key, n):
        first = sum(1 for c in self.calls if c == key) == 1
        wild = first and key in self.noisy
        return [base * (1 + (0.5 if wild and i == 0 else 0.01 * (i % 3))) for i in range(n)]

    def prefill_samples(self, reqs, cfg, layers_per_launch=None, repeats=3):
        key = (G.KIND_SOLO_PREFILL, G.solo_prefill_cell(cfg.prefill_sms, 132, len(reqs), *reqs[0]).key)
        self._tick(*key)
        self.last_host_ms = [20.0 + i for i in range(repeats)]  # the real harness's host enqueue times
        return self._jit(G.est_prefill_ms(self.m, self.gpu, cfg.prefill_sms, reqs), key, repeats)

    def decode_samples(self, bs, reused, cfg, repeats=10, warmup=3):
        key = (G.KIND_SOLO_DECODE, G.solo_decode_cell(cfg.decode_sms, 132, bs, reused).key)
        self._tick(*key)
        return self._jit(G.est_decode_ms(self.m, self.gpu, cfg.decode_sms, bs, reused), key, repeats)

    def corun_detailed(self, reqs, bs, reused, cfg, **kw):
        key = (G.KIND_CONTENTION, G.contention_cell(cfg.decode_sms, 132, reqs[0][0], reqs[0][1], bs, reused).key)
        self._tick(*key)
        solo = self._jit(G.est_decode_ms(self.m, self.gpu, cfg.decode_sms, bs, reused), key, kw["solo_repeats"])
        over = [x * 1.15 for x in solo[:8]]
        return CorunResult(min(solo), max(over), solo, over, [], 10, 5.0, kw["layers_per_launch"], 0.5)


@pytest.fixture(scope="module")
def plan():
    m = ModelShape.from_config(LLAMA)
    full = G.make_plan(m, G.GpuSpec(), "coarse")
    # a small but complete plan: two partitions of each kind
    keep = lambda c: (c.kind == G.KIND_SOLO_PREFILL and c.prefill_sms in (116, 132)) or \
        (c.kind == G.KIND_SOLO_DECODE and c.decode_sms in (16, 132)) or \
        (c.kind == G.KIND_CONTENTION and c.decode_sms in (16, 64))  # noqa: E731
    full.cells = [c for c in full.cells if keep(c)]
    return full


def _write_meta(path, plan):
    TableStore(path).write_meta({
        "gpu_name": "NVIDIA H100 80GB HBM3", "sm_count": 132, "model": plan.model.to_dict(),
        "versions": {"sglang": "0.5.16", "torch": "2.11.0", "cuda": "13.0"}, "date": "2026-01-01T00:00:00+00:00",
        "command": "test", "granularity": 16, "attention_backend": "fa3"})


def test_full_run_writes_a_valid_table_and_fits(tmp_path, plan, capsys):
    clock = Clock()
    store = TableStore(tmp_path)
    _write_meta(tmp_path, plan)
    h = FakeHarness(plan, clock)
    summ = Profiler(h, plan, store, budget_s=1e9, clock=clock, progress=True).run()
    assert summ.done == len(plan.cells) and not summ.remaining and not summ.stopped_by_budget
    t = tables.read_table(tmp_path, require_fit=False)
    assert len(t.solo_prefill) + len(t.solo_decode) + len(t.contention) == len(plan.cells)
    assert set(t.solo_decode.decode_sms) == {16, 132}
    assert (t.contention.decode_corun_ms >= t.contention.decode_solo_ms).all()
    assert fit_table_dir(tmp_path, store, check=False)
    assert (tmp_path / "fit.json").exists() and (tmp_path / "guard.json").exists()
    tables.read_table(tmp_path)  # now with fit + guard
    # the host's enqueue times go to the log, not into the CSV (the rows time the GPU)
    logged = [json.loads(x) for x in (tmp_path / "cells.jsonl").read_text().splitlines()]
    pre = [x for x in logged if x["kind"] == G.KIND_SOLO_PREFILL]
    assert pre and all(x["host_ms"][:2] == [20.0, 21.0] for x in pre)
    assert "host_ms" not in t.solo_prefill.columns
    # a second run has nothing to do
    h2 = FakeHarness(plan, clock)
    assert Profiler(h2, plan, TableStore(tmp_path), budget_s=1e9, clock=clock, progress=False).run().done == 0
    assert h2.calls == []


def test_budget_stop_then_resume(tmp_path, plan):
    clock = Clock()
    h1 = FakeHarness(plan, clock)
    p1 = Profiler(h1, plan, TableStore(tmp_path), budget_s=40.0, clock=clock, progress=False)
    s1 = p1.run()
    assert s1.stopped_by_budget and s1.remaining and 0 < s1.done < len(plan.cells)
    assert clock.t <= 40.0  # stopped before the budget, not after
    clock2 = Clock()
    h2 = FakeHarness(plan, clock2)
    s2 = Profiler(h2, plan, TableStore(tmp_path), budget_s=1e9, clock=clock2, progress=False).run()
    assert s1.done + s2.done == len(plan.cells)
    assert len(h1.calls) == s1.done and not set(h1.calls) & set(h2.calls)  # nothing measured twice
    for kind, name in FILES.items():
        df = pd.read_csv(tmp_path / name)
        keys = df.iloc[:, : {G.KIND_SOLO_PREFILL: 5, G.KIND_SOLO_DECODE: 3, G.KIND_CONTENTION: 5}[kind]]
        assert not keys.duplicated().any()


def test_partially_written_run_resumes(tmp_path, plan):
    clock = Clock()
    Profiler(FakeHarness(plan, clock), plan, TableStore(tmp_path), budget_s=30.0, clock=clock, progress=False).run()
    f = tmp_path / "solo_decode.csv"
    text = f.read_text()
    last = text.rstrip("\n").splitlines()[-1]
    f.write_text(text.rstrip("\n")[: -len(last) // 2])  # the last row torn in half
    store = TableStore(tmp_path)
    n_rows = len(pd.read_csv(f))
    clock2 = Clock()
    h2 = FakeHarness(plan, clock2)
    Profiler(h2, plan, store, budget_s=1e9, clock=clock2, progress=False).run()
    df = pd.read_csv(f)
    assert len(df) == len([c for c in plan.cells if c.kind == G.KIND_SOLO_DECODE]) > n_rows
    assert not df.duplicated(["decode_sms", "bs", "sum_reused"]).any()
    torn_key = tuple(int(x) for x in last.split(",")[:3])
    assert (G.KIND_SOLO_DECODE, torn_key) in h2.calls  # the torn cell was measured again


def test_noisy_cell_is_remeasured_once(tmp_path, plan):
    clock = Clock()
    dec = next(c for c in plan.cells if c.kind == G.KIND_SOLO_DECODE)
    pre = next(c for c in plan.cells if c.kind == G.KIND_SOLO_PREFILL)
    h = FakeHarness(plan, clock, noisy={(dec.kind, dec.key), (pre.kind, pre.key)})
    Profiler(h, plan, TableStore(tmp_path), budget_s=1e9, clock=clock, progress=False).run()
    assert h.calls.count((dec.kind, dec.key)) == 2 and h.calls.count((pre.kind, pre.key)) == 2
    other = next(c for c in plan.cells if c.kind == G.KIND_SOLO_DECODE and c != dec)
    assert h.calls.count((other.kind, other.key)) == 1
    log = [json.loads(x) for x in (tmp_path / "cells.jsonl").read_text().splitlines()]
    d = next(x for x in log if x["kind"] == dec.kind and tuple(x["key"]) == dec.key)
    assert d["remeasured"] and len(d["samples"]) == 2 * plan.repeats.decode


def test_remeasure_noisy_keeps_the_steadier_measurement(tmp_path, plan):
    """--remeasure-noisy: only cells logged with a high spread run again; a steadier result
    replaces the CSV row (one row per cell still), a noisier one is logged and dropped."""
    clock = Clock()
    dec = next(c for c in plan.cells if c.kind == G.KIND_SOLO_DECODE)
    pre = next(c for c in plan.cells if c.kind == G.KIND_SOLO_PREFILL)
    Profiler(FakeHarness(plan, clock, noisy={(dec.kind, dec.key), (pre.kind, pre.key)}), plan,
             TableStore(tmp_path), budget_s=1e9, clock=clock, progress=False).run()
    store = TableStore(tmp_path)
    noisy = store.noisy(10.0)
    assert set(noisy) == {(dec.kind, dec.key), (pre.kind, pre.key)} and min(noisy.values()) > 40
    before = pd.read_csv(tmp_path / "solo_decode.csv")
    # the steadier re-measurement: the harness is quiet now
    h2 = FakeHarness(plan, clock)
    prof = Profiler(h2, plan, store, budget_s=1e9, clock=clock, progress=False, remeasure=noisy)
    assert prof.run().done == 2 and prof.replaced == 2
    assert sorted(h2.calls) == sorted([(dec.kind, dec.key), (pre.kind, pre.key)])
    after = pd.read_csv(tmp_path / "solo_decode.csv")
    assert len(after) == len(before) and not after.duplicated(["decode_sms", "bs", "sum_reused"]).any()
    log = [json.loads(x) for x in (tmp_path / "cells.jsonl").read_text().splitlines()]
    last = next(x for x in reversed(log) if x["kind"] == dec.kind and tuple(x["key"]) == dec.key)
    assert last["kept"] == "new" and last["spread_pct"] < 10 and last["replaced_row"]
    same = (after.iloc[:, :3] == before.iloc[:, :3]).all(axis=1)
    assert same.all()  # the CSV keeps its order: the row is replaced in place
    i = after.index[(after.iloc[:, :3].values == list(dec.key)).all(axis=1)][0]
    assert after.iloc[i].tolist() == last["row"]
    assert TableStore(tmp_path).noisy(10.0) == {}
    # a noisier re-measurement is logged but leaves the row alone (and the cell stays steady)
    store = TableStore(tmp_path)
    assert not store.replace(dec, [999.0], {"spread_pct": 80.0}, old_spread=2.0)
    assert pd.read_csv(tmp_path / "solo_decode.csv").equals(after)
    assert TableStore(tmp_path).noisy(10.0) == {}


def test_skips_are_logged_not_retried_and_errors_abort(tmp_path, plan):
    clock = Clock()
    a = next(c for c in plan.cells if c.kind == G.KIND_CONTENTION)
    h = FakeHarness(plan, clock, skip={(a.kind, a.key)})
    s = Profiler(h, plan, TableStore(tmp_path), budget_s=1e9, clock=clock, progress=False).run()
    assert s.skipped == 1 and s.done == len(plan.cells) - 1
    h2 = FakeHarness(plan, clock)
    Profiler(h2, plan, TableStore(tmp_path), budget_s=1e9, clock=clock, progress=False).run()
    assert h2.calls == []
    h3 = FakeHarness(plan, clock)
    Profiler(h3, plan, TableStore(tmp_path), budget_s=1e9, clock=clock, progress=False, retry_skipped=True).run()
    assert h3.calls == [(a.kind, a.key)]

    bad = [c for c in plan.cells if c.kind == G.KIND_SOLO_DECODE]
    h4 = FakeHarness(plan, clock, fail={(c.kind, c.key) for c in bad})
    with pytest.raises(AbortRun, match="3 cells in a row"):
        Profiler(h4, plan, TableStore(tmp_path / "x"), budget_s=1e9, clock=clock, progress=False).run()
    lines = (tmp_path / "x" / "skipped.jsonl").read_text().splitlines()
    # the decode canary fails alone (the prefill and contention canaries reset the count), then 3 in a row
    assert len(lines) == 4 and all("ZeroDivisionError" in x for x in lines)
    assert [c[0] for c in h4.calls[:3]] == [G.KIND_SOLO_DECODE, G.KIND_SOLO_PREFILL, G.KIND_CONTENTION]


def test_fit_waits_for_all_three_csvs(tmp_path, plan, capsys):
    store = TableStore(tmp_path)
    store.append(next(c for c in plan.cells if c.kind == G.KIND_SOLO_DECODE), [5.0])
    assert not fit_table_dir(tmp_path, store)
    assert "still empty" in capsys.readouterr().out


def test_prefill_hold_covers_the_host_and_is_capped():
    from profiling.harness import MAX_HOLD_MS, hold_ms

    assert hold_ms(40.0) == pytest.approx(65.0)  # 1.5x the expected host time + 5 ms slack
    assert hold_ms(0.0) == pytest.approx(5.0)
    assert hold_ms(1e6) == MAX_HOLD_MS  # a stalled host must not hold the GPU for minutes


def test_a_deep_model_is_timed_in_segments_a_launch_queue_can_hold():
    from profiling.harness import hold_segments

    assert hold_segments(32) == [32]  # the 8B shapes: whole, as their tables were made
    assert hold_segments(80) == [27, 27, 26]  # the 70B shape: 80 layers overfilled the queue
    assert hold_segments(33) == [17, 16] and hold_segments(1) == [1]
    assert sum(hold_segments(126)) == 126 and max(hold_segments(126)) <= 32
    with pytest.raises(ValueError):
        hold_segments(0)
