"""Write a real, randomly initialised HuggingFace Llama / Qwen3 checkpoint (safetensors).

No hub access on the GPU host, so correctness and performance tests need a checkpoint made
locally. Unlike SGLang's ``--load-format dummy`` (tiny uniform weights, degenerate outputs), this
writes a normal safetensors checkpoint (+ config.json + the packaged tokenizer), so the real
``--load-format auto`` path runs, and weights are scaled so activations stay O(1) and greedy
tokens depend on the prompt.

Needs numpy only (no torch): bf16 is written as raw uint16 bit patterns behind a hand-written
safetensors header.

CLI: ``python -m sglang_mux.testing.checkpoint --config launch/models/tiny-llama/config.json --out /tmp/ckpt``
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import zlib
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from sglang_mux.testing.tokenizer_fixture import (
    BOS,
    SPECIAL_TOKEN_IDS,
    tokenizer_dir,
    tokenizer_vocab_size,
)

DEFAULT_MAX_SHARD_BYTES = 4 * 1024**3  # like HF save_pretrained: shard when larger than this
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
_DTYPES = {  # name -> (safetensors dtype, bytes per element)
    "bfloat16": ("BF16", 2),
    "float16": ("F16", 2),
    "float32": ("F32", 4),
}
_CHUNK_ELEMS = 1 << 22  # elements generated at once: bounds RAM for 8B-sized tensors


def param_specs(config: dict) -> list[tuple[str, tuple[int, ...], str, float]]:
    """(name, shape, init, std) for every tensor SGLang's llama.py / qwen3.py load_weights expects.

    init is "normal" (std given), "ones" (norm weights) or "zeros" (biases). Default scale: std =
    1/sqrt(fan_in) for linear layers (variance-preserving, so activations stay O(1) at any width)
    and 1.0 for untied embeddings (token identity stays prominent in the residual stream).
    """
    mt = config.get("model_type", "llama")
    if mt not in ("llama", "qwen3"):
        raise ValueError(f"unsupported model_type {mt!r} (llama, qwen3)")
    h, inter, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    nh, nkv = config["num_attention_heads"], config.get("num_key_value_heads") or config["num_attention_heads"]
    hd = config.get("head_dim") or h // nh
    tied = bool(config.get("tie_word_embeddings", False))
    bias = bool(config.get("attention_bias", False) or config.get("bias", False))

    def lin(name, out_f, in_f, with_bias=False):
        r = [(f"{name}.weight", (out_f, in_f), "normal", in_f**-0.5)]
        return r + ([(f"{name}.bias", (out_f,), "zeros", 0.0)] if with_bias else [])

    # Tied: embed doubles as lm_head, so give it the lm_head scale (logits ~ N(0, 1)).
    specs = [("model.embed_tokens.weight", (v, h), "normal", h**-0.5 if tied else 1.0)]
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}"
        specs.append((f"{p}.input_layernorm.weight", (h,), "ones", 0.0))
        specs += lin(f"{p}.self_attn.q_proj", nh * hd, h, bias)
        specs += lin(f"{p}.self_attn.k_proj", nkv * hd, h, bias)
        specs += lin(f"{p}.self_attn.v_proj", nkv * hd, h, bias)
        specs += lin(f"{p}.self_attn.o_proj", h, nh * hd, bias)  # llama & qwen3: o bias iff qkv bias
        if mt == "qwen3":
            specs.append((f"{p}.self_attn.q_norm.weight", (hd,), "ones", 0.0))
            specs.append((f"{p}.self_attn.k_norm.weight", (hd,), "ones", 0.0))
        specs.append((f"{p}.post_attention_layernorm.weight", (h,), "ones", 0.0))
        specs += lin(f"{p}.mlp.gate_proj", inter, h)
        specs += lin(f"{p}.mlp.up_proj", inter, h)
        specs += lin(f"{p}.mlp.down_proj", h, inter)
    specs.append(("model.norm.weight", (h,), "ones", 0.0))
    if not tied:
        specs += lin("lm_head", v, h)
    return specs


def _to_dtype_bytes(x: np.ndarray, dtype: str) -> bytes:
    if dtype == "bfloat16":  # float32 -> bf16 with round-to-nearest-even, as torch does
        u = x.astype(np.float32, copy=False).view(np.uint32)
        u = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
        return u.astype("<u2").tobytes()
    return x.astype("<f2" if dtype == "float16" else "<f4").tobytes()


def _chunk_bytes(job) -> bytes:
    """Bytes of elements [start, start+count) of one tensor. The RNG is keyed by (seed, name,
    chunk index): weights do not depend on shard size, write order or thread count."""
    name, init, std, seed, dtype, start, count = job
    if init != "normal":
        return _to_dtype_bytes(np.full(count, 1.0 if init == "ones" else 0.0, np.float32), dtype)
    rng = np.random.default_rng([seed, zlib.crc32(name.encode()), start // _CHUNK_ELEMS])
    x = rng.standard_normal(count, dtype=np.float32)
    x *= np.float32(std)
    return _to_dtype_bytes(x, dtype)


def _ordered_map(fn, jobs, workers: int):
    """ThreadPool map with a bounded look-ahead (numpy's RNG releases the GIL; RAM stays bounded)."""
    with ThreadPoolExecutor(workers) as ex:
        pending: deque = deque()
        for j in jobs:
            pending.append(ex.submit(fn, j))
            if len(pending) >= 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def write_safetensors_header(f, tensors: list[tuple[str, tuple[int, ...]]], st_dtype: str, itemsize: int,
                             metadata: dict | None = None) -> int:
    """Write the safetensors header for tensors stored back to back in this order; return data size.

    Format: u64-LE header length, JSON {name: {dtype, shape, data_offsets}, __metadata__}, raw data.
    """
    header, off = {"__metadata__": metadata or {"format": "pt"}}, 0
    for name, shape in tensors:
        nbytes = int(np.prod(shape)) * itemsize
        header[name] = {"dtype": st_dtype, "shape": list(shape), "data_offsets": [off, off + nbytes]}
        off += nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # pad so the data starts 8-byte aligned (as safetensors does)
    f.write(struct.pack("<Q", len(raw)))
    f.write(raw)
    return off


def write_random_checkpoint(
    out_dir: str | Path,
    config: dict | str | Path,
    seed: int = 0,
    dtype: str = "bfloat16",
    std: float | None = None,
    max_shard_bytes: int = DEFAULT_MAX_SHARD_BYTES,
    tokenizer: str | Path | None = None,
) -> Path:
    """Write config.json, model weights (model.safetensors, or model-0000i-of-0000n.safetensors +
    model.safetensors.index.json when larger than ``max_shard_bytes``) and tokenizer files.

    std: None = per-tensor default scale (see ``param_specs``); a float = that std for every
    embedding/linear weight. Norm weights are 1, biases 0.
    tokenizer: dir to copy (default: the packaged one). When it is the packaged tokenizer, the
    written config's bos/eos ids are set to its special tokens, so the checkpoint is consistent.
    """
    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be one of {sorted(_DTYPES)}")
    if not isinstance(config, dict):
        config = json.loads(Path(config).read_text())
    config = {**config, "torch_dtype": dtype}
    tok_dir = Path(tokenizer) if tokenizer is not None else tokenizer_dir()
    if tok_dir.resolve() == tokenizer_dir().resolve():
        if config["vocab_size"] < tokenizer_vocab_size(tok_dir):
            raise ValueError(f"vocab_size {config['vocab_size']} < tokenizer's {tokenizer_vocab_size(tok_dir)}")
        config["bos_token_id"] = SPECIAL_TOKEN_IDS[BOS]
        config["eos_token_id"] = [SPECIAL_TOKEN_IDS["<|end_of_text|>"], SPECIAL_TOKEN_IDS["<|eot_id|>"]]

    specs = param_specs(config)
    st_dtype, itemsize = _DTYPES[dtype]
    # Greedy, in order: a new shard when the next tensor would overflow the current one.
    shards: list[list] = [[]]
    size = 0
    for s in specs:
        nbytes = int(np.prod(s[1])) * itemsize
        if shards[-1] and size + nbytes > max_shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append(s)
        size += nbytes

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("model*.safetensors*"):  # stale shards from a previous layout confuse loaders
        old.unlink()
    n = len(shards)
    names = ["model.safetensors"] if n == 1 else [f"model-{i + 1:05d}-of-{n:05d}.safetensors" for i in range(n)]
    weight_map, total = {}, 0
    workers = max(1, min(8, os.cpu_count() or 1))
    for fname, shard in zip(names, shards):
        jobs = [
            (name, init, std if (std is not None and init == "normal") else d_std, seed, dtype, start,
             min(_CHUNK_ELEMS, numel - start))
            for name, shape, init, d_std in shard
            for numel in [int(np.prod(shape))]
            for start in range(0, numel, _CHUNK_ELEMS)
        ]
        with open(out / fname, "wb") as f:
            total += write_safetensors_header(f, [(s[0], s[1]) for s in shard], st_dtype, itemsize)
            for chunk in _ordered_map(_chunk_bytes, jobs, workers):
                f.write(chunk)
        weight_map.update((s[0], fname) for s in shard)
    if n > 1:
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    for fn in TOKENIZER_FILES:
        shutil.copyfile(tok_dir / fn, out / fn)
    return out


def read_safetensors_header(path: str | Path) -> dict:
    """The parsed JSON header of a safetensors file (for tests and sanity checks)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n))


def read_tensor(path: str | Path, name: str) -> np.ndarray:
    """One tensor as float32 (bf16 widened bit-exactly), without torch."""
    path = Path(path)
    hdr = read_safetensors_header(path)
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        info = hdr[name]
        a, b = info["data_offsets"]
        f.seek(8 + n + a)
        buf = f.read(b - a)
    if info["dtype"] == "BF16":
        x = (np.frombuffer(buf, "<u2").astype(np.uint32) << 16).view(np.float32)
    else:
        x = np.frombuffer(buf, {"F16": "<f2", "F32": "<f4"}[info["dtype"]]).astype(np.float32)
    return x.reshape(info["shape"])


def _parse_size(s: str) -> int:
    s = s.strip().upper()
    for suf, mul in (("GB", 1024**3), ("MB", 1024**2), ("KB", 1024), ("B", 1)):
        if s.endswith(suf):
            return int(float(s[: -len(suf)]) * mul)
    return int(s)


def main(argv=None) -> int:
    from sglang_mux import cli

    ap = cli.ArgumentParser(prog="python -m sglang_mux.testing.checkpoint", description=__doc__.split("\n")[0])
    ap.add_argument("--config", required=True, help="HF config.json (llama or qwen3)")
    ap.add_argument("--out", required=True, help="output checkpoint dir")
    ap.add_argument("--seed", type=cli.seed, default=0)
    ap.add_argument("--dtype", default="bfloat16", choices=sorted(_DTYPES))
    ap.add_argument("--std", type=cli.positive(float), default=None, help="weight std (default: 1/sqrt(fan_in))")
    ap.add_argument("--max-shard-size", default="4GB", help="e.g. 4GB, 500MB, or bytes")
    ap.add_argument("--tokenizer", default=None, help="tokenizer dir (default: packaged)")
    a = ap.parse_args(argv)
    out = write_random_checkpoint(a.out, a.config, seed=a.seed, dtype=a.dtype, std=a.std,
                                  max_shard_bytes=_parse_size(a.max_shard_size), tokenizer=a.tokenizer)
    print(out)
    return 0


if __name__ == "__main__":
    from sglang_mux import cli

    cli.run(main)
