"""Contention guard: bounds every measured row, conservative outside, refined online by raises and a host scale."""

import itertools
import json

import numpy as np
import pandas as pd
import pytest

import sglang_mux.contention_guard as CG
from sglang_mux.contention_guard import ConstantGuard, ContentionGuard
from sglang_mux.latency_model import SoloLatencyModel
from sglang_mux.tables import read_table

PN, PR, BS, RR = [2048, 8192, 32768], [0, 8192], [1, 8, 64], [512, 4096]


def _grid(seed=0, parts=(16, 48)):
    rng = np.random.default_rng(seed)
    rows = []
    for d, pn, pr, bs, rr in itertools.product(parts, PN, PR, BS, RR):
        solo = 5.0 + 0.01 * bs
        rows.append((d, pn, pr, bs, rr, solo, solo * rng.uniform(1.0, 1.3)))
    return pd.DataFrame(rows, columns=["decode_sms", "prefill_new", "prefill_reused", "decode_bs",
                                       "decode_reused_per_req", "decode_solo_ms", "decode_corun_ms"])


def _slow(df):
    return (df["decode_corun_ms"] / df["decode_solo_ms"]).to_numpy()


def _q(row):  # a row as a lookup query: (d, bs, sum_reused, prefill_new, prefill_reused)
    return (int(row.decode_sms), int(row.decode_bs), int(row.decode_bs * row.decode_reused_per_req),
            int(row.prefill_new), int(row.prefill_reused))


@pytest.fixture(scope="module")
def synth(good):
    return read_table(good)


def test_bounds_every_measured_row():
    df = _grid()
    g = ContentionGuard.build(df)
    for row, s in zip(df.itertuples(), _slow(df)):
        assert g.lookup(*_q(row)) >= s
    # Queries inside a cell are bounded by every measured corner of that cell.
    sub = df[(df.decode_sms == 16) & df.prefill_new.isin([2048, 8192]) & df.prefill_reused.isin([0, 8192])
             & df.decode_bs.isin([1, 8]) & df.decode_reused_per_req.isin([512, 4096])]
    assert g.lookup(16, 4, 4 * 1000, 5000, 100) == pytest.approx(max(1.0, _slow(sub).max()))


def test_bounds_every_row_of_synthetic_table_with_fit(synth):
    solo = SoloLatencyModel.from_dict(synth.fit)
    g = ContentionGuard.from_dict(synth.guard)
    df = synth.contention
    assert g.max_value() == pytest.approx(1.25, rel=0.05)  # the synthetic guard_max (plus fit error)
    worst_ok = [solo.decode_ms(*_q(r)[:3]) * g.lookup(*_q(r)) >= r.decode_corun_ms * (1 - 1e-12)
                for r in df.itertuples()]
    assert all(worst_ok)
    assert all(g.lookup(*_q(r)) >= s for r, s in zip(df.itertuples(), _slow(df)))


def test_missing_corner_cell_uses_measured_corners_only():
    df = _grid()
    # Drop one corner; the cell still bounds the remaining measured points.
    df = df[~((df.prefill_new == 32768) & (df.prefill_reused == 8192))]
    g = ContentionGuard.build(df)
    for row, s in zip(df.itertuples(), _slow(df)):
        assert g.lookup(*_q(row)) >= s


def test_refinement_raises_and_few_observations_never_lower():
    df = _grid()
    g = ContentionGuard.build(df)
    q = (16, 4, 4000, 5000, 100)
    before = g.lookup(*q)
    g.observe(*q, before * 0.5)
    assert g.lookup(*q) == before
    g.observe(*q, 1.9)
    assert g.lookup(*q) == pytest.approx(1.9)
    g.observe(*q, 1.2)
    assert g.lookup(*q) == pytest.approx(1.9)
    # Fewer than SCALE_MIN_OBS co-runs on a partition never push a measured row below its slowdown.
    rng = np.random.default_rng(3)
    for _ in range(CG.SCALE_MIN_OBS - 4):
        g.observe(16, int(rng.integers(1, 65)), int(rng.integers(0, 300000)), int(rng.integers(0, 40000)),
                  int(rng.integers(0, 9000)), float(rng.uniform(0.5, 1.2)))
    assert g.scale(16) == 1.0
    for row, s in zip(df.itertuples(), _slow(df)):
        assert g.lookup(*_q(row)) >= s
    g.observe(*q, float("nan"))
    assert g.lookup(*q) == pytest.approx(1.9)


def test_host_scale_is_the_served_quantile_of_served_over_table():
    """A host whose co-runs stay below the table: its partition's table values scale by the
    99th percentile of served / table once SCALE_MIN_OBS are in, and follow the host up."""
    df = _grid(parts=(16, 48))
    g = ContentionGuard.build(df)
    rows = list(df[df.decode_sms == 16].itertuples())
    table = {_q(r): g.lookup(*_q(r)) for r in df.itertuples()}
    n = CG.SCALE_MIN_OBS
    ratios = np.linspace(0.70, 0.85, n)  # served / table's value, one per co-run
    for i, x in enumerate(ratios):
        q = _q(rows[i % len(rows)])
        g.observe(*q, x * max(table[q], 1.0))
    k = int((1 - CG.SCALE_QUANTILE) * n)  # 1: the 99th percentile of 128 is the largest
    assert g.scale(16) == pytest.approx(np.sort(ratios)[-max(k, 1)])
    for r in df.itertuples():  # partition 16 scaled, 48 (no co-runs served) as the table
        q = _q(r)
        want = max(table[q] * g.scale(16), 1.0) if r.decode_sms == 16 else table[q]
        assert g.lookup(*q) == pytest.approx(want)
        assert g.lookup(*q, profiled=True) == table[q]
    # An unprofiled partition between two profiled ones takes their values in use.
    assert g.lookup(32, *_q(rows[0])[1:]) == pytest.approx(max(g.lookup(*_q(rows[0])), g.lookup(48, *_q(rows[0])[1:])))
    # Once a partition has its scale, one outlier no longer ratchets its cell.
    hi = _q(rows[0])
    g.observe(*hi, 1.7)
    assert g.lookup(*hi) == pytest.approx(max(table[hi] * g.scale(16), 1.0))
    # The host's co-runs grow past the table's: after a window of them the scale follows.
    for i in range(CG.SCALE_WINDOW):
        q = _q(rows[i % len(rows)])
        g.observe(*q, 1.02 * max(table[q], 1.0))
    assert g.scale(16) == pytest.approx(1.02)
    assert all(g.lookup(*_q(r)) == pytest.approx(max(table[_q(r)], 1.0) * 1.02) for r in rows)


