"""The greedy-output check's divergence probe (tests/gpu/e2e_correctness.py), on the CPU."""
import importlib
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "gpu"))
e2e = importlib.import_module("e2e_correctness")


def test_a_divergence_without_logprobs_is_probed_on_the_reference_alone(monkeypatch):
    """--no-logprobs: after the workload, the reference server is asked once more for the diverging
    request, its prompt and output up to the divergence with logprobs on; the top-2 gap there
    fills the row, and identical requests are not asked again."""
    sent = []

    def generate(url, ids, max_new, logprobs=None):
        sent.append((url, list(ids), max_new, logprobs))
        return {"output_ids": [9], "meta_info": {"output_top_logprobs": [[(-0.50, 9), (-0.52, 8)]]}}

    monkeypatch.setattr(e2e, "generate", generate)
    prompts = {"a": [1, 2], "b": [3]}
    mux = {"a": {"output_ids": [5, 6, 7]}, "b": {"output_ids": [4, 4]}}
    ref = {"a": {"output_ids": [5, 6, 8]}, "b": {"output_ids": [4, 4]}}
    gaps = e2e.probe_gaps("http://ref", prompts, mux, ref)
    assert sent == [("http://ref", [1, 2, 5, 6], 1, True)]
    assert gaps == {"a": pytest.approx(0.02)}
    rows = e2e.with_probed_gaps(e2e.compare(mux, ref), gaps)
    assert [(r["name"], r.get("first_divergence"), r.get("top2_gap_ref")) for r in rows] == [
        ("a", 2, gaps["a"]), ("b", None, None)]
    assert e2e.agreement(rows)["max_top2_gap_at_divergence"] == gaps["a"]


def test_the_check_counts_the_fused_iterations_and_the_yields_in_the_mux_timeline(tmp_path):
    """Issue 71's greedy check needs a prompt that yielded between fused chunks: the result says how
    many iterations did ("yield+fused"), apart from the plain fused ones."""
    t = tmp_path / "mux_timeline.jsonl"
    rows = [{"reason": "fused", "decode_bs": 2}, {"reason": "fused", "decode_bs": 0},
            {"reason": "yield+fused", "decode_bs": 1}, {"reason": "decode-only", "decode_bs": 3}]
    t.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert e2e.count_fused(str(t)) == {"n": 2, "with_decode_rows": 1, "yields": 1, "parks": 0}
    assert e2e.count_fused(str(tmp_path / "none.jsonl")) is None


def test_the_burst_has_a_layerwise_half_and_a_fused_half():
    """token_check.sh's burst: 3 x 30K-token prompts (under its --mux-layerwise-max-tokens 35000:
    layer-wise, preempted) 0.5 s apart, each with 4 short prompts from 8 ms behind it (a 30K
    prefill of the tiny model took ~20 ms served), and 2 s later 2 x 38K (over it: fused chunks,
    yielded into) with 12 short ones; all within the tiny model's 40,960 positions with 16 new tokens."""
    b = e2e.burst(32000, start_s=5.0)
    first = [r for r in b if not r["name"].startswith("burst_fused")]
    fused = [r for r in b if r["name"].startswith("burst_fused")]
    longs = [r for r in first if len(r["ids"]) == 30000]
    assert [r["delay"] for r in longs] == [5.0, 5.5, 6.0] and len(first) == 15
    for r in longs:  # each long prompt's short ones start while it prefills
        shorts = [x["delay"] - r["delay"] for x in first if len(x["ids"]) < 30000 and 0 < x["delay"] - r["delay"] < 0.5]
        assert len(shorts) == 4 and min(shorts) == pytest.approx(0.008)
    assert [len(r["ids"]) for r in fused][:2] == [38000] * 2 and len(fused) == 14
    assert 30000 < 35000 < e2e.FUSED_LONG_TOKENS and e2e.FUSED_LONG_TOKENS + 16 <= 40960
    assert min(r["delay"] for r in fused) == 7.0 and all(r["name"].startswith("burst_") for r in b)
