"""The systems under test: server command lines by name.

=======================  =====================================================================
name                     server
=======================  =====================================================================
``mux``                  ``python -m sglang_mux.launch_server ... --mux-policy dispatcher``
``mux-fixed-<D>``        ``... --mux-policy fixed --mux-fixed-decode-sms D``
``sglang``               ``python -m sglang.launch_server`` with its default scheduler
``sglang-chunked-<B>``   ``... --chunked-prefill-size B --enable-mixed-chunk``
``sglang-pdmux``         ``... --enable-pdmux`` (upstream crashes at start in 0.5.16; the
                         runner records the failed start as the result)
``stub``                 ``python -m bench.stub_server`` (no GPU: smoke tests of the runner)
=======================  =====================================================================

Every SGLang-based system gets the same common arguments: ``--model-path DIR --load-format
dummy --tokenizer-path DIR --port P --host 127.0.0.1 --mem-fraction-static F
--enable-cache-report`` plus, by default, ``--incremental-streaming-output`` (each chunk then
carries only its new tokens; with the default cumulative chunks the server re-serializes the
whole output every token, O(n^2) CPU for 8k-token answers, the same overhead for every
system but one that can leak into TBT), ``--skip-tokenizer-init`` when there is no tokenizer
(``launch/models/*`` hold only ``config.json``; token-id workloads need none, chat does:
``bench.run`` then uses ``--tokenizer-path`` or the shipped ``sglang_mux/data/tokenizer``),
and the caller's extra arguments last (``launch/serve.sh`` adds ``--attention-backend triton
--sampling-backend pytorch --grammar-backend none``; pass them with ``--server-args`` to
bench the same configuration). Mux systems also get the
benchmark's SLOs (``--mux-tbt-slo-ms``/``--mux-ttft-slo-ms``) and ``--mux-timeline``.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Sequence

CHUNKED_BUDGETS = (256, 512, 1024, 2048)
ALL = ("mux", "mux-fixed-64", "sglang", *(f"sglang-chunked-{b}" for b in CHUNKED_BUDGETS),
       "sglang-pdmux")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json")


def has_tokenizer(model_dir: str | Path) -> bool:
    return any((Path(model_dir) / f).exists() for f in TOKENIZER_FILES)


def expand(names: str | Sequence[str]) -> list[str]:
    """'all' and 'sglang-chunked-*' expand; every name is validated."""
    items = names.split(",") if isinstance(names, str) else list(names)
    out: list[str] = []
    for n in (x.strip() for x in items):
        if not n:
            continue
        if n == "all":
            out += ALL
        elif n == "sglang-chunked-*":
            out += [f"sglang-chunked-{b}" for b in CHUNKED_BUDGETS]
        else:
            kind(n)
            out.append(n)
    return list(dict.fromkeys(out))


def kind(system: str) -> str:
    """'mux' | 'sglang' | 'stub'; raises on an unknown name."""
    if system == "mux" or re.fullmatch(r"mux-fixed-\d+", system):
        return "mux"
    if system in ("sglang", "sglang-pdmux") or re.fullmatch(r"sglang-chunked-\d+", system):
        return "sglang"
    if system == "stub":
        return "stub"
    raise ValueError(f"unknown system {system!r} (mux, mux-fixed-<D>, sglang, "
                     "sglang-chunked-<B>, sglang-pdmux, stub)")


def common_args(model_path: str, port: int, mem_fraction: float, *,
                incremental: bool = True, tokenizer_path: str | None = None) -> list[str]:
    """``tokenizer_path`` None: the model dir if it has tokenizer files, else no tokenizer."""
    if tokenizer_path is None and has_tokenizer(model_path):
        tokenizer_path = model_path
    args = ["--model-path", str(model_path), "--load-format", "dummy",
            "--tokenizer-path", str(tokenizer_path or model_path), "--port", str(port),
            "--host", "127.0.0.1", "--mem-fraction-static", str(mem_fraction),
            "--enable-cache-report"]
    if incremental:
        args.append("--incremental-streaming-output")
    if tokenizer_path is None:
        args.append("--skip-tokenizer-init")
    return args


def server_command(system: str, model_path: str, port: int, *, mem_fraction: float = 0.85,
                   extra_args: Sequence[str] = (), tbt_slo_ms: float | None = None,
                   ttft_slo_ms: float | None = None, timeline: str | Path | None = None,
                   incremental: bool = True, tokenizer_path: str | None = None,
                   python: str = sys.executable) -> list[str]:
    k = kind(system)
    if k == "stub":
        return [python, "-m", "bench.stub_server", "--host", "127.0.0.1", "--port", str(port),
                *extra_args]
    common = common_args(model_path, port, mem_fraction, incremental=incremental,
                         tokenizer_path=tokenizer_path)
    if k == "mux":
        cmd = [python, "-m", "sglang_mux.launch_server", *common]
        m = re.fullmatch(r"mux-fixed-(\d+)", system)
        cmd += ["--mux-policy", "fixed", "--mux-fixed-decode-sms", m.group(1)] if m else \
            ["--mux-policy", "dispatcher"]
        if tbt_slo_ms is not None:
            cmd += ["--mux-tbt-slo-ms", f"{tbt_slo_ms:g}"]
        if ttft_slo_ms is not None:
            cmd += ["--mux-ttft-slo-ms", f"{ttft_slo_ms:g}"]
        if timeline:
            cmd += ["--mux-timeline", str(timeline)]
        return cmd + list(extra_args)
    cmd = [python, "-m", "sglang.launch_server", *common]
    m = re.fullmatch(r"sglang-chunked-(\d+)", system)
    if m:
        cmd += ["--chunked-prefill-size", m.group(1), "--enable-mixed-chunk"]
    elif system == "sglang-pdmux":
        cmd += ["--enable-pdmux"]
    return cmd + list(extra_args)
