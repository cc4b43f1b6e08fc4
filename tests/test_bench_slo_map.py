"""bench.slo_map: goodput over SLO pairs from one run's points (the FA3 H100 run)."""
import json
from pathlib import Path

from bench import slo_map

RUN = Path(__file__).resolve().parents[1] / "bench/results/conv8k_fa3_h100"


def _cell(m, tbt, ttft):
    return next(c for c in m["cells"] if (c["tbt_ms"], c["ttft_ms"]) == (tbt, ttft))


def test_slo_map_of_the_fa3_run(tmp_path):
    m = slo_map.slo_map(json.loads((RUN / "summary.json").read_text()), [30, 50, 100], [2000, 5000])
    c = _cell(m, 50, 5000)  # the run's own SLOs: what its report says
    assert c["goodput"]["mux"] == 3 and c["goodput"]["sglang-chunked-512"] == 3.5
    assert c["best_chunked"] == "sglang-chunked-1024" and c["mux_over_best_chunked"] == 0.857
    # chunked 512 at 3.5 req/s had P99 TTFT 2.5 s: it passes 5 s, not 2 s
    assert _cell(m, 50, 2000)["goodput"]["sglang-chunked-512"] == 3
    # the mux planned for 50 ms: judged by 30 or 100 ms it is not a valid cell
    assert "mux" in _cell(m, 30, 5000)["invalid"] and "mux" not in _cell(m, 30, 5000)["goodput"]
    assert _cell(m, 100, 5000)["mux_over_best_chunked"] is None
    assert _cell(m, 30, 5000)["goodput"]["sglang-chunked-1024"] is None  # P99 TBT 45.6 ms
    text = slo_map.render(m)
    assert "| mux | (served for another TBT) | (served for another TBT) | 3 | 3 |" in text
    assert slo_map.main([str(RUN), "--json", str(tmp_path / "m.json"), "--plot", str(tmp_path / "m.png")]) == 0
    assert (tmp_path / "m.png").stat().st_size > 0 and json.loads((tmp_path / "m.json").read_text())["cells"]
