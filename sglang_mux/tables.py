"""Read, validate and write contention-table directories (`contention_tables/<model>__<gpu>/`).

A table holds one LLM shape profiled on one GPU model with one attention backend at one tensor-
parallel degree (docs/design.md, "Table format"); its directory is ``<model>__<gpu>__<backend>``,
with ``__tp<N>`` appended at TP = N > 1:

- ``meta.json``         gpu_name, sm_count, model{...}, versions{...}, date, command, granularity,
                        attention_backend, tp_size (optional: 1 when absent; the per-GPU slice of
                        every GEMM and the all-reduces differ with it)
- ``solo_prefill.csv``  prefill_sms, bs, sum_new_sq, sum_new_reused, sum_new, latency_ms
- ``solo_decode.csv``   decode_sms, bs, sum_reused, latency_ms
- ``contention.csv``    decode_sms, prefill_new, prefill_reused, decode_bs,
                        decode_reused_per_req, decode_solo_ms, decode_corun_ms
- ``gemm_curve.csv``    prefill_sms, tokens, gemm_ms           (optional: the projections' time,
                        ``python -m profiling.gemm_curve``; the prefill fit uses it when present)
- ``fit.json``          Eq. 1/2 coefficients per partition   (written by ``estimator fit``)
- ``guard.json``        contention-guard grid and cell maxima (written by ``estimator fit``)
- ``fused_rows.jsonl``  optional: measured fused iterations (a prompt chunk's pieces and one-token
                        decode rows in one extend batch on the whole GPU), one JSON object a line:
                        {"reqs": [[n, r], ...], "measured_ms": ms, "run": its run's date};
                        ``python -m sglang_mux.estimator add-fused DIR FILE`` adds
                        ``bench.prefill_mixed --fused`` outputs, and the fit then prices fused
                        iterations with ``latency_model.fused`` (fit.json ``fused``)
- ``allreduce.json``    TP > 1 only, required: ``python -m profiling.allreduce``'s timings of the
                        all-reduces a rank adds to its slice (``latency_model.allreduce``)

Every problem raises :class:`TableError` whose message starts with the offending file's path,
then says what is wrong — a bad table must never silently become a wrong SLO decision. A table
of another attention backend is one of them: its kernels, hence its timings, are another's.
Extra CSV columns are allowed (ignored); missing ones are not.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

logger = logging.getLogger(__name__)

META = "meta.json"
SOLO_PREFILL = "solo_prefill.csv"
SOLO_DECODE = "solo_decode.csv"
CONTENTION = "contention.csv"
GEMM_CURVE = "gemm_curve.csv"
FIT = "fit.json"
GUARD = "guard.json"
ALLREDUCE = "allreduce.json"
FUSED_ROWS = "fused_rows.jsonl"
CELLS_LOG = "cells.jsonl"  # profiling.run's raw log: every measured cell with its samples

SOLO_PREFILL_COLS = ["prefill_sms", "bs", "sum_new_sq", "sum_new_reused", "sum_new", "latency_ms"]
SOLO_DECODE_COLS = ["decode_sms", "bs", "sum_reused", "latency_ms"]
CONTENTION_COLS = [
    "decode_sms", "prefill_new", "prefill_reused", "decode_bs", "decode_reused_per_req",
    "decode_solo_ms", "decode_corun_ms",
]
GEMM_CURVE_COLS = ["prefill_sms", "tokens", "gemm_ms"]
META_KEYS = ["gpu_name", "sm_count", "model", "versions", "date", "command", "granularity", "attention_backend"]
MODEL_KEYS = [
    "architecture", "num_layers", "hidden_size", "num_heads", "num_kv_heads", "head_dim",
    "intermediate_size", "vocab_size",
]
VERSION_KEYS = ["sglang", "torch", "cuda"]

# Per CSV: (columns, latency columns that must be > 0, columns that must be >= 1).
_CSV_SPECS = {
    SOLO_PREFILL: (SOLO_PREFILL_COLS, ["latency_ms"], ["prefill_sms", "bs", "sum_new"]),
    SOLO_DECODE: (SOLO_DECODE_COLS, ["latency_ms"], ["decode_sms", "bs"]),
    # prefill_new >= 1: a contention row is by definition a decode with a co-running prefill.
    CONTENTION: (CONTENTION_COLS, ["decode_solo_ms", "decode_corun_ms"],
                 ["decode_sms", "prefill_new", "decode_bs"]),
    GEMM_CURVE: (GEMM_CURVE_COLS, ["gemm_ms"], ["prefill_sms", "tokens"]),
}


class TableError(ValueError):
    """A contention table is missing, malformed, or made for another model/GPU/attention backend."""

    def __init__(self, file: str | Path, problem: str):
        self.file = str(file)
        self.problem = problem
        super().__init__(f"{self.file}: {problem}")


def slug(name: str) -> str:
    """Directory-safe lower-case name: ``"NVIDIA H200"`` -> ``"nvidia-h200"``."""
    s = re.sub(r"[^a-z0-9.]+", "-", str(name).strip().lower()).strip("-.")
    if not s:
        raise ValueError(f"cannot make a slug of {name!r}")
    return s


def table_dirname(model_name: str, gpu_name: str, attention_backend: str, tp_size: int = 1) -> str:
    """``table_dirname("Llama-3.1-8B", "NVIDIA H200", "fa3") == "llama-3.1-8b__nvidia-h200__fa3"``."""
    tp = f"__tp{int(tp_size)}" if int(tp_size) > 1 else ""
    return f"{slug(model_name)}__{slug(gpu_name)}__{slug(attention_backend)}{tp}"


@dataclass(frozen=True)
class ModelShape:
    """A model's shape: the facts that decide its latency, plus its name and context length.

    Equality (and hashing) covers the eight ``MODEL_KEYS`` fields only: equal shapes share a
    table whatever the checkpoint's ``name``, ``context_len`` or weights. ``to_dict()`` is
    meta.json's ``model`` object (exactly ``MODEL_KEYS``). ``name`` and ``context_len`` (tokens;
    None when unknown, e.g. read back from meta.json) serve the profiler's plan.
    """

    architecture: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    name: str = field(default="model", compare=False)
    context_len: int | None = field(default=None, compare=False)

    @classmethod
    def from_meta(cls, d: Mapping[str, Any]) -> "ModelShape":
        """From meta.json's ``model`` object (exactly MODEL_KEYS)."""
        missing = [k for k in MODEL_KEYS if k not in d]
        if missing:
            raise ValueError(f"model shape lacks {missing}")
        return cls(str(d["architecture"]), *(int(d[k]) for k in MODEL_KEYS[1:]))

    @classmethod
    def from_hf_config(cls, cfg: Mapping[str, Any], name: str = "model") -> "ModelShape":
        """From a Hugging Face ``config.json`` dict (Llama/Qwen style keys); the context is
        ``max_position_embeddings`` (else ``max_sequence_length``, else 131072). A missing key
        raises KeyError."""
        archs = cfg.get("architectures") or [cfg.get("model_type", "unknown")]
        heads = int(cfg["num_attention_heads"])
        hidden = int(cfg["hidden_size"])
        ctx = cfg.get("max_position_embeddings") or cfg.get("max_sequence_length") or 131072
        return cls(
            architecture=str(archs[0]),
            num_layers=int(cfg["num_hidden_layers"]),
            hidden_size=hidden,
            num_heads=heads,
            num_kv_heads=int(cfg.get("num_key_value_heads") or heads),
            head_dim=int(cfg.get("head_dim") or hidden // heads),
            intermediate_size=int(cfg["intermediate_size"]),
            vocab_size=int(cfg["vocab_size"]),
            name=name,
            context_len=int(ctx),
        )

    @classmethod
    def from_config(cls, path: str | Path) -> "ModelShape":
        """From a model directory or its ``config.json``; ``name`` is the directory's name.
        A missing file raises FileNotFoundError, bad JSON json.JSONDecodeError."""
        p = Path(path)
        if p.is_dir():
            p = p / "config.json"
        if not p.is_file():
            raise FileNotFoundError(f"model config {p} does not exist (pass a HF config.json or its directory)")
        return cls.from_hf_config(json.loads(p.read_text()), name=p.parent.name)

    @classmethod
    def coerce(cls, x: "ModelShape | Mapping[str, Any] | str | Path") -> "ModelShape":
        """Accept a ModelShape, a meta-style dict, an HF config dict, or a config.json path."""
        if isinstance(x, ModelShape):
            return x
        if isinstance(x, (str, Path)):
            x = json.loads(Path(x).read_text())
        if "num_layers" in x:
            return cls.from_meta(x)
        return cls.from_hf_config(x)

    def to_dict(self) -> dict[str, Any]:
        """meta.json's ``model`` object: exactly MODEL_KEYS."""
        return {k: getattr(self, k) for k in MODEL_KEYS}

    def mismatches(self, other: "ModelShape") -> list[str]:
        """``"<field> <mine> != <theirs>"`` for each shape field that differs (empty: same shape)."""
        return [f"{k} {getattr(self, k)!r} != {getattr(other, k)!r}"
                for k in MODEL_KEYS if getattr(self, k) != getattr(other, k)]

    def per_rank(self, tp: int) -> "ModelShape":
        """One tensor-parallel rank's share of the work, as SGLang splits it: attention heads, KV
        heads (at least one: below ``tp`` they are replicated), the MLP's intermediate size and the
        vocabulary divided by ``tp``; layers, hidden size and head size whole. ``tp`` 1: itself.
        ValueError where the heads or the MLP do not divide (SGLang refuses that TP too)."""
        tp = int(tp)
        if tp == 1:
            return self
        if tp < 1 or self.num_heads % tp or self.intermediate_size % tp:
            raise ValueError(f"--tp-size {tp} does not divide {self.num_heads} attention heads and an "
                             f"MLP of {self.intermediate_size}")
        return replace(self, num_heads=self.num_heads // tp, num_kv_heads=max(1, self.num_kv_heads // tp),
                       intermediate_size=self.intermediate_size // tp, vocab_size=-(-self.vocab_size // tp))

    def rank_config(self, config: Mapping[str, Any], tp: int) -> dict:
        """An HF config.json (``config``, this shape's) for one TP rank's slice (`per_rank`), so
        that one GPU runs a rank's kernels: the divided counts, and ``head_dim`` written out (Llama
        derives it from hidden size / heads, which the division would double)."""
        r = self.per_rank(tp)
        return {**config, "num_attention_heads": r.num_heads, "num_key_value_heads": r.num_kv_heads,
                "intermediate_size": r.intermediate_size, "vocab_size": r.vocab_size, "head_dim": r.head_dim}

    # Sizes for planning (bf16 weights and KV cache).
    @property
    def layer_params(self) -> int:
        """Parameters of one decoder layer's projections (q, k, v, o, gate, up, down)."""
        h, hd = self.hidden_size, self.head_dim
        attn = h * self.num_heads * hd * 2 + 2 * h * self.num_kv_heads * hd
        return attn + 3 * h * self.intermediate_size

    @property
    def kv_bytes_per_token(self) -> int:
        """KV-cache bytes per token over all layers (K and V, bf16)."""
        return self.num_layers * 2 * self.num_kv_heads * self.head_dim * 2

    @property
    def weight_bytes(self) -> int:
        """Bytes of the bf16 weights (layers + embedding + LM head)."""
        return 2 * (self.num_layers * self.layer_params + 2 * self.vocab_size * self.hidden_size)


@dataclass
class Table:
    path: Path
    meta: dict
    solo_prefill: pd.DataFrame
    solo_decode: pd.DataFrame
    contention: pd.DataFrame
    fit: dict | None = None
    guard: dict | None = None
    gemm_curve: pd.DataFrame | None = None  # None: the table has no gemm_curve.csv
    fused_rows: list[dict] | None = None  # None: the table has no fused_rows.jsonl

    @property
    def model_shape(self) -> ModelShape:
        return ModelShape.from_meta(self.meta["model"])

    @property
    def rank_shape(self) -> ModelShape:
        """What one GPU of the table runs: the model's per-rank slice at the table's TP (the
        kernels' heads, KV heads and GEMM widths), the model itself at TP 1."""
        return self.model_shape.per_rank(self.tp_size)

    @property
    def gpu_name(self) -> str:
        return self.meta["gpu_name"]

    @property
    def sm_count(self) -> int:
        return int(self.meta["sm_count"])

    @property
    def granularity(self) -> int:
        return int(self.meta["granularity"])

    @property
    def attention_backend(self) -> str:
        return self.meta["attention_backend"]

    @property
    def tp_size(self) -> int:
        return tp_of(self.meta)


# ----------------------------------------------------------------------------- validation

def _positive_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def validate_meta(meta: Any, file: str | Path = META) -> dict:
    if not isinstance(meta, dict):
        raise TableError(file, "must be a JSON object")
    missing = [k for k in META_KEYS if k not in meta]
    if missing:
        raise TableError(file, f"missing key(s) {missing}")
    for k in ("sm_count", "granularity"):
        if not _positive_int(meta[k]):
            raise TableError(file, f"{k} must be a positive integer, got {meta[k]!r}")
    if not isinstance(meta["model"], dict):
        raise TableError(file, "model must be an object")
    missing = [k for k in MODEL_KEYS if k not in meta["model"]]
    if missing:
        raise TableError(file, f"model lacks key(s) {missing}")
    try:
        ModelShape.from_meta(meta["model"])
    except (TypeError, ValueError) as e:
        raise TableError(file, f"model has a bad value: {e}") from None
    if not isinstance(meta["versions"], dict):
        raise TableError(file, "versions must be an object")
    missing = [k for k in VERSION_KEYS if k not in meta["versions"]]
    if missing:
        raise TableError(file, f"versions lacks key(s) {missing}")
    if not str(meta["gpu_name"]).strip():
        raise TableError(file, "gpu_name is empty")
    ab = meta["attention_backend"]
    if not isinstance(ab, str) or not ab.strip():
        raise TableError(file, f"attention_backend must name SGLang's attention backend the table was profiled "
                               f"with (e.g. 'fa3', 'triton'), got {ab!r}")
    if "tp_size" in meta and not _positive_int(meta["tp_size"]):
        raise TableError(file, f"tp_size must be a positive integer (the --tp-size it was profiled at), "
                               f"got {meta['tp_size']!r}")
    prof = meta.get("profiler", {})
    if not isinstance(prof, dict):
        raise TableError(file, "profiler must be an object")
    if prof.get("attention_backend") not in (None, ab):
        raise TableError(file, f"attention_backend {ab!r} but profiler.attention_backend "
                               f"{prof['attention_backend']!r}: which one ran is unclear; re-profile")
    k = prof.get("decode_blocks_per_sm")
    if k is not None and not _positive_int(k):
        raise TableError(file, f"profiler.decode_blocks_per_sm must be a positive integer (the decode kernel's "
                               f"occupancy; measure it: python -m profiling.decode_kernel), got {k!r}")
    return meta


def validate_frame(df: pd.DataFrame, name: str, file: str | Path | None = None) -> pd.DataFrame:
    """Check one CSV's frame against its spec; returns it (extra columns kept)."""
    file = file or name
    cols, positive, at_least_one = _CSV_SPECS[name]
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise TableError(file, f"missing column(s) {missing} (expected {cols})")
    if len(df) == 0:
        raise TableError(file, "has no rows")
    for c in cols:
        if not pd.api.types.is_numeric_dtype(df[c]):
            bad = pd.to_numeric(df[c], errors="coerce").isna() & df[c].notna()
            where = f" (row {_first(bad)}: {df[c][bad].iloc[0]!r})" if bad.any() else ""
            raise TableError(file, f"column {c} is not numeric{where}")
        nan = df[c].isna()
        if nan.any():
            raise TableError(file, f"NaN in column {c} (row {_first(nan)})")
        inf = pd.Series(~np.isfinite(df[c].to_numpy(dtype=float)))
        if inf.any():
            raise TableError(file, f"non-finite value in column {c} (row {_first(inf)})")
        neg = df[c] < 0
        if neg.any():
            raise TableError(file, f"negative value in column {c} (row {_first(neg)}: {df[c][neg].iloc[0]})")
    for c in positive:
        bad = df[c] <= 0
        if bad.any():
            raise TableError(file, f"zero or negative latency in column {c} (row {_first(bad)}: {df[c][bad].iloc[0]})")
    for c in at_least_one:
        bad = df[c] < 1
        if bad.any():
            raise TableError(file, f"column {c} must be >= 1 (row {_first(bad)}: {df[c][bad].iloc[0]})")
    return df


def _first(mask: pd.Series) -> int:
    # Row number as in the CSV file (header = line 1, first data row = line 2).
    return int(mask.to_numpy().nonzero()[0][0]) + 2


def _read_json(file: Path) -> Any:
    if not file.is_file():
        raise TableError(file, "missing file")
    try:
        return json.loads(file.read_text())
    except json.JSONDecodeError as e:
        raise TableError(file, f"not valid JSON ({e})") from None


def _read_csv(path: Path, name: str) -> pd.DataFrame:
    file = path / name
    if not file.is_file():
        raise TableError(file, "missing file")
    try:
        df = pd.read_csv(file)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as e:
        raise TableError(file, f"unreadable CSV ({e})") from None
    return validate_frame(df, name, file)


def tp_of(meta: Mapping[str, Any]) -> int:
    """The tensor-parallel degree a table was profiled at (1 when meta.json does not say)."""
    return int(meta.get("tp_size", 1))


def check_match(meta: dict, file: str | Path, *, model_shape=None, gpu_name: str | None = None,
                total_sms: int | None = None, attention_backend: str | None = None,
                tp_size: int | None = None) -> None:
    """Refuse a table made for another model shape, GPU model, SM count, attention backend or
    tensor-parallel degree."""
    if gpu_name is not None and slug(meta["gpu_name"]) != slug(gpu_name):
        raise TableError(file, f"table was made on GPU {meta['gpu_name']!r}, not on {gpu_name!r}; "
                               f"profile this GPU (python -m profiling.run ...)")
    if total_sms is not None and int(meta["sm_count"]) != int(total_sms):
        raise TableError(file, f"table was made on a {meta['sm_count']}-SM device, this one has {total_sms} SMs")
    if model_shape is not None:
        want = ModelShape.coerce(model_shape)
        diff = ModelShape.from_meta(meta["model"]).mismatches(want)
        if diff:
            raise TableError(file, "table was made for another model (table vs requested: " + "; ".join(diff) + ")")
    if attention_backend is not None and meta["attention_backend"] != attention_backend:
        tb = meta["attention_backend"]
        raise TableError(file, f"table was made with the {tb!r} attention backend and this server runs "
                               f"{attention_backend!r}: one backend's kernel timings say nothing about another's. "
                               f"Profile it (python -m profiling.run ... --attention-backend {attention_backend}) "
                               f"or serve with --attention-backend {tb}")
    if tp_size is not None and tp_of(meta) != int(tp_size):
        raise TableError(file, f"table was made at --tp-size {tp_of(meta)} and this server runs --tp-size {tp_size}: "
                               f"at TP each GPU computes a slice of every GEMM and pays all-reduces, so one TP's "
                               f"timings say nothing about another's. Use a table profiled at --tp-size {tp_size} "
                               f"(a directory ending __tp{tp_size})")


def read_table(path: str | Path, *, model_shape=None, gpu_name: str | None = None,
               total_sms: int | None = None, attention_backend: str | None = None, decode_sms: Iterable[int] = (),
               prefill_sms: Iterable[int] = (), require_fit: bool = True, tp_size: int | None = None) -> Table:
    """Load and validate a table dir.

    ``model_shape``/``gpu_name``/``total_sms``/``attention_backend``/``tp_size``: refuse a table
    made for something else.
    ``decode_sms``/``prefill_sms``: SM counts that must be profiled (solo CSVs, contention.csv).
    ``require_fit``: load fit.json and guard.json, which must exist; False: ignore them
    (``estimator fit`` reads the raw CSVs only and rewrites both).
    """
    path = Path(path)
    if not path.is_dir():
        raise TableError(path, "missing table directory")
    meta = validate_meta(_read_json(path / META), path / META)
    check_match(meta, path / META, model_shape=model_shape, gpu_name=gpu_name, total_sms=total_sms,
                attention_backend=attention_backend, tp_size=tp_size)
    sp = _read_csv(path, SOLO_PREFILL)
    sd = _read_csv(path, SOLO_DECODE)
    ct = _read_csv(path, CONTENTION)
    for name, df, col, want in ((SOLO_DECODE, sd, "decode_sms", decode_sms),
                                (CONTENTION, ct, "decode_sms", decode_sms),
                                (SOLO_PREFILL, sp, "prefill_sms", prefill_sms)):
        have = set(int(v) for v in df[col].unique())
        missing = sorted(set(int(s) for s in want) - have)
        if missing:
            raise TableError(path / name, f"SM counts {missing} not in the table ({col} has {sorted(have)})")
    gc = None
    if (path / GEMM_CURVE).exists():
        gc = _read_csv(path, GEMM_CURVE)
        have = set(int(v) for v in gc["prefill_sms"].unique())
        missing = sorted(set(int(v) for v in sp["prefill_sms"].unique()) - have)
        if missing:
            raise TableError(path / GEMM_CURVE, f"no points for prefill_sms {missing} (solo_prefill.csv has them); "
                                                f"measure them: python -m profiling.gemm_curve --model-config "
                                                f"CONFIG --out {path}")
        few = [int(s) for s, g in gc.groupby("prefill_sms") if g["tokens"].nunique() < 2]
        if few:
            raise TableError(path / GEMM_CURVE, f"prefill_sms {few} have fewer than 2 token counts")
    fused = read_fused_rows(path) if (path / FUSED_ROWS).exists() else None
    fit = guard = None
    if require_fit:  # not for `estimator fit`, which must work even if the old ones are broken
        fit = _read_json(path / FIT)
        if not isinstance(fit, dict) or not isinstance(fit.get("prefill"), dict) or not isinstance(fit.get("decode"), dict):
            raise TableError(path / FIT, "must be an object with 'prefill' and 'decode' objects; "
                                         "rewrite it: python -m sglang_mux.estimator fit DIR")
    if require_fit:
        guard = _read_json(path / GUARD)
        if not isinstance(guard, dict) or "axes" not in guard or "cells" not in guard:
            raise TableError(path / GUARD, "must be an object with 'axes' and 'cells'; "
                                           "rewrite it: python -m sglang_mux.estimator fit DIR")
    return Table(path, meta, sp, sd, ct, fit, guard, gc, fused)


def read_fused_rows(path: str | Path) -> list[dict]:
    """A table's fused_rows.jsonl: [{"reqs": [(n, r), ...], "measured_ms": float, "run": str}]
    (n >= 1, r >= 0 ints; ms > 0). A malformed line or no row: TableError naming the line."""
    file = Path(path) / FUSED_ROWS
    rows = []
    with open(file, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = fused_row(json.loads(line))
            except (ValueError, TypeError, KeyError) as e:
                raise TableError(file, f"line {i} is not a fused row ({e}): want {{\"reqs\": [[n, r], ...], "
                                       f"\"measured_ms\": ms, \"run\": \"...\"}}") from None
            rows.append(row)
    if not rows:
        raise TableError(file, "has no rows (remove it, or add some: python -m sglang_mux.estimator add-fused)")
    return rows


def fused_row(d: Any) -> dict:
    """One fused row validated: {"reqs": [(n, r), ...], "measured_ms", "run"}; else ValueError,
    TypeError or KeyError."""
    reqs = [(int(n), int(r)) for n, r in d["reqs"]]
    ms = float(d["measured_ms"])
    if not reqs or any(n < 1 or r < 0 or [n, r] != list(q) for (n, r), q in zip(reqs, d["reqs"])):
        raise ValueError(f"reqs must be [n >= 1, r >= 0] integer pairs, got {d['reqs']!r}")
    if not (ms > 0 and np.isfinite(ms)):
        raise ValueError(f"measured_ms must be > 0, got {d['measured_ms']!r}")
    return {"reqs": reqs, "measured_ms": ms, "run": str(d.get("run", ""))}


def append_fused_rows(path: str | Path, rows: Iterable[Mapping]) -> Path:
    """Append rows ({"reqs", "measured_ms", "run"}, validated) to a table's fused_rows.jsonl."""
    file = Path(path) / FUSED_ROWS
    lines = [json.dumps({"reqs": [list(q) for q in r["reqs"]], "measured_ms": r["measured_ms"], "run": r["run"]})
             for r in map(fused_row, rows)]
    with open(file, "a", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)
    return file


# ----------------------------------------------------------------------------- writing

def write_json(path: str | Path, name: str, obj: Any) -> Path:
    file = Path(path) / name
    tmp = file.with_suffix(file.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1, sort_keys=False) + "\n")
    tmp.replace(file)  # atomic: a crashed writer never leaves half a table
    return file


def write_table(path: str | Path, meta: dict, solo_prefill: pd.DataFrame, solo_decode: pd.DataFrame,
                contention: pd.DataFrame, fit: dict | None = None, guard: dict | None = None) -> Path:
    """Validate then write a table dir (fit/guard optional: ``estimator fit`` derives them)."""
    path = Path(path)
    validate_meta(meta, path / META)
    frames = {SOLO_PREFILL: solo_prefill, SOLO_DECODE: solo_decode, CONTENTION: contention}
    for name, df in frames.items():
        validate_frame(df, name, path / name)
    path.mkdir(parents=True, exist_ok=True)
    write_json(path, META, meta)
    for name, df in frames.items():
        df.to_csv(path / name, index=False)
    if fit is not None:
        write_json(path, FIT, fit)
    if guard is not None:
        write_json(path, GUARD, guard)
    return path


# ----------------------------------------------------------------------------- lookup

TABLES_ENV = "SGLANG_MUX_TABLES"  # a directory of table dirs, searched before the shipped ones


def tables_root() -> Path:
    """Where tables are looked up by name: ``$SGLANG_MUX_TABLES``, else the checkout's
    ``contention_tables/`` (an editable install), else the copy installed inside the package."""
    if os.environ.get(TABLES_ENV):
        return Path(os.environ[TABLES_ENV])
    pkg = Path(__file__).resolve().parent
    checkout = pkg.parent / "contention_tables"
    return checkout if checkout.is_dir() else pkg / "contention_tables"


def resolve_table(name_or_path: str | Path) -> Path:
    """A ``--table`` argument as a directory: an existing path as it is, else a table's name
    (``llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3``, or ``contention_tables/<name>``) under
    :func:`tables_root`. Unknown: :class:`TableError` naming the tables there."""
    p = Path(name_or_path)
    if p.is_dir():
        return p
    root = tables_root()
    candidate = root / p.name
    if candidate.is_dir():
        return candidate
    have = sorted(d.name for d in root.iterdir() if (d / META).is_file()) if root.is_dir() else []
    raise TableError(p, f"no such table directory, nor a table of that name in {root} "
                        f"(${TABLES_ENV} sets where to look); shipped tables: {', '.join(have) or 'none'}")


def find_table(root: str | Path, model_shape, gpu_name: str, attention_backend: str,
               tp_size: int = 1) -> Path | None:
    """The table dir under ``root`` whose meta.json matches the model shape, GPU, attention
    backend and tensor-parallel degree, or None.

    Matching is by meta.json (not by directory name), so a table of a fine-tuned checkpoint
    with the same shape is reused. Several matches: the newest ``date`` wins (logged).
    """
    hits = [(str(meta.get("date", "")), d) for d, meta in _tables_of(root, model_shape, gpu_name)
            if _serves(meta, attention_backend, tp_size)]
    if not hits:
        return None
    hits.sort(key=lambda h: h[0])
    if len(hits) > 1:
        logger.info("several contention tables match; using the newest: %s", hits[-1][1])
    return hits[-1][1]


def other_tables(root: str | Path, model_shape, gpu_name: str, attention_backend: str,
                 tp_size: int = 1) -> list[tuple[str, int, Path]]:
    """The tables for this model and GPU that `find_table` passes over, made with another
    attention backend or at another TP: (attention backend, TP, directory) each, for the message
    that says why none was used."""
    return [(meta["attention_backend"], tp_of(meta), d) for d, meta in _tables_of(root, model_shape, gpu_name)
            if not _serves(meta, attention_backend, tp_size)]


def _serves(meta: Mapping[str, Any], attention_backend: str, tp_size: int) -> bool:
    """Whether a table of this model and GPU serves this attention backend at this TP."""
    return meta["attention_backend"] == attention_backend and tp_of(meta) == int(tp_size)


def _tables_of(root: str | Path, model_shape, gpu_name: str) -> list[tuple[Path, dict]]:
    root = Path(root)
    if not root.is_dir():
        return []
    want = ModelShape.coerce(model_shape)
    out = []
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        try:
            meta = validate_meta(_read_json(d / META), d / META)
            check_match(meta, d / META, model_shape=want, gpu_name=gpu_name)
        except TableError as e:
            if (d / META).exists() and "table was made" not in e.problem:
                logger.warning("skipping contention table %s", e)
            continue
        out.append((d, meta))
    return out


def corun_cells(path: str | Path) -> list[dict]:
    """The co-run cells of a table's raw profiling log (``cells.jsonl``) whose prefill launches
    were timed beside the looping decode graphs, the last measurement of each cell: decode_sms,
    prefill_sms, decode_bs, decode_reused, n, r (the prefill's new and reused tokens),
    layers_per_launch, prefill_launch_ms (median per launch), decode_corun_ms (median)."""
    from statistics import median

    file = Path(path) / CELLS_LOG
    if not file.is_file():
        raise TableError(file, "no such file (profiling.run writes it beside the table)")
    last: dict[tuple, dict] = {}
    with open(file, encoding="utf-8") as f:
        for line in f:
            c = json.loads(line) if line.strip() else {}
            if c.get("kind") != "contention" or not c.get("prefill_launch_ms") or not c.get("corun_samples"):
                continue
            cell = c["cell"]
            last[tuple(c.get("key") or sorted(cell.items()))] = {
                **{k: cell[k] for k in ("decode_sms", "prefill_sms", "decode_bs", "decode_reused", "n", "r")},
                "layers_per_launch": int(c["layers_per_launch"]), "prefill_launch_ms": float(c["prefill_launch_ms"]),
                "decode_corun_ms": float(median(c["corun_samples"]))}
    if not last:
        raise TableError(file, "no co-run cell timed its prefill launches (a table profiled before they were kept)")
    return list(last.values())

