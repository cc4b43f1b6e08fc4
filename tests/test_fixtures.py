"""Offline fixtures: the packaged tokenizer and the random-weight checkpoint writer (no torch)."""

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from sglang_mux.testing.checkpoint import (
    param_specs,
    read_safetensors_header,
    read_tensor,
    write_random_checkpoint,
)
from sglang_mux.testing.tokenizer_fixture import (
    SPECIAL_TOKEN_IDS,
    SPECIAL_TOKENS,
    build_tokenizer,
    tokenizer_dir,
    tokenizer_vocab_size,
)

REPO = Path(__file__).resolve().parents[1]
TINY_LLAMA = REPO / "launch/models/tiny-llama/config.json"
TEXTS = [
    "Hello, world! The quick brown fox jumps over the lazy dog.",
    "  leading spaces, trailing\ttabs\t\nand\r\nCRLF\n\n",
    "héllo wörld — naïve café, 世界 你好, こんにちは, Привет, مرحبا, 🚀🔥👍🏽",
    "def f(x):\n    return {'a': [1, 2, 3.14e-5]}  # code\n",
    "<|eot_id|> written as plain text is still text? 12345678901234567890",
    "\x00\x01\x7f control bytes \ufeff\u200b",
    "",
]
MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant. "},
    {"role": "user", "content": "What is 2 + 2?"},
]
EXPECTED_CHAT = (
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|>"
    "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2 + 2?<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\n"
)


def tiny_config(**kw):
    cfg = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
        "intermediate_size": 160, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
        "num_hidden_layers": 2, "vocab_size": 4096, "tie_word_embeddings": False,
    }
    return {**cfg, **kw}


# ---- tokenizer ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def hf_tok():
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(tokenizer_dir() / "tokenizer.json"))


