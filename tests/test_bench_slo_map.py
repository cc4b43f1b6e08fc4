"""bench.slo_map: goodput over SLO pairs from one run's points (the FA3 H100 run)."""
import json
import lzma
from pathlib import Path

import pytest

from bench import metrics, slo_map
from sglang_mux import cli

RUN = Path(__file__).resolve().parents[1] / "tests/data/conv8k_fa3_h100"


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


def _rec(i, ttft_ms, prompt):
    return {"rid": f"r{i}", "scheduled": float(i), "send": float(i), "end": i + ttft_ms / 1e3 + 0.02, "ok": True,
            "tok_ms": [ttft_ms, ttft_ms + 20], "output_tokens": 2, "prompt_tokens": prompt, "cached_tokens": 0}


def _flat_run(tmp_path):
    """A run judged flat (K absent, as before K): at 1 req/s the mux answered 40K-token prompts in
    9 s, chunked 512 1K-token prompts in 3 s; at 2 req/s both took 20 s for 1K tokens."""
    recs = {("mux", 1): [_rec(i, 9000, 40_000) for i in range(4)],
            ("sglang-chunked-512", 1): [_rec(i, 3000, 1000) for i in range(4)]}
    for name in ("mux", "sglang-chunked-512"):
        recs[(name, 2)] = [_rec(i, 20_000, 1000) for i in range(4)]
    systems = {}
    for (name, rate), rs in recs.items():
        f = f"{name}__{rate}.jsonl"
        text = "".join(json.dumps(r) + "\n" for r in rs)
        if name == "mux":  # kept compressed, as finished runs are
            with lzma.open(tmp_path / (f + ".xz"), "wt") as fh:
                fh.write(text)
        else:
            (tmp_path / f).write_text(text)
        s = metrics.summarize(rs)
        del s["slo"]["ttft_ms_per_token"]
        systems.setdefault(name, {"points": []})["points"].append({"rate": rate, "file": f, "summary": s})
    summary = {"slo": {"tbt_ms": 50.0, "ttft_ms": 5000.0, "percentile": 99}, "systems": systems}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    return summary


def test_a_run_rejudged_by_a_length_aware_ttft_slo(tmp_path, capsys):
    summary = _flat_run(tmp_path)
    flat = slo_map.slo_map(summary, [50], [2000, 5000])
    assert flat["ttft_ms_per_token"] == 0
    assert _cell(flat, 50, 5000)["goodput"] == {"mux": None, "sglang-chunked-512": 1}
    aware = slo_map.slo_map(slo_map.rejudged(summary, tmp_path, 0.2), [50], [2000, 5000])
    assert aware["ttft_ms_per_token"] == 0.2
    # less 0.2 ms a token: the mux's 9 s for 40K tokens is 1 s, chunked 512's 3 s for 1K 2.8 s
    assert _cell(aware, 50, 2000)["goodput"] == {"mux": 1, "sglang-chunked-512": None}
    assert _cell(aware, 50, 5000)["goodput"] == {"mux": 1, "sglang-chunked-512": 1}
    assert _cell(aware, 50, 5000)["mux_over_best_chunked"] == 1.0
    assert slo_map.main([str(tmp_path), "--tbt", "50", "--ttft", "2000", "--ttft-per-token", "0.2"]) == 0
    out = capsys.readouterr().out
    assert "| TBT 50 / TTFT 2 s + 0.2 ms/token |" in out and "| mux | 1 |" in out
    assert "| sglang-chunked-512 | < lowest |" in out
    assert slo_map.main([str(tmp_path), "--tbt", "50", "--ttft", "2000", "--ttft-per-token", "0"]) == 0
    assert "| TBT 50 / TTFT 2 s |" in capsys.readouterr().out   # the run's own K: no records read


