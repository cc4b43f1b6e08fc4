"""GPU smoke test of the profiling harness (skipped without a GPU and sglang 0.5.16; ~2-3 min:
one start-up with two decode graph sizes, then a few small cells of each kind)."""

import os

import pytest

pytestmark = pytest.mark.gpu
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LLAMA = os.path.join(ROOT, "launch/models/llama-3.1-8b/config.json")


@pytest.fixture(scope="module")
def h():
    from profiling.harness import Harness

    return Harness(LLAMA, decode_bs=(1, 8), mem_fraction_static=0.75, attention_backend="triton")


def _pool_is_free(h):
    mr = h.model_runner
    return mr.token_to_kv_pool_allocator.available_size() >= h.kv_pool_tokens - h.page_size


def test_startup_facts(h):
    f = h.facts()
    assert f["sm_count"] == h.total_sms >= 100
    assert len(h.cfgs) == len(h.parts.configs) + 2 and h.capture_bs == [1, 8]
    assert len(h.capture_stats) == len(h.cfgs)  # one decode graph set per stream group
    assert h.kv_pool_tokens > 100_000
    # the decode kernel's occupancy, the decode fit's k (6 on the H100 and H200: 80 registers a thread)
    assert f["decode_blocks_per_sm"] == f["decode_kernel"]["blocks_per_sm"] == 6


def test_prefill_with_reused_tokens_costs_more(h):
    cfg = h.config(0, h.total_sms)
    a = h.prefill_ms([(2048, 0)], cfg, layers_per_launch=4)
    b = h.prefill_ms([(2048, 16384)], cfg, layers_per_launch=4)
    assert 1 < a < b
    small = h.config(h.parts.configs[-1].decode_sms, h.parts.configs[-1].prefill_sms)  # fewest prefill SMs
    assert h.prefill_ms([(2048, 0)], small, layers_per_launch=4) > a
    assert _pool_is_free(h)


def test_decode_graph_replay_per_partition(h):
    d16 = h.parts.configs[0]
    slow = h.decode_ms(8, 2048, d16)
    fast = h.decode_ms(8, 2048, h.parts.full_decode)
    assert 0.5 < fast < slow
    assert _pool_is_free(h)


def test_corun_and_layerwise_overhead(h):
    cfg = h.parts.configs[3]
    solo, corun = h.corun([(8192, 0)], 8, 2048, cfg, layers_per_launch=2)
    assert solo > 0 and corun > 0.9 * solo
    r = h.monolithic_vs_layerwise(8192, repeats=4)
    assert r["monolithic_ms"] > 0 and abs(r["overhead_pct"]) < 10
    assert _pool_is_free(h)


def test_cells_do_not_leak(h):
    cfg = h.parts.configs[2]
    for _ in range(20):
        h.decode_samples(8, 4096, cfg, repeats=2, warmup=1)
        h.prefill_samples([(512, 4096)] * 2, cfg, repeats=1)
    assert _pool_is_free(h)
