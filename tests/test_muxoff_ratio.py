"""bench.analysis.muxoff_ratio: mux-off / sglang per pair, their median, incomplete pairs named."""
import json

import pytest

from bench.analysis import muxoff_ratio as M


def _pair(d, name, tput):
    p = d / name
    p.mkdir()
    systems = {s: {"points": [{"summary": {"output_tok_s": t}}] if t else []} for s, t in tput.items()}
    (p / "summary.json").write_text(json.dumps({"systems": systems}))


def test_each_pair_and_the_median(tmp_path, capsys):
    _pair(tmp_path, "pair1", {"sglang": 1000.0, "mux-off": 990.0})
    _pair(tmp_path, "pair2", {"mux-off": 1010.0, "sglang": 1000.0})
    _pair(tmp_path, "pair3", {"sglang": 1000.0, "mux-off": None})  # mux-off did not start
    assert M.main([str(tmp_path)]) == 0
    r = json.loads((tmp_path / "ratios.json").read_text())
    assert r["pairs"]["pair1"]["ratio"] == 0.99 and r["pairs"]["pair2"]["ratio"] == 1.01
    assert r["median_ratio"] == pytest.approx(1.0) and r["incomplete"] == ["pair3"]
    capsys.readouterr()


def test_a_directory_without_pairs_is_an_error(tmp_path):
    with pytest.raises(SystemExit):
        M.main([str(tmp_path)])