def test_rejudging_needs_the_records(tmp_path, capsys):
    _flat_run(tmp_path)
    (tmp_path / "sglang-chunked-512__1.jsonl").unlink()
    with pytest.raises(SystemExit) as e:
        cli.run(slo_map.main, [str(tmp_path), "--ttft-per-token", "0.2"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "no request records" in err and "sglang-chunked-512__1.jsonl" in err


RESULTS = Path(__file__).resolve().parents[1] / "bench/results"


def test_a_map_over_runs_gives_each_cell_its_ratio_or_a_bound(tmp_path, capsys):
    tbt50 = json.loads((RESULTS / "capped_tbt50_h100_2026-11-27/summary.json").read_text())
    c = slo_map.map_cell(tbt50)
    assert (c["workload"], c["tbt_ms"], c["mux"]) == ("capped conversation", 50.0, "mux-hybrid")
    assert c["mux_goodput"] == [4.4, "="] and c["chunked_goodput"] == [4.4, "="] and c["best_chunked"] == "sglang-chunked-1024"
    assert (c["ratio"], c["ratio_rel"]) == (1.0, "=")
    # the hybrid passed none of 3 and 3.7 at TBT 30: below 3 / 4
    c30 = slo_map.map_cell(json.loads((RESULTS / "capped_tbt30_h100_2026-11-27/summary.json").read_text()))
    assert c30["mux_goodput"] == [3.0, "<"] and c30["chunked_goodput"] == [4.0, "="]
    assert (c30["ratio"], c30["ratio_rel"]) == (0.75, "<")
    pred = {"cells": [{"workload": "capped conversation (<= 8000)", "tbt_slo_ms": 30.0,
                       "goodput": {"hybrid": 4, "dispatcher": 3.3, "chunked 512 + mixed": 4, "chunked 1024 + mixed": None}},
                      {"workload": "code", "tbt_slo_ms": 30.0,
                       "goodput": {"hybrid": 20, "chunked 512 + mixed": 17, "chunked 1024 + mixed": 12}}]}
    assert slo_map.predicted_cell(pred, "capped conversation", 30.0) == 1.0
    assert slo_map.predicted_cell(pred, "chat-1k", 30.0) is None
    text = slo_map.render_cells([c, c30], pred)
    assert "| 30 | capped conversation | mux-hybrid < 3 | sglang-chunked-512 4 | < 0.75 | 1.00 |" in text
    assert "| 50 | capped conversation | mux-hybrid 4.4 | sglang-chunked-1024 4.4 | 1.00 | — |" in text
    p = tmp_path / "p.json"
    p.write_text(json.dumps(pred))
    args = ["--cells", str(RESULTS / "capped_tbt50_h100_2026-11-27"), str(RESULTS / "capped_tbt30_h100_2026-11-27"),
            "--predicted", str(p), "--plot", str(tmp_path / "map.png"), "--json", str(tmp_path / "cells.json")]
    assert slo_map.main(args) == 0
    assert (tmp_path / "map.png").stat().st_size > 0 and len(json.loads((tmp_path / "cells.json").read_text())) == 2
    with pytest.raises(SystemExit):  # several runs without --cells
        slo_map.main([str(RESULTS / "capped_tbt50_h100_2026-11-27"), str(RESULTS / "capped_tbt30_h100_2026-11-27")])


def test_a_map_cell_needs_a_multiplexed_and_a_chunked_system():
    summary = json.loads((RESULTS / "capped_tbt50_h100_2026-11-27/summary.json").read_text())
    only_chunked = {**summary, "systems": {k: v for k, v in summary["systems"].items() if k.startswith("sglang")}}
    with pytest.raises(cli.UsageError, match="one multiplexed system"):
        slo_map.map_cell(only_chunked)


def test_a_cells_rounds_on_one_host_merge_the_later_round_deciding_a_rate_tested_twice(tmp_path, capsys):
    s44 = RESULTS / "x4_s44_2026-11-27"
    first, second = (json.loads((s44 / d / "summary.json").read_text()) for d in ("code30", "code30lo"))
    # chunked 512 failed 12 req/s in the first round (P99 TBT 31.9 ms) and passed it in the second
    assert slo_map.map_cell(first)["chunked_goodput"] == [12.0, "<"]
    c = slo_map.map_cell(slo_map.merged_runs([first, second]))
    assert (c["mux_goodput"], c["best_chunked"], c["chunked_goodput"]) == ([12.0, "="], "sglang-chunked-512", [12.0, "="])
    assert c["ratio"] == 1.0
    other = {**second, "slo": {**second["slo"], "tbt_ms": 50.0}}
    with pytest.raises(cli.UsageError, match="differ in slo"):
        slo_map.merged_runs([first, other])
    lone = {**second, "hardware": {**second["hardware"], "cpus": 16}}
    with pytest.raises(cli.UsageError, match="different hosts"):
        slo_map.merged_runs([first, lone])
    assert slo_map.main(["--cells", f"{s44 / 'code30'}+{s44 / 'code30lo'}"]) == 0
    assert "| 30 | code | mux-hybrid 12 | sglang-chunked-512 12 | 1.00 |" in capsys.readouterr().out