@pytest.mark.parametrize("axis,value", [(0, 10**6), (0, 100), (1, 10**6), (2, 512), (3, 10**6), (3, 10)])
def test_outside_grid_is_at_least_edge_cells(axis, value):
    g = ContentionGuard.build(_grid(), outside_margin=1.1)
    base = [8192, 0, 8, 1000]  # (prefill_new, prefill_reused, bs, reused per request), inside
    q = list(base)
    q[axis] = value
    pn, pr, bs, rr = q

    def look(pn, pr, bs, rr):
        return g.lookup(16, bs, bs * rr, pn, pr)

    # The nearest edge cell: the same query with that coordinate clamped onto the grid.
    pts = [PN, PR, BS, RR][axis]
    clamped = list(q)
    clamped[axis] = pts[-1] if value > pts[-1] else pts[0]
    edge = look(*clamped)
    assert look(pn, pr, bs, rr) >= edge * 1.1 - 1e-12
    assert look(pn, pr, bs, rr) > edge
    # An observation outside raises the outside value but leaves in-grid cells alone.
    inside = look(*base)
    g.observe(16, bs, bs * rr, pn, pr, 2.5)
    assert look(pn, pr, bs, rr) == pytest.approx(2.5)
    assert look(*base) == inside


def test_unprofiled_partition_is_conservative():
    g = ContentionGuard.build(_grid(parts=(16, 48)))
    q = (4, 4000, 5000, 100)
    between = g.lookup(32, *q)
    assert between >= max(g.lookup(16, *q), g.lookup(48, *q))
    assert g.lookup(64, *q) >= g.lookup(48, *q) * g.outside_margin - 1e-12
    assert g.lookup(8, *q) >= g.lookup(16, *q) * g.outside_margin - 1e-12
    g.observe(32, *q, 2.0)
    assert g.lookup(32, *q) == pytest.approx(2.0)


def test_value_never_below_one():
    df = _grid()
    df["decode_corun_ms"] = df["decode_solo_ms"] * 0.9  # co-run measured faster (noise)
    g = ContentionGuard.build(df)
    assert g.lookup(16, 4, 4000, 5000, 100) == 1.0


def test_json_roundtrip_preserves_lookups():
    df = _grid()
    g = ContentionGuard.build(df)
    g2 = ContentionGuard.from_dict(json.loads(json.dumps(g.to_dict())))
    rng = np.random.default_rng(0)
    for _ in range(200):
        q = (int(rng.choice([16, 48, 32])), int(rng.integers(1, 100)), int(rng.integers(0, 10**6)),
             int(rng.integers(1, 10**5)), int(rng.integers(0, 10**4)))
        assert g2.lookup(*q) == g.lookup(*q)
    with pytest.raises(ValueError):
        ContentionGuard.from_dict({**g.to_dict(), "cells": {"16": [[1.0]]}})


def test_constant_guard():
    g = ConstantGuard(1.3)
    assert g.lookup(16, 1, 10, 10, 0) == 1.3
    g.observe(16, 1, 10, 10, 0, 1.1)
    assert g.lookup(16, 1, 10, 10, 0) == 1.3
    g.observe(16, 1, 10, 10, 0, 1.6)
    assert g.lookup(16, 1, 10, 10, 0) == 1.6 and g.lookup(32, 1, 10, 10, 0) == 1.3
    assert g.lookup(16, 1, 10, 10, 0, profiled=True) == 1.3  # the constant, before what serving raised
    with pytest.raises(ValueError):
        ConstantGuard(0.9)


def test_max_refinement_ratchets_on_one_outlier():
    """The paper's rule, until a partition has SCALE_MIN_OBS co-runs: one outlier sets the cell;
    the table's value stays readable."""
    g = ContentionGuard.build(_grid(parts=(16, 48)))
    q = (16, 4, 4000, 5000, 100)
    out = (16, 4, 4000, 10**6, 100)  # prefill_new beyond the grid: its own override
    mid = (32, 4, 4000, 5000, 100)  # an unprofiled partition between 16 and 48
    table, out_base, mid_base = g.lookup(*q), g.lookup(*out), g.lookup(*mid)
    g.observe(*q, 1.9)
    for _ in range(100):
        g.observe(*q, table * 0.9)
    assert g.lookup(*q) == pytest.approx(1.9)
    assert g.lookup(*q, profiled=True) == pytest.approx(table)
    assert g.lookup(*mid) == pytest.approx(1.9)  # the max of its neighbours, one of them raised
    g.observe(*out, 2.5)
    g.observe(*mid, 2.6)
    assert (g.lookup(*out), g.lookup(*out, profiled=True)) == (pytest.approx(2.5), pytest.approx(out_base))
    assert (g.lookup(*mid), g.lookup(*mid, profiled=True)) == (pytest.approx(2.6), pytest.approx(mid_base))
