"""The systems under test: server command lines by name.

=======================  =====================================================================
name                     server
=======================  =====================================================================
``mux``                  ``python -m sglang_mux.launch_server ... --mux-policy dispatcher``
``mux-fixed-<D>``        ``... --mux-policy fixed --mux-fixed-decode-sms D``
``mux-nopreempt``        ``... --mux-policy dispatcher --no-mux-preemption`` (preemption ablation)
``mux-nohost``           ``... --mux-policy dispatcher --no-mux-tbt-host-budget`` (partitions planned
                         for the whole TBT SLO, not the SLO less the loop's host time)
``mux-hostq<NN>``        ``... --mux-policy dispatcher --mux-tbt-host-quantile 0.NN`` (the TBT budget
                         takes that quantile of the loop's host time off the SLO; the default 0.9)
``mux-defer``            ``... --mux-policy dispatcher --mux-defer-prefill-start`` (a new prefill
                         batch is formed after the decode launch, off the token's path)
``mux-hybrid``           ``... --mux-policy hybrid`` (per iteration a fused mixed chunk on the whole
                         GPU or the dispatcher's partition; the launcher adds SGLang's prefill CUDA
                         graph for the fused chunks)
``mux-hybrid-fq<NN>``    ``... --mux-policy hybrid --mux-fused-host-quantile 0.NN``
``mux-hybrid-fs``        ``... --mux-policy hybrid --mux-fused-start-budget`` (a fused streak's first
                         iteration budgeted apart)
``mux-off``              ``python -m sglang_mux.launch_server ... --disable-mux``: exactly the
                         ``sglang`` system's arguments plus ``--disable-mux`` (plain SGLang
                         scheduling through the mux launcher; its overhead vs ``sglang``)
``sglang``               ``python -m sglang.launch_server`` with its default scheduler
``sglang-chunked-<B>``   ``... --chunked-prefill-size B --enable-mixed-chunk``
``sglang-chunked-<B>-nomix`` ``... --chunked-prefill-size B`` (prefill chunks and decode in separate
                         iterations). With the triton attention backend mixed chunks run the
                         decode rows through the extend kernel, whose cost grows with the running
                         batch (measured: 33K prefill tok/s with no running request, 1.1K with
                         37; SGLang issue #2273); with FA3 (the default on Hopper) they work.
                         The best chunked baseline is the best of both: the sweep runs both
``sglang-chunked-<B>-cap<T>`` ``python -m bench.capped_prefill ... --chunked-prefill-size B
                         --enable-mixed-chunk --long-prefill-token-threshold T``: the peers' answer
                         to a long prompt's head-of-line blocking (vLLM's long-prefill threshold,
                         SGLang PR #34623), a baseline patched in ``bench/``, never the server
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
``--attention-backend B`` when ``bench.run --attention-backend B`` is given (else every system
runs SGLang's default, FA3 on H100/H200), and the caller's extra arguments last
(``launch/serve.sh`` adds ``--sampling-backend pytorch --grammar-backend none``; pass them with
``--server-args`` to bench the same configuration). The backend each system ran with is read
back from its command line or, for SGLang's default, its log (``attention_backend_of``) and
recorded in summary.json: a comparison is fair only on one backend. Mux systems (``kind`` "mux": ``mux``, ``mux-fixed-<D>``,
``mux-nopreempt``, ``mux-nohost``, ``mux-hostq<NN>``, ``mux-defer``, ``mux-hybrid``) also get the benchmark's SLOs (``--mux-tbt-slo-ms``/``--mux-ttft-slo-ms``),
``--mux-ttft-ms-per-token K`` (the length-aware TTFT SLO ``--mux-ttft-slo-ms + K x
prompt tokens`` that preemption decides on; ``bench.run`` always passes it, by default the
goodput check's own K) and ``--mux-timeline``. ``mux-off`` is kind "sglang": multiplexing is off, so it gets none of them.

``all`` is the main comparison (``ALL``: every chunked budget with and without mixing); the
ablations ``mux-nopreempt``, ``mux-nohost``, ``mux-hostq<NN>``, ``mux-defer`` and ``mux-off`` are run by name.
"""
from __future__ import annotations

