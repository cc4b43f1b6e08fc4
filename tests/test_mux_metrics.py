"""Prometheus metrics of the mux (idempotent registration) and the decision timeline."""

import json

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from sglang_mux.mux_metrics import MuxMetrics, TimelineWriter, load_timeline


from sglang_mux.partitions import PartitionConfig
from sglang_mux.policy import SpatialPlan


def _plan(reason="best-fit", d=48, preempt=False, t_d=40.0):
    return SpatialPlan(partition=PartitionConfig(d, 132 - d), t_decode_worst_ms=t_d, t_prefill_ms=900.0,
                       prefill_layers=2, new_prefill_rids=("a", "b") if preempt else (), preempt=preempt, reason=reason)


def _val(reg, name, labels=None):
    v = reg.get_sample_value(name, labels or {})
    return 0.0 if v is None else v


def test_metrics_values():
    reg = CollectorRegistry()
    m = MuxMetrics(reg)
    m.on_partition(48, 84)
    assert _val(reg, "sglang_mux:decode_sms") == 48 and _val(reg, "sglang_mux:prefill_sms") == 84
    m.on_decode(_plan(), measured_ms=30.0, decide_us=40.0)
    m.on_decode(_plan(), measured_ms=44.0, fixed_cost_ms=0.5)
    m.on_plan(_plan("overload-decode-first", d=132))
    m.on_preemption()
    m.on_guard_refinement()
    m.on_guard_refinement(2)
    m.on_prefill_launch(12.5)
    m.on_prefill_launch(0.0)  # nothing measured: not counted
    m.on_prefill_correction(84, 1.1)
    m.on_prefill_correction(84, 1.35)  # the latest value per partition
    m.on_prefill_correction(68, 1.2)
    assert _val(reg, "sglang_mux:decisions_total", {"reason": "best-fit"}) == 2
    assert _val(reg, "sglang_mux:decisions_total", {"reason": "overload-decode-first"}) == 1
    assert _val(reg, "sglang_mux:preemptions_total") == 1
    assert _val(reg, "sglang_mux:guard_refinements_total") == 3
    assert _val(reg, "sglang_mux:decode_latency_ratio_count") == 2
    assert _val(reg, "sglang_mux:decode_latency_ratio_sum") == pytest.approx(30 / 40 + 44 / 40)
    assert _val(reg, "sglang_mux:decode_latency_ratio_bucket", {"le": "1.0"}) == 1
    assert _val(reg, "sglang_mux:decision_seconds_count") == 1
    assert _val(reg, "sglang_mux:decode_fixed_cost_ms") == 0.5
    assert _val(reg, "sglang_mux:prefill_launch_host_seconds_total") == pytest.approx(0.0125)
    assert _val(reg, "sglang_mux:prefill_correction", {"prefill_sms": "84"}) == 1.35
    assert _val(reg, "sglang_mux:prefill_correction", {"prefill_sms": "68"}) == 1.2
    assert b"sglang_mux:decode_sms" in generate_latest(reg)


def test_registration_is_idempotent():
    reg = CollectorRegistry()
    a, b = MuxMetrics(reg), MuxMetrics(reg)
    a.on_preemption()
    b.on_preemption()
    assert _val(reg, "sglang_mux:preemptions_total") == 2
    MuxMetrics()  # the default registry, twice (SGLang's /metrics)
    MuxMetrics()


def test_constant_labels():
    reg = CollectorRegistry()
    m = MuxMetrics(reg, labels={"model_name": "llama"})
    m.on_partition(16, 116)
    m.on_decode(_plan(), 10.0)
    assert _val(reg, "sglang_mux:decode_sms", {"model_name": "llama"}) == 16
    assert _val(reg, "sglang_mux:decisions_total", {"model_name": "llama", "reason": "best-fit"}) == 1


def test_timeline_roundtrip(tmp_path):
    path = tmp_path / "sub" / "tl.jsonl"
    with TimelineWriter(path) as tl:
        tl.write(_plan(), now=1.5, decode_bs=32, measured_decode_ms=31.0)
        tl.write(_plan("preempt+best-fit", preempt=True), now=1.6, decode_bs=33)
        tl.write(now=1.7, note="no plan")
    with open(path, "a") as f:
        f.write('{"time": 1.8, "decode_sm')  # a writer killed mid-line
    df = load_timeline(path)
    assert list(df["time"]) == [1.5, 1.6, 1.7]
    assert df.loc[0, "decode_sms"] == 48 and df.loc[0, "measured_decode_ms"] == 31.0
    assert bool(df.loc[1, "preempt"]) and df.loc[1, "new_prefill"] == 2 and df.loc[1, "reason"] == "preempt+best-fit"
    assert df.loc[2, "note"] == "no plan"
    # Appends: a second writer adds to the same file.
    with TimelineWriter(path) as tl:
        tl.write(_plan(), now=2.0)
    assert len(load_timeline(path)) == 4
    json.loads(path.read_text().splitlines()[0])  # each line is plain JSON
    import lzma
    xz = tmp_path / "tl.jsonl.xz"
    xz.write_bytes(lzma.compress(path.read_bytes()))  # as bench/results keeps timelines
    assert list(load_timeline(xz)["time"]) == list(load_timeline(path)["time"])


def test_timeline_is_rotated_at_its_size_cap(tmp_path):
    """A long run keeps at most about twice the cap on disk: the full file moves to .1."""
    path = tmp_path / "tl.jsonl"
    line = len(json.dumps({"time": 1.0, "i": 0}, separators=(",", ":"))) + 1
    with TimelineWriter(path, max_bytes=10 * line) as tl:
        for i in range(25):
            tl.write(now=1.0, i=i % 10)
    old, new = load_timeline(str(path) + ".1"), load_timeline(path)
    assert len(old) == 10 and len(new) == 5 and path.stat().st_size <= 10 * line
    assert list(new["i"]) == [0, 1, 2, 3, 4]  # the newest decisions are in the live file
    # a writer reopening a file already at the cap rotates before its first line
    with TimelineWriter(path, max_bytes=5 * line) as tl:
        tl.write(now=2.0, i=9)
    assert len(load_timeline(path)) == 1 and len(load_timeline(str(path) + ".1")) == 5


def test_memory_gauges_are_throttled():
    reg = CollectorRegistry()
    m = MuxMetrics(reg)
    stats = {"allocated_bytes.all.current": 100, "reserved_bytes.all.current": 300, "num_alloc_retries": 0}
    assert m.on_memory(stats, now=10.0)
    assert m.on_memory({**stats, "allocated_bytes.all.current": 999}, now=12.0) is False  # within 5 s
    assert _val(reg, "sglang_mux:cuda_allocated_bytes") == 100
    assert m.on_memory({**stats, "num_alloc_retries": 2}, now=15.0)
    assert _val(reg, "sglang_mux:cuda_reserved_bytes") == 300
    assert _val(reg, "sglang_mux:cuda_alloc_retries") == 2


def test_each_data_parallel_replica_has_its_own_timeline_file():
    from sglang_mux.mux_metrics import replica_path

    assert replica_path("/tmp/t.jsonl", None) == "/tmp/t.jsonl"
    assert [replica_path("/tmp/t.jsonl", r) for r in (0, 1)] == ["/tmp/t.jsonl.dp0", "/tmp/t.jsonl.dp1"]