def test_packaged_tokenizer_files():
    d = tokenizer_dir()
    assert sorted(p.name for p in d.iterdir()) == [
        "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json"]
    assert sum(p.stat().st_size for p in d.iterdir()) < 1_000_000
    cfg = json.loads((d / "tokenizer_config.json").read_text())
    assert cfg["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert (cfg["bos_token"], cfg["eos_token"]) == ("<|begin_of_text|>", "<|eot_id|>")
    assert cfg["model_max_length"] >= 1 << 17 and "chat_template" in cfg
    assert tokenizer_vocab_size() == 4096


def test_special_token_ids(hf_tok):
    for tok, i in SPECIAL_TOKEN_IDS.items():
        assert hf_tok.token_to_id(tok) == i
    assert list(SPECIAL_TOKEN_IDS) == SPECIAL_TOKENS and list(SPECIAL_TOKEN_IDS.values()) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("text", TEXTS)
def test_roundtrip(hf_tok, text):
    enc = hf_tok.encode(text)
    assert enc.ids[0] == SPECIAL_TOKEN_IDS["<|begin_of_text|>"]  # bos prepended, like Llama-3
    assert hf_tok.decode(enc.ids[1:], skip_special_tokens=False) == text  # exact, any bytes
    if "<|" not in text:  # special-token strings in text are parsed as special tokens (as in Llama-3)
        assert hf_tok.decode(enc.ids, skip_special_tokens=True) == text
    assert max(enc.ids) < tokenizer_vocab_size()


def test_english_is_compressed(hf_tok):
    text = "The model server schedules prefill and decode batches on the same GPU."
    assert len(hf_tok.encode(text, add_special_tokens=False).ids) < len(text) / 3


def test_special_tokens_are_atomic(hf_tok):
    ids = hf_tok.encode("<|start_header_id|>user<|end_header_id|>", add_special_tokens=False).ids
    assert ids[0] == 3 and ids[-1] == 4


def test_chat_template_with_jinja():
    jinja2 = pytest.importorskip("jinja2")
    cfg = json.loads((tokenizer_dir() / "tokenizer_config.json").read_text())
    tmpl = jinja2.Environment(trim_blocks=True, lstrip_blocks=True).from_string(cfg["chat_template"])
    out = tmpl.render(messages=MESSAGES, add_generation_prompt=True, bos_token=cfg["bos_token"])
    assert out == EXPECTED_CHAT


def test_transformers_autotokenizer(tmp_path):
    transformers = pytest.importorskip("transformers")
    # Load from a checkpoint-like dir (config.json present) as SGLang does.
    write_random_checkpoint(tmp_path, tiny_config(num_hidden_layers=1))
    tok = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    assert (tok.bos_token_id, tok.eos_token_id, len(tok)) == (0, 2, 4096)
    assert tok.apply_chat_template(MESSAGES, tokenize=False, add_generation_prompt=True) == EXPECTED_CHAT
    for text in TEXTS:
        assert tok.decode(tok(text)["input_ids"][1:]) == text


def test_build_tokenizer_reproduces_packaged(tmp_path):
    """The committed files are what build_tokenizer generates (training is deterministic)."""
    build_tokenizer(tmp_path)
    new, old = (json.loads((d / "tokenizer.json").read_text()) for d in (tmp_path, tokenizer_dir()))
    assert new["model"]["vocab"] == old["model"]["vocab"]
    assert new["model"]["merges"] == old["model"]["merges"]
    assert new["added_tokens"] == old["added_tokens"]
    for fn in ("tokenizer_config.json", "special_tokens_map.json"):
        assert (tmp_path / fn).read_text() == (tokenizer_dir() / fn).read_text()


# ---- checkpoint ---------------------------------------------------------------------------------------
def _load_all(out: Path) -> dict:
    files = sorted(out.glob("*.safetensors"))
    return {k: read_tensor(f, k) for f in files for k in read_safetensors_header(f) if k != "__metadata__"}


def test_tiny_llama_config_matches_tokenizer():
    cfg = json.loads(TINY_LLAMA.read_text())
    assert cfg["vocab_size"] >= tokenizer_vocab_size() and cfg["vocab_size"] % 64 == 0
    assert cfg["bos_token_id"] == SPECIAL_TOKEN_IDS["<|begin_of_text|>"]
    assert SPECIAL_TOKEN_IDS["<|eot_id|>"] in cfg["eos_token_id"]
    assert cfg["num_attention_heads"] * cfg["head_dim"] == cfg["hidden_size"]


@pytest.mark.parametrize("model_type", ["llama", "qwen3"])
def test_checkpoint_single_file(tmp_path, model_type):
    cfg = tiny_config(model_type=model_type)
    write_random_checkpoint(tmp_path, cfg, seed=1)
    names = {p.name for p in tmp_path.iterdir()}
    assert names == {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                     "special_tokens_map.json"}
    written = json.loads((tmp_path / "config.json").read_text())
    assert written["torch_dtype"] == "bfloat16" and written["bos_token_id"] == 0

    f = tmp_path / "model.safetensors"
    raw = f.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    hdr = json.loads(raw[8:8 + n])
    assert (8 + n) % 8 == 0 and hdr["__metadata__"] == {"format": "pt"}
    tensors = {k: v for k, v in hdr.items() if k != "__metadata__"}
    assert {k: tuple(v["shape"]) for k, v in tensors.items()} == {s[0]: s[1] for s in param_specs(cfg)}
    assert all(v["dtype"] == "BF16" for v in tensors.values())
    spans = sorted(v["data_offsets"] for v in tensors.values())  # contiguous, covering the data
    assert spans[0][0] == 0 and spans[-1][1] == len(raw) - 8 - n
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))

    assert ("model.layers.0.self_attn.q_norm.weight" in tensors) == (model_type == "qwen3")
    assert tensors["model.layers.1.self_attn.k_proj.weight"]["shape"] == [2 * 32, 64]
    assert tensors["model.layers.1.mlp.down_proj.weight"]["shape"] == [64, 160]
    assert tensors["lm_head.weight"]["shape"] == [4096, 64]

    w = _load_all(tmp_path)
    assert np.all(w["model.norm.weight"] == 1) and np.all(w["model.layers.0.input_layernorm.weight"] == 1)
    # Default scale: 1/sqrt(fan_in) for linears, 1 for the untied embedding.
    assert w["model.layers.0.mlp.down_proj.weight"].std() == pytest.approx(160**-0.5, rel=0.05)
    assert w["lm_head.weight"].std() == pytest.approx(64**-0.5, rel=0.02)
    assert w["model.embed_tokens.weight"].std() == pytest.approx(1.0, rel=0.02)
    assert abs(w["lm_head.weight"].mean()) < 0.01


def test_safetensors_library_parses_header(tmp_path):
    safetensors = pytest.importorskip("safetensors")
    write_random_checkpoint(tmp_path, tiny_config(num_hidden_layers=1), dtype="float32")
    from safetensors.numpy import load_file  # no bf16 in numpy: check parsing with an F32 file

    w = load_file(str(tmp_path / "model.safetensors"))
    assert w["lm_head.weight"].dtype == np.float32
    np.testing.assert_array_equal(w["lm_head.weight"], read_tensor(tmp_path / "model.safetensors", "lm_head.weight"))
    with safetensors.safe_open(str(tmp_path / "model.safetensors"), "np") as f:  # bf16 file: header only
        assert "lm_head.weight" in f.keys()