import lzma
import re
import sys
from pathlib import Path
from typing import Sequence

from sglang_mux.mux_args import MuxArgs

CHUNKED_BUDGETS = (256, 512, 1024, 2048)
CHUNKED = tuple(f"sglang-chunked-{b}{v}" for b in CHUNKED_BUDGETS for v in ("", "-nomix"))
ALL = ("mux", "mux-fixed-64", "sglang", *CHUNKED, "sglang-pdmux")
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
            out += list(CHUNKED)
        else:
            kind(n)
            out.append(n)
    return list(dict.fromkeys(out))


def kind(system: str) -> str:
    """How it schedules: 'mux' (multiplexing on: gets the --mux-* flags) | 'sglang' (SGLang's
    scheduler, ``mux-off`` included) | 'stub'; raises on an unknown name."""
    if system in ("mux", "mux-nopreempt", "mux-nohost", "mux-defer", "mux-hybrid") or \
            re.fullmatch(r"mux-(fixed-\d+|hostq\d\d|hybrid-fq\d\d|hybrid-fs)", system):
        return "mux"
    if system in ("sglang", "sglang-pdmux", "mux-off") or \
            re.fullmatch(r"sglang-chunked-\d+(-nomix|-cap\d+)?", system):
        return "sglang"
    if system == "stub":
        return "stub"
    raise ValueError(f"unknown system {system!r} (mux, mux-fixed-<D>, mux-nopreempt, mux-nohost, mux-hostq<NN>, mux-defer, "
                     "mux-hybrid, mux-hybrid-fq<NN>, mux-hybrid-fs, "
                     "mux-off, sglang, sglang-chunked-<B>[-nomix|-cap<T>], sglang-pdmux, stub)")


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


def flag_value(cmd: Sequence[str] | None, flag: str) -> str | None:
    """The last value of ``flag`` on a command line (``--f v`` or ``--f=v``), as argparse keeps it."""
    out, cmd = None, list(cmd or [])
    for i, x in enumerate(cmd):
        f, eq, val = x.partition("=")
        if f == flag and (eq or i + 1 < len(cmd)):
            out = val if eq else cmd[i + 1]
    return out


_DEFAULT_BACKEND = re.compile(r"Attention backend not specified\. Use (\S+) backend by default")


def attention_backend_of(cmd: Sequence[str] | None, log: str | Path | None = None) -> str | None:
    """The attention backend a server ran with: its ``--attention-backend``, else the default
    SGLang logged choosing (``<system>.log``, or its ``.xz``), else None (unknown)."""
    b = flag_value(cmd, "--attention-backend")
    if b or log is None:
        return b
    log = Path(log)
    xz = log.with_name(log.name + ".xz")
    if log.is_file():
        text = log.read_text(errors="replace")
    elif xz.is_file():
        text = lzma.decompress(xz.read_bytes()).decode(errors="replace")
    else:
        return None
    m = _DEFAULT_BACKEND.search(text)
    return m.group(1) if m else None


