"""Input checks shared by the command-line tools (bench.*, profiling.*, bench.analysis.*).

Each function either returns what the tool needs or raises :class:`sglang_mux.cli.UsageError`
whose message names the file or flag, what is wrong with it and what to give instead;
``cli.run`` turns that into the one ``error: ...`` line and exit status 2. Nothing here imports
torch or sglang: a profiling tool checks its arguments with these before it needs a GPU.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any, Callable

from sglang_mux import cli
from sglang_mux.cli import UsageError

RUN_DIR_HINT = "give a bench.run --out directory (it holds summary.json) or that summary.json"


def about(doc: str) -> str:
    """A module docstring's first paragraph on one line: a tool's ``--help`` description."""
    return " ".join(doc.strip().split("\n\n")[0].split())


def read_json(path: str | Path, what: str = "JSON file", hint: str = "") -> Any:
    """The parsed JSON of ``path``. Missing, a directory, empty or not JSON: UsageError."""
    p = Path(path)
    tail = f"; {hint}" if hint else ""
    if p.is_dir():
        raise UsageError(f"{p} is a directory, expected a {what}{tail}")
    if not p.is_file():
        raise UsageError(f"no {what} at {p}{tail}")
    text = p.read_text(encoding="utf-8", errors="replace")
    if not text.strip():
        raise UsageError(f"{p} is empty, expected a {what}{tail}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"{p} is not valid JSON ({e.msg}, line {e.lineno}), expected a {what}{tail}") from None


def read_jsonl(path: str | Path, what: str = "JSONL file", need: tuple[str, ...] = ()) -> list[dict]:
    """The objects of a JSON-lines file (blank lines skipped). Missing, empty, a line that is not
    a JSON object, or an object lacking a key of ``need``: UsageError naming the line."""
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{p} is a directory, expected a {what}")
    if not p.is_file():
        raise UsageError(f"no {what} at {p}")
    rows = []
    with open(p, encoding="utf-8", errors="replace") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                x = json.loads(line)
            except json.JSONDecodeError as e:
                raise UsageError(f"{p} line {i} is not JSON ({e.msg}); a {what} holds one JSON object a line") from None
            if not isinstance(x, dict):
                raise UsageError(f"{p} line {i} is not a JSON object; a {what} holds one JSON object a line")
            lacks = [k for k in need if k not in x]
            if lacks:
                raise UsageError(f"{p} line {i} lacks {', '.join(lacks)}; each line of a {what} needs {', '.join(need)}")
            rows.append(x)
    if not rows:
        raise UsageError(f"{p} is empty, expected a {what}")
    return rows


def run_summary(run: str | Path) -> tuple[Path, dict]:
    """A bench.run output: (its directory, its summary.json). Accepts the directory or the file."""
    p = Path(run)
    f = p / "summary.json" if p.is_dir() else p
    if not f.exists():
        raise UsageError(f"no summary.json at {f}: {RUN_DIR_HINT}")
    s = read_json(f, "bench.run summary.json", RUN_DIR_HINT)
    if not isinstance(s, dict) or not isinstance(s.get("systems"), dict):
        raise UsageError(f"{f} is not a bench.run summary (no 'systems' object): {RUN_DIR_HINT}")
    return f.parent, s


def model_config(path: str | Path) -> dict:
    """A Hugging Face config.json as a dict, checked to give the model's shape."""
    from sglang_mux.tables import ModelShape

    hint = "give the model's Hugging Face config.json, e.g. launch/models/llama-3.1-8b/config.json"
    cfg = read_json(path, "model config.json", hint)
    if not isinstance(cfg, dict):
        raise UsageError(f"{path} is not a JSON object; {hint}")
    try:
        ModelShape.from_hf_config(cfg)
    except KeyError as e:
        raise UsageError(f"{path} lacks {e.args[0]!r}; {hint}") from None
    except (TypeError, ValueError, ZeroDivisionError) as e:
        raise UsageError(f"{path} has a malformed model shape ({e}); {hint}") from None
    return cfg


def table_dir(name_or_path: str | Path, flag: str = "--table") -> Path:
    """A contention table directory: a path, or a shipped table's name (tables.resolve_table)."""
    try:
        return _table(str(name_or_path))
    except UsageError as e:
        raise UsageError(f"{flag}: {e}") from None


