"""The fused iteration's model (latency_model.fused): its price, its fit from a table's fused
rows, the estimator pricing with it (or without it as before), check and the add-fused CLI."""

import io
import json
import random
from pathlib import Path

import numpy as np
import pytest

from sglang_mux import cli
from sglang_mux.estimator import Estimator, PrefillReq, TableError, check_table
from sglang_mux.estimator.command import main
from sglang_mux.estimator.table_check import _check_fused
from sglang_mux.fused_price import DECODE_ROW_MS, sglang_graph_tokens
from sglang_mux.latency_model import fused
from sglang_mux.tables import FUSED_ROWS, read_table

ROOT = Path(__file__).resolve().parents[1]
H100_FA3 = ROOT / "contention_tables" / "llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3"
# A known law (ms per token in each band, per n·r, per n², per context token)
THETA = (0.036, 0.005, 0.02, 8e-7, 5e-7, 4e-5)


def _batches(seed=0, count=60):
    """bench.prefill_mixed --fused-like batches: a 256-4096-token chunk in 1-2 pieces (the first
    over a prefix or not) and 1-128 decode rows."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        c, rows = rng.choice((256, 512, 1024, 2048, 4096)), rng.choice((1, 8, 32, 64, 128))
        cut = rng.randint(1, c - 2) if rng.random() < 0.5 else c
        pieces = [(cut, rng.choice((0, rng.randint(500, 8000))))] + ([(c - cut, 0)] if cut < c else [])
        out.append(pieces + [(1, rng.randint(200, 4000)) for _ in range(rows)])
    return out


def _law(reqs):
    return fused.FusedModel(fused.KNOTS, THETA).price([PrefillReq(n, r) for n, r in reqs])


def _result(rows, device="NVIDIA H200", backend="triton", date="2026-11-27T00:00:00+00:00", sms=132):
    return {"device": device, "kind": "fused", "attention_backend": backend, "date": date,
            "rows": [{"prefill_sms": sms, "reqs": r, "measured_ms": _law(r)} for r in rows]}


def test_the_price_is_the_token_bands_and_sums():
    m = fused.FusedModel((384, 640), THETA)
    rows = [PrefillReq(700, 1000), PrefillReq(100, 0)] + [PrefillReq(1, 2000)] * 10
    assert fused.sums(rows) == (810, 700_000, 500_000, 20_000)
    # 384 + 256 + 170 tokens in the bands, then Σn·r, Σn², Σctx
    want = 0.036 * 384 + 0.005 * 256 + 0.02 * 170 + 8e-7 * 700_000 + 5e-7 * 500_000 + 4e-5 * 20_000
    assert m.price(rows) == pytest.approx(want, rel=1e-12)
    assert m.ms(300, 0, 0, 0) == pytest.approx(0.036 * 300) and m.ms(500, 0, 0, 0) == pytest.approx(
        0.036 * 384 + 0.005 * 116)
    # below the fewest tokens of a fitted batch: priced as that batch's bands (a bound)
    low = fused.FusedModel((384, 640), THETA, min_tokens=257)
    assert low.ms(64, 0, 0, 10) == pytest.approx(0.036 * 257 + 4e-5 * 10) and low.ms(300, 0, 0, 0) == m.ms(300, 0, 0, 0)
    assert fused.FusedModel.from_dict(low.to_dict()).to_dict() == low.to_dict() == {
        "features": list(fused.FUSED_FEATURES), "knots": [384, 640], "min_tokens": 257, "theta": list(THETA)}


@pytest.mark.parametrize("bad", [{"knots": [640, 384], "theta": list(THETA)}, {"knots": [384, 640], "theta": [1.0]},
                                 {"knots": [384, 640], "theta": [-1.0, 0, 0, 0, 0, 0]}, {"theta": list(THETA)},
                                 {"knots": [384, 640], "theta": list(THETA), "features": ["x"] * 6}])
def test_a_bad_fused_model_is_refused(bad):
    with pytest.raises(ValueError):
        fused.FusedModel.from_dict(bad)


def test_the_fit_recovers_a_known_law_and_holds_out_exactly():
    batches = [[PrefillReq(n, r) for n, r in b] for b in _batches()]
    ms = [_law(b) for b in _batches()]
    m = fused.fit(batches, ms)
    assert m.knots == fused.KNOTS and m.min_tokens == min(fused.sums(b)[0] for b in batches)
    assert m.theta == pytest.approx(THETA, rel=1e-6)
    assert fused.heldout_errors(batches, ms).max() < 1e-6


def test_a_table_without_fused_rows_keeps_the_solo_price(good):
    est = Estimator.from_table(good)
    assert est.fused_model is None and read_table(good).fused_rows is None
    rows = [PrefillReq(300, 0)] + [PrefillReq(1, 5000)] * 8
    assert est.fused_base_ms(rows) == est.solo.prefill_ms(132, rows) + 8 * DECODE_ROW_MS
    for name in ("llama-3.1-8b__nvidia-h200__fa3", "llama-3.1-8b__nvidia-h200__triton",
                 "llama-3.1-8b__nvidia-h100-80gb-hbm3__triton", "qwen3-8b__nvidia-h100-80gb-hbm3__fa3"):
        assert Estimator.from_table(ROOT / "contention_tables" / name).fused_model is None, name


def test_add_fused_fits_the_table_and_the_estimator_prices_with_it(small_table, capsys):
    f = small_table.parent / "fused.json"
    f.write_text(json.dumps(_result(_batches())))
    assert main(["add-fused", str(small_table), str(f)]) == 0
    assert f"{f}: 60 rows" in capsys.readouterr().out
    assert len((small_table / FUSED_ROWS).read_text().splitlines()) == 60
    fit = json.loads((small_table / "fit.json").read_text())["fused"]
    assert fit["rows"] == 60 and fit["knots"] == [384, 640] and fit["theta"] == pytest.approx(THETA, rel=1e-6)
    assert fit["train_max_rel_err"] < 1e-6
    est = Estimator.from_table(small_table)
    pieces, ctx = [PrefillReq(700, 1000), PrefillReq(100, 0)], [2000] * 10
    want = est.fused_model.ms(810, 700_000, 500_000, 20_000)
    assert est.fused_base_ms(pieces, est.decode_rows(ctx)) == pytest.approx(want, rel=1e-12)
    assert est.fused_base_ms(pieces + [PrefillReq(1, c) for c in ctx]) == pytest.approx(want, rel=1e-12)
    assert est.fused_ms(pieces, ctx) == pytest.approx(want, rel=1e-12)  # nothing served yet: that price
    assert want == pytest.approx(_law([(700, 1000), (100, 0)] + [(1, 2000)] * 10), rel=1e-6)
    # through the prefill graph: priced at the captured size the batch is padded to (810 -> 832)
    est.graph_tokens = sglang_graph_tokens(4096)
    assert est.fused_base_ms(pieces, est.decode_rows(ctx)) == pytest.approx(
        est.fused_model.ms(832, 700_000, 500_000, 20_000), rel=1e-12)
    # at TP > 1 the rank's all-reduces over the padded batch are added, as to a prefill
    est.allreduce = type("AllReduce", (), {"forward_ms": lambda self, tokens, layers: tokens * layers * 1e-4})()
    assert est.fused_base_ms(pieces, est.decode_rows(ctx)) == pytest.approx(
        est.fused_model.ms(832, 700_000, 500_000, 20_000) + 832 * 32 * 1e-4, rel=1e-12)
    # the same run again is skipped, not doubled
    assert main(["add-fused", str(small_table), str(f)]) == 0
    assert "is in the table already, skipped" in capsys.readouterr().out
    assert len((small_table / FUSED_ROWS).read_text().splitlines()) == 60


def test_check_reports_the_fused_rows_held_out_against_the_bounds(small_table):
    f = small_table.parent / "fused.json"
    f.write_text(json.dumps(_result(_batches())))
    assert main(["add-fused", str(small_table), str(f)]) == 0
    out = io.StringIO()
    assert check_table(small_table, out=out)
    assert "fused    sms= 132 rows=   60  held-out rel err max  0.00% mean  0.00%  OK (token bands, knots 384/640)" \
        in out.getvalue()
    # rows no linear law of the features gives: the bounds missed, said
    rows = [{"reqs": r, "measured_ms": _law(r) * (1.3 if i % 2 else 0.8), "run": "x"}
            for i, r in enumerate(_batches())]
    t = read_table(small_table)
    t.fused_rows = rows
    out = io.StringIO()
    assert not _check_fused(Estimator.from_table(small_table), t, out)
    assert "fused    sms= 132 rows=   60  held-out rel err max" in out.getvalue() and out.getvalue().endswith(
        "FAIL (token bands, knots 384/640)\n")


def test_check_without_fused_rows_says_how_fused_iterations_are_priced(small_good):
    out = io.StringIO()
    assert _check_fused(Estimator.from_table(small_good), read_table(small_good), out)
    assert out.getvalue().startswith(f"fused    no {FUSED_ROWS}: a fused iteration is priced by the solo prefill fit")


def test_a_stale_or_malformed_fused_part_is_refused(small_table):
    f = small_table.parent / "fused.json"
    f.write_text(json.dumps(_result(_batches(count=20))))
    assert main(["add-fused", str(small_table), str(f)]) == 0
    with open(small_table / FUSED_ROWS, "a") as out:  # a row added by hand, not fitted
        out.write(json.dumps({"reqs": [[256, 0], [1, 100]], "measured_ms": 9.0, "run": "y"}) + "\n")
    with pytest.raises(TableError, match="fitted on 20 fused rows, fused_rows.jsonl has 21"):
        Estimator.from_table(small_table)
    with open(small_table / FUSED_ROWS, "a") as out:
        out.write('{"reqs": [[0, 5]], "measured_ms": 9.0}\n')
    with pytest.raises(TableError, match=r"fused_rows.jsonl: line 22 is not a fused row"):
        read_table(small_table)
    (small_table / FUSED_ROWS).unlink()
    with pytest.raises(TableError, match="fitted on 20 fused rows, fused_rows.jsonl has none"):
        Estimator.from_table(small_table)


@pytest.mark.parametrize("kw, says", [({"device": "NVIDIA H100 80GB HBM3"}, "measured on 'NVIDIA H100 80GB HBM3'"),
                                      ({"backend": "fa3"}, "with 'fa3'; the table is"),
                                      ({"sms": 116}, "rows on 116 SMs;")])
def test_add_fused_refuses_rows_of_another_gpu_backend_or_partition(small_table, kw, says):
    f = small_table.parent / "fused.json"
    f.write_text(json.dumps(_result(_batches(count=4), **kw)))
    with pytest.raises(cli.UsageError, match=says):
        main(["add-fused", str(small_table), str(f)])
    assert not (small_table / FUSED_ROWS).exists()


def test_add_fused_refuses_a_malformed_row(small_table):
    res = _result(_batches(count=4))
    res["rows"][2]["reqs"] = [[0, 10]]
    f = small_table.parent / "fused.json"
    f.write_text(json.dumps(res))
    with pytest.raises(cli.UsageError, match="a row is not a fused iteration's"):
        main(["add-fused", str(small_table), str(f)])
    assert not (small_table / FUSED_ROWS).exists()


def test_an_output_without_its_backend_field_is_read_by_its_command(small_table):
    res = _result(_batches(count=4))
    del res["attention_backend"]
    res["command"] = "python -m bench.prefill_mixed --fused --attention-backend fa3 --out x.json"
    f = small_table.parent / "fused.json"
    f.write_text(json.dumps(res))
    with pytest.raises(cli.UsageError, match="with 'fa3'"):
        main(["add-fused", str(small_table), str(f)])


def test_the_shipped_h100_fa3_table_prices_its_fused_rows_within_the_bounds():
    """In-sample (the held-out check is `estimator check`'s: 9.97 % / 2.32 %)."""
    est = Estimator.from_table(H100_FA3)
    rows = read_table(H100_FA3).fused_rows
    assert est.fused_model is not None and len(rows) == 270 and est.fused_model.knots == (384, 640)
    err = np.array([est.fused_base_ms([PrefillReq(n, r) for n, r in x["reqs"]]) / x["measured_ms"] - 1 for x in rows])
    assert np.abs(err).max() <= 0.10 and np.abs(err).mean() <= 0.03
    # the grid's small chunk beside 128 decode rows (19.5 ms measured), which the solo fit priced 27 % low
    row = [PrefillReq(256, 0)] + [PrefillReq(1, 1000)] * 128
    assert est.fused_base_ms(row) == pytest.approx(19.5, rel=0.10)


def test_a_batch_padded_to_one_of_cublas_slow_sizes_pays_its_gemm_excess():
    """The H100 FA3 table's GEMM curve: 448 tokens take 13.9 ms, 512 9.7 (served at TBT 30, 448-token
    batches ran 1.18 x their base price). Through the prefill graph a batch padded to 448 costs
    the curve's excess over the cheapest larger captured size on top of the bands; one padded to
    512 nothing more; eagerly (no graph) no batch does."""
    est = Estimator.from_table(H100_FA3)
    assert est.graph_cliffs == {}
    pieces, ctx = [PrefillReq(400, 2000)], est.decode_rows([3000] * 30)
    eager = est.fused_base_ms(pieces, ctx)
    est.graph_tokens = sglang_graph_tokens(4096)
    curve = est.solo.gemm_curve
    assert {448, 832} <= set(est.graph_cliffs) and not {512, 576, 640, 1024} & set(est.graph_cliffs)
    assert est.graph_cliffs[448] == pytest.approx(curve.at(132, 448) - curve.at(132, 512), rel=1e-12)
    assert est.graph_cliffs[448] > 4.0  # 13.9 against 9.7 ms
    bands = est.fused_model.ms(448, 400 * 2000, 400 * 400, 90_000)
    assert eager == pytest.approx(est.fused_model.ms(430, 400 * 2000, 400 * 400, 90_000), rel=1e-12)
    assert est.fused_base_ms(pieces, ctx) == pytest.approx(bands + est.graph_cliffs[448], rel=1e-12)
    at_512 = [PrefillReq(482, 2000)]
    assert est.fused_base_ms(at_512, ctx) == pytest.approx(est.fused_model.ms(512, 482 * 2000, 482 * 482, 90_000))