def test_bf16_rounding_matches_float32(tmp_path):
    write_random_checkpoint(tmp_path / "bf", tiny_config(num_hidden_layers=1), seed=3)
    write_random_checkpoint(tmp_path / "f32", tiny_config(num_hidden_layers=1), seed=3, dtype="float32")
    a, b = (read_tensor(tmp_path / d / "model.safetensors", "model.layers.0.mlp.up_proj.weight") for d in ("bf", "f32"))
    assert np.all(np.abs(a - b) <= np.abs(b) * 2**-8)  # round-to-nearest: <= half an ulp (8-bit mantissa)
    assert not np.array_equal(a, b)


def test_requested_std_and_seed(tmp_path):
    cfg = tiny_config(tie_word_embeddings=True)
    write_random_checkpoint(tmp_path / "a", cfg, seed=7, std=0.05)
    write_random_checkpoint(tmp_path / "b", cfg, seed=7, std=0.05)
    write_random_checkpoint(tmp_path / "c", cfg, seed=8, std=0.05)
    a, b, c = (_load_all(tmp_path / d) for d in "abc")
    assert "lm_head.weight" not in a  # tied: loaders reuse embed_tokens
    for name in ("model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
                 "model.layers.1.mlp.gate_proj.weight"):
        assert a[name].std() == pytest.approx(0.05, rel=0.03)
        np.testing.assert_array_equal(a[name], b[name])
        assert not np.array_equal(a[name], c[name])
    # Different tensors get different draws.
    assert not np.array_equal(a["model.layers.0.mlp.gate_proj.weight"], a["model.layers.0.mlp.up_proj.weight"])


def test_sharded_index_consistent(tmp_path):
    cfg = tiny_config(attention_bias=True)
    write_random_checkpoint(tmp_path / "one", cfg, seed=5)
    write_random_checkpoint(tmp_path / "many", cfg, seed=5, max_shard_bytes=200_000)
    out = tmp_path / "many"
    index = json.loads((out / "model.safetensors.index.json").read_text())
    shards = sorted(out.glob("*.safetensors"))
    assert len(shards) > 2 and not (out / "model.safetensors").exists()
    assert [p.name for p in shards] == [f"model-{i:05d}-of-{len(shards):05d}.safetensors" for i in range(1, len(shards) + 1)]
    assert set(index["weight_map"].values()) == {p.name for p in shards}
    total = 0
    for p in shards:
        hdr = read_safetensors_header(p)
        names = {k for k in hdr if k != "__metadata__"}
        assert names == {k for k, v in index["weight_map"].items() if v == p.name}
        total += sum(v["data_offsets"][1] - v["data_offsets"][0] for k, v in hdr.items() if k != "__metadata__")
    assert index["metadata"]["total_size"] == total
    assert set(index["weight_map"]) == {s[0] for s in param_specs(cfg)}
    assert "model.layers.0.self_attn.q_proj.bias" in index["weight_map"]
    # Same weights whatever the sharding.
    one, many = _load_all(tmp_path / "one"), _load_all(out)
    assert one.keys() == many.keys() and all(np.array_equal(one[k], many[k]) for k in one)
    # Rewriting unsharded removes the stale shards and index.
    write_random_checkpoint(out, cfg, seed=5)
    assert sorted(p.name for p in out.glob("model*")) == ["model.safetensors"]


def test_vocab_smaller_than_tokenizer_rejected(tmp_path):
    with pytest.raises(ValueError, match="vocab_size"):
        write_random_checkpoint(tmp_path, tiny_config(vocab_size=1024))


def test_cli(tmp_path):
    from sglang_mux.testing.checkpoint import main

    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(tiny_config(num_hidden_layers=1)))
    main(["--config", str(cfg), "--out", str(tmp_path / "ck"), "--max-shard-size", "100KB", "--seed", "2"])
    assert (tmp_path / "ck" / "model.safetensors.index.json").exists()
    assert (tmp_path / "ck" / "tokenizer_config.json").exists()


def test_small_synthetic_table_is_a_whole_table_of_fewer_partitions(small_good, good):
    """conftest's small table: granularity 32 (decode 32/64/96 + the full GPU), the decode
    kernel's occupancy measured, fitted like ``good`` (which keeps granularity 16)."""
    from synth_tables import SMALL_BLOCKS_PER_SM, SMALL_DECODE_SMS

    from sglang_mux.estimator import Estimator
    from sglang_mux.tables import read_table

    t = read_table(small_good)
    assert t.granularity == 32 and t.meta["profiler"]["decode_blocks_per_sm"] == SMALL_BLOCKS_PER_SM
    assert sorted(t.solo_decode["decode_sms"].unique()) == SMALL_DECODE_SMS + [132]
    assert sorted(t.contention["decode_sms"].unique()) == SMALL_DECODE_SMS
    assert Estimator.from_table(small_good).decode_sms_options == SMALL_DECODE_SMS
    assert Estimator.from_table(good).decode_sms_options == [16, 32, 48, 64, 80, 96, 112]
    assert t.model_shape == read_table(good).model_shape
