"""GPU: green-context partitions are disjoint, sized as configured, and isolate compute."""

import json

import pytest


def test_partitions_disjoint_and_isolated(tmp_path):
    from profiling import partitions_bench

    out = tmp_path / "p.json"
    assert partitions_bench.main(["--out", str(out)]) == 0
    r = json.loads(out.read_text())
    assert len(r["partitions"]) == 7 if r["sm_count"] == 132 else len(r["partitions"]) > 0
    for p in r["partitions"]:
        assert p["disjoint"], p
        assert p["decode_sm_set_size"] == p["decode_sms"], p
        assert p["prefill_sm_set_size"] == p["prefill_sms"], p
        assert p["slowdown"] <= 1.3, p
    assert r["switch_host_us_median"] <= 50


def test_bad_granularity_is_a_clear_error():
    from sglang_mux.green_ctx import GreenPartitionSet

    with pytest.raises(ValueError, match="granularity"):
        GreenPartitionSet(0, granularity=12)


def test_startup_probe_covers_every_partition():
    from sglang_mux.green_ctx import GreenPartitionSet
    from sglang_mux.probe import probe_partitions

    parts = GreenPartitionSet(0, 16)
    probe = probe_partitions(parts)
    want = {c.decode_sms for c in parts.configs} | {c.prefill_sms for c in parts.configs} | {parts.total_sms}
    assert set(probe) == want
    # More SMs never give much less GEMM throughput (loose: clocks and tiling vary).
    sms = sorted(probe)
    assert probe[sms[-1]][0] > 3 * probe[sms[0]][0]
