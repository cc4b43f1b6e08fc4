"""bench.work_bound: the GPU's shares of a workload, the bounds they give, the table's co-run efficiency."""
from pathlib import Path

import pytest

from bench import work_bound as WB
from sglang_mux.sim import TraceReq

ROOT = Path(__file__).resolve().parents[1]
H100_FA3 = ROOT / "contention_tables" / "llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3"


class Fake:
    total_sms, num_layers = 132, 32

    def prefill_ms(self, p, reqs):
        return sum(0.01 * q.n + 0.001 * q.r for q in reqs)

    def decode_solo_ms(self, d, bs, sum_reused, max_reused=None):
        return 7.0 + 0.25 * bs


def test_shares_at_a_rate():
    reqs = [TraceReq("a", 0.0, 10000, 100, 0), TraceReq("b", 1.0, 10000, 300, 8000)]
    s = WB.shares(reqs, Fake(), rate=2.0, tbt_slo_ms=30, host_ms=2.0)
    # prefill: mean of 100 ms and 20 + 8 = 28 ms per request, 2 per second
    assert s["prefill"] == pytest.approx(2 * 0.064)
    # decode: bs = 2 req/s x 200 tokens x 28 ms = 11; 7 + 2.75 ms every 28 ms; weights 7.25 / 28
    assert (s["decode_bs"], s["decode_ms"]) == (11, 9.75)
    assert s["decode"] == pytest.approx(9.75 / 28, abs=1e-3) and s["weights"] == pytest.approx(7.25 / 28, abs=1e-3)
    assert s["time_slicing"] == pytest.approx(0.128 + 9.75 / 28, abs=2e-3)
    assert s["mixed"] == pytest.approx(s["time_slicing"] - s["weights"], abs=2e-3)
    assert s["chunked_prefill"] == s["prefill"]  # no --chunk: whole prompts
    # in 4000-token chunks: a pays 40, 40 + 4 and 20 + 8 ms (each chunk after the ones before),
    # b's 2000 new tokens fit one chunk after its 8000 reused: 28 ms
    assert WB.chunked_prefill_ms(Fake(), 10000, 0, 4000) == pytest.approx(112.0)
    c = WB.shares(reqs, Fake(), rate=2.0, tbt_slo_ms=30, host_ms=2.0, chunk=4000)
    assert c["chunked_prefill"] == pytest.approx(2 * (112 + 28) / 2 / 1e3)
    assert c["mixed"] == pytest.approx(c["chunked_prefill"] + c["decode"] - c["weights"], abs=2e-3)
    assert c["time_slicing"] == s["time_slicing"]
    with pytest.raises(ValueError, match="no decode time"):
        WB.shares(reqs, Fake(), 2.0, tbt_slo_ms=2.0, host_ms=2.0)


def test_bounds_and_the_lead_over_a_baseline():
    rows = [{"rate": 3, "time_slicing": 0.9, "mixed": 0.7}, {"rate": 4, "time_slicing": 1.1, "mixed": 0.9},
            {"rate": 5, "time_slicing": 1.3, "mixed": 1.05}]
    b = WB.bounds(rows, {"max": 1.4, "median": 1.15}, baseline=4)
    assert (b["time_slicing"], b["mixed"], b["co_run_at_max_E"], b["co_run_at_median_E"]) == (3, 4, 5, 4)
    assert b["lead_at_most"] == 1.25
    assert WB.bounds(rows, {"max": 0.8, "median": 0.8})["co_run_at_max_E"] is None


def test_corun_efficiency_of_the_h100_table():
    from sglang_mux.estimator import Estimator

    est = Estimator.from_table(H100_FA3)
    e = WB.corun_efficiency(H100_FA3, est, min_bs=32)
    assert e["cells"] == 126 and 1.0 < e["median"] < e["max"] < 2.0
    with pytest.raises(ValueError, match="no co-run cell"):
        WB.corun_efficiency(H100_FA3, est, min_bs=10**6)


def test_cli(capsys):
    WB.main(["--table", str(H100_FA3), "--input-cap", "8000", "--tbt-slo-ms", "30", "--rates", "3,6",
             "--baseline", "4", "--limit", "50", "--chunk", "512"])
    out = capsys.readouterr().out
    assert "| 3 |" in out and "| 6 |" in out and "a lead of at most" in out and "chunks of 512" in out
    with pytest.raises(SystemExit):
        WB.main(["--table", str(H100_FA3), "--rates", "fast"])
    assert "comma list" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        WB.main(["--table", str(H100_FA3), "--rates", "3", "--chunk", "0"])
    assert "--chunk" in capsys.readouterr().err


def test_a_tp_tables_allreduces_price_its_chunks_and_can_be_left_out(capsys):
    """At TP 4 a 512-token chunk pays 160 all-reduces at their floor, so chunked prefill costs more
    than whole prompts; --no-allreduce gives the slice alone, and on a TP-1 table it is refused."""
    tp4 = ROOT / "contention_tables" / "llama-3.1-70b__nvidia-h100-80gb-hbm3__fa3__tp4"
    args = ["--table", str(tp4), "--input-cap", "8000", "--tbt-slo-ms", "100", "--rates", "2", "--limit", "50",
            "--chunk", "512", "--json"]
    import json

    WB.main(args)
    priced = json.loads(capsys.readouterr().out)["rows"][0]
    WB.main(args + ["--no-allreduce"])
    alone = json.loads(capsys.readouterr().out)["rows"][0]
    assert priced["chunked_prefill"] > 1.2 * priced["prefill"]
    assert alone["prefill"] < priced["prefill"] and alone["chunked_prefill"] < 1.2 * alone["prefill"]
    with pytest.raises(SystemExit):
        WB.main(["--table", str(H100_FA3), "--rates", "3", "--no-allreduce"])
    assert "no all-reduces to leave out" in capsys.readouterr().err