def estimator(table: str | Path, flag: str = "--table"):
    """sglang_mux.estimator.Estimator of a table (a path or a shipped name); a missing or malformed
    table is a UsageError."""
    from sglang_mux.estimator import Estimator
    from sglang_mux.tables import TableError

    d = table_dir(table, flag)
    try:
        return Estimator.from_table(d)
    except TableError as e:
        raise UsageError(f"{flag}: {e}") from None


def number_list(text: str, flag: str = "", kind: Callable[[str], float] = float, *,
                allow_zero: bool = False, example: str = "1,2") -> list:
    """A comma list of numbers > 0 (>= 0 with ``allow_zero``), at least one."""
    head = f"{flag} " if flag else ""
    try:
        xs = [kind(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"{head}takes a comma list of {'whole ' if kind is int else ''}numbers, "
                         f"e.g. {example}; got {text!r}") from None
    if not xs:
        raise UsageError(f"{head}needs at least one value, e.g. {example}")
    bound = ">= 0" if allow_zero else "> 0"
    for x in xs:
        if not math.isfinite(x):  # float("nan") parses, and passes every < test below
            raise UsageError(f"{head}takes finite values {bound}, e.g. {example}; got {x:g}")
        if x < 0 or (x == 0 and not allow_zero):
            raise UsageError(f"{head}takes values {bound}, got {x:g}")
    return xs


def arg_type(check: Callable[..., Any], name: str, **kw) -> Callable[[str], Any]:
    """``check(text, **kw)`` as an argparse ``type``: its UsageError becomes argparse's error
    (``error: argument --flag: <message>``, exit 2 through cli.ArgumentParser)."""

    def parse(text: str):
        try:
            return check(text, **kw)
        except UsageError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    parse.__name__ = name
    return parse


def numbers(kind: Callable[[str], float] = float, allow_zero: bool = False, example: str = "1,2"):
    """An argparse ``type``: a comma list of positive numbers (see :func:`number_list`)."""
    return arg_type(number_list, "numbers", kind=kind, allow_zero=allow_zero, example=example)


def _table(text: str) -> Path:
    from sglang_mux.tables import TableError, resolve_table

    try:
        return resolve_table(text)
    except TableError as e:
        raise UsageError(f"no table directory {text} ({e.problem})") from None


#: argparse ``type`` of a ``--table``: an existing directory, or a shipped table's name.
table_arg = arg_type(_table, "table")
#: argparse ``type`` of a ``--model-config``: a readable HF config.json (the path is kept).
model_config_arg = arg_type(lambda text: (model_config(text), text)[1], "model config")


def port(text: str) -> int:
    """An argparse ``type``: a TCP port, 0..65535 (0: any free one)."""
    v = cli.positive(int, allow_zero=True)(text)
    if v > 65535:
        raise argparse.ArgumentTypeError(f"a port is at most 65535, got {text}")
    return v


def _in_unit_interval(text: str, what: str, example: str, zero_ok: bool) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; give {what}, e.g. {example}") from None
    if not (0 <= v <= 1 if zero_ok else 0 < v <= 1):  # nan fails this too
        raise argparse.ArgumentTypeError(f"{what}, e.g. {example}; got {text}")
    return v


def fraction(text: str) -> float:
    """An argparse ``type``: a share in (0, 1]."""
    return _in_unit_interval(text, "a fraction within (0, 1]", "0.85", zero_ok=False)


def share(text: str) -> float:
    """An argparse ``type``: a share in [0, 1] (0 and 1 allowed: none or all of something)."""
    return _in_unit_interval(text, "a share within [0, 1]", "0.5", zero_ok=True)




def need_gpu(tool: str) -> None:
    """Fail with the error line unless torch with a CUDA GPU is here (checked after the arguments)."""
    try:
        import torch
    except ImportError:
        raise UsageError(f"{tool} measures on a GPU: it needs torch and sglang (pip install 'sglang==0.5.16') "
                         "on a machine with a CUDA GPU; none is installed here") from None
    if not torch.cuda.is_available():
        raise UsageError(f"{tool} measures on a GPU: torch sees no CUDA device here; run it on a GPU machine")


def load_trace(name_or_path: str, **kw):
    """traces.load_trace with a bad trace file as a UsageError (what is wrong, which file)."""
    from sglang_mux import traces

    try:
        path = traces.trace_path(name_or_path)
    except FileNotFoundError as e:
        raise UsageError(f"--trace: {e.args[0] if e.args else e}; give a JSONL trace file or a bundled name") from None
    try:
        return traces.load_trace(str(path), **kw)
    except ValueError as e:
        raise UsageError(f"--trace: {e}") from None  # TraceError names the file and line
