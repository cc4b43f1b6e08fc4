"""The prompt-length limit that keeps one layer-wise prefill inside the memory left after the KV
pool; the numbers are the H100 run of bench/results/conv_uncapped_h100_s22."""

import json

import pytest

from sglang_mux import prefill_memory as pm

GIB = pm.GIB
LLAMA = "launch/models/llama-3.1-8b/config.json"
H100 = int(79.18 * GIB)


def limit(free_gib, max_input_len=131071, max_prefill_tokens=16384, mem_fraction=0.85):
    return pm.prompt_limit(free_bytes=int(free_gib * GIB), total_bytes=H100, per_token=pm.bytes_per_token_of(LLAMA),
                           max_input_len=max_input_len, max_prefill_tokens=max_prefill_tokens,
                           mem_fraction=mem_fraction)


def test_bytes_per_token_from_the_shipped_configs():
    assert pm.bytes_per_token_of(LLAMA) == 2 * (3 * 14336 + 8 * 4096) == 151552
    assert pm.bytes_per_token_of("launch/models/qwen3-8b/config.json") == 2 * (3 * 12288 + 8 * 4096)


def test_float32_doubles_and_a_config_without_an_mlp_is_refused(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps({"hidden_size": 64, "intermediate_size": 256, "torch_dtype": "float32"}))
    assert pm.bytes_per_token_of(str(p)) == 4 * (3 * 256 + 8 * 64)
    p.write_text(json.dumps({"hidden_size": 64}))
    with pytest.raises(ValueError, match="intermediate_size"):
        pm.bytes_per_token_of(str(p))


def test_the_prompt_that_ran_out_of_memory_is_refused_and_the_log_says_what_to_set():
    # 0.85: 7.61 GiB free (the server's log). A 67,668-token prefill ran out of memory there
    # (conv_uncapped_h100_s22), and so did a 45,130-token one once the allocator held 2.27 GiB
    # reserved but unallocated (long_prompts_h100_2026-12-06): the margin keeps both out.
    lim = limit(7.61)
    assert pm.MARGIN_BYTES == int(2.75 * GIB)
    assert lim.fits == (int(7.61 * GIB) - pm.MARGIN_BYTES) // 151552 == 34432
    assert lim.max_input_len == 34432 < 45130 < 67668
    assert "prompts of 34432 tokens or more are refused" in lim.message
    # 131,071 tokens need 18.5 GiB + the 2.75 GiB margin: 13.6 GiB short, 0.172 of 79.18 GiB.
    assert "--mem-fraction-static 0.67 (now 0.85)" in lim.message


def test_the_fraction_that_served_it_keeps_it():
    lim = limit(15.49, mem_fraction=0.75)  # 0.75: 15.49 GiB free
    assert lim.max_input_len == lim.fits == 90262 > 68208  # the longest prompt the plan's rates send


def test_enough_memory_keeps_sglangs_limit_and_says_nothing():
    lim = limit(22.0, max_input_len=131071)
    assert (lim.max_input_len, lim.message) == (131071, None)
    assert lim.fits > 131071


def test_a_server_that_cannot_hold_one_prefill_batch_does_not_start():
    with pytest.raises(ValueError, match="--max-prefill-tokens 16384 needs 2.3 GiB.*--mem-fraction-static"):
        limit(4.0)
    assert limit(4.0, max_prefill_tokens=8192).max_input_len == int(1.25 * GIB) // 151552
