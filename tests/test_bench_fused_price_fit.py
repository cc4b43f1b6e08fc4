import json

import pytest

from bench.analysis import fused_price_fit as F


def test_the_fit_reports_each_model_held_out(tmp_path, good, capsys):
    """On rows made by a known linear law of the fused features the fused-rows model is exact."""
    rows = []
    for c in (256, 512, 1024, 2048):
        for b in (1, 8, 32, 64):
            for ctx in (1000, 4000):
                reqs = [[c, 0]] + [[1, ctx]] * b
                rows.append({"reqs": reqs, "measured_ms": 2.0 + 0.02 * c + 0.05 * b + 0.003 * b * ctx / 1e3 * 1e3})
    f = tmp_path / "fused.json"
    f.write_text(json.dumps({"rows": rows}))
    assert F.main([str(f), "--table", str(good)]) == 0
    out = capsys.readouterr().out
    assert "32 fused iterations from 1 files" in out
    assert "| fused rows alone | 0.0%-0.0% | 0.0%-0.0% |" in out


def test_a_file_that_is_not_a_fused_output_is_a_usage_error(tmp_path, good, capsys):
    f = tmp_path / "x.json"
    f.write_text("{}")
    with pytest.raises(SystemExit) as e:
        F.main([str(f), "--table", str(good)])
    assert e.value.code == 2 and "not a bench.prefill_mixed --fused output" in capsys.readouterr().err