def server_command(system: str, model_path: str, port: int, *, mem_fraction: float = 0.85,
                   extra_args: Sequence[str] = (), tbt_slo_ms: float | None = None,
                   ttft_slo_ms: float | None = None, timeline: str | Path | None = None,
                   incremental: bool = True, tokenizer_path: str | None = None,
                   ttft_ms_per_token: float | None = None, attention_backend: str | None = None,
                   python: str = sys.executable) -> list[str]:
    k = kind(system)
    if attention_backend and k != "stub":
        extra_args = ["--attention-backend", attention_backend, *extra_args]
    if system == "mux-off":     # exactly `sglang`'s arguments (its extras last) + --disable-mux
        sg = server_command("sglang", model_path, port, mem_fraction=mem_fraction,
                            incremental=incremental, tokenizer_path=tokenizer_path, python=python)
        return [python, "-m", "sglang_mux.launch_server", *sg[3:], "--disable-mux",
                *extra_args]
    if k == "stub":
        return [python, "-m", "bench.stub_server", "--host", "127.0.0.1", "--port", str(port),
                *extra_args]
    common = common_args(model_path, port, mem_fraction, incremental=incremental,
                         tokenizer_path=tokenizer_path)
    if k == "mux":
        cmd = [python, "-m", "sglang_mux.launch_server", *common]
        m = re.fullmatch(r"mux-fixed-(\d+)", system)
        cmd += ["--mux-policy", "fixed", "--mux-fixed-decode-sms", m.group(1)] if m else \
            ["--mux-policy", "hybrid" if system.startswith("mux-hybrid") else "dispatcher"]
        if system == "mux-nopreempt":
            cmd += ["--no-mux-preemption"]
        if system == "mux-nohost":
            cmd += ["--no-mux-tbt-host-budget"]
        if system == "mux-defer":
            cmd += ["--mux-defer-prefill-start"]
        q = re.fullmatch(r"mux-hostq(\d\d)", system)
        if q:
            cmd += ["--mux-tbt-host-quantile", f"0.{q.group(1)}"]
        q = re.fullmatch(r"mux-hybrid-fq(\d\d)", system)
        if q:
            cmd += ["--mux-fused-host-quantile", f"0.{q.group(1)}"]
        if system == "mux-hybrid-fs":
            cmd += ["--mux-fused-start-budget"]
        if tbt_slo_ms is not None:
            cmd += ["--mux-tbt-slo-ms", f"{tbt_slo_ms:g}"]
        if ttft_slo_ms is not None:
            cmd += ["--mux-ttft-slo-ms", f"{ttft_slo_ms:g}"]
        if ttft_ms_per_token is not None:
            cmd += ["--mux-ttft-ms-per-token", f"{ttft_ms_per_token:g}"]
        if timeline:
            cmd += ["--mux-timeline", str(timeline)]
        return cmd + list(extra_args)
    cap = re.fullmatch(r"sglang-chunked-(\d+)-cap(\d+)", system)
    if cap:
        return [python, "-m", "bench.capped_prefill", *common, "--chunked-prefill-size", cap.group(1),
                "--enable-mixed-chunk", "--long-prefill-token-threshold", cap.group(2), *extra_args]
    cmd = [python, "-m", "sglang.launch_server", *common]
    m = re.fullmatch(r"sglang-chunked-(\d+)(-nomix)?", system)
    if m:
        cmd += ["--chunked-prefill-size", m.group(1)] + ([] if m.group(2) else ["--enable-mixed-chunk"])
    elif system == "sglang-pdmux":
        cmd += ["--enable-pdmux"]
    return cmd + list(extra_args)


def mux_settings(cmd: Sequence[str] | None) -> dict | None:
    """What a server command line sets for multiplexing (None: not a mux launcher, or mux
    off): the length-aware TTFT SLO ``ttft_slo_ms`` + ``ttft_ms_per_token`` x prompt tokens
    (where the command does not say, the server's defaults, `MuxArgs`; a command recorded without
    ``--mux-ttft-ms-per-token`` before that default was length-aware ran with 0) and
    ``preemption`` (default on). The last occurrence wins, as in argparse (``--server-args`` may
    repeat a flag)."""
    cmd = list(cmd or [])
    if "sglang_mux.launch_server" not in cmd or "--disable-mux" in cmd:
        return None
    d = MuxArgs()
    out = {"ttft_slo_ms": d.ttft_slo_ms, "ttft_ms_per_token": d.ttft_ms_per_token, "preemption": d.preemption}
    flags = {"--mux-ttft-slo-ms": "ttft_slo_ms", "--mux-ttft-ms-per-token": "ttft_ms_per_token"}
    for i, x in enumerate(cmd):
        flag, eq, val = x.partition("=")
        if flag in flags and (eq or i + 1 < len(cmd)):
            out[flags[flag]] = float(val if eq else cmd[i + 1])
        elif x in ("--mux-preemption", "--no-mux-preemption"):
            out["preemption"] = x == "--mux-preemption"
    return out
