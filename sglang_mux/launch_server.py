"""`python -m sglang_mux.launch_server`: SGLang's server with PD multiplexing.

Takes every `sglang.launch_server` argument plus the `--mux-*` ones (mux_args.py). The HTTP API
(/generate, OpenAI /v1/*, radix prefix cache) is SGLang's own; only the scheduler loop differs.
A bad `--mux-*` argument, or an SGLang one that cannot combine with multiplexing, is one
``error:`` line on stderr and exit status 2 (checked before SGLang is needed where it can be);
without SGLang installed, ``--help`` lists our flags and a start says how to install it (one
``error:`` line, exit status 2, as every other tool of the project answers a setup it cannot run).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys

from sglang_mux import cli
from sglang_mux.fused_price import HYBRID_GRAPH_MAX_TOKENS
from sglang_mux.mux_args import ENV_VAR, MuxArgError, add_mux_args, reconcile_sglang_args, split_argv

logger = logging.getLogger("sglang_mux")

# Flags we set on SGLang's command line before it parses, so its own defaults derived from them
# (e.g. prefill token budgets) are consistent; an explicit conflicting value is rejected later.
_FORCED = (("--chunked-prefill-size", ["-1"]), ("--disable-overlap-schedule", []), ("--enable-pdmux", []))
# The hybrid's fused chunks run through SGLang's breakable prefill CUDA graph, captured up to the
# largest fused batch (its chunk sizes count the decode rows); SGLang leaves it off without chunked
# prefill. Eagerly a fused iteration costs more than its price (docs/measurements.md).
HYBRID_PREFILL_GRAPH = ("--cuda-graph-max-bs-prefill", [str(HYBRID_GRAPH_MAX_TOKENS)])
# SGLang captures its decode graph at every size of its list once per partition (9 sets on 132 SMs:
# 22.6 s of a 105-s start against 5.1 s for one set, H100 2026-12-06): the mux keeps the sizes each at
# least this much above the last, so a batch runs padded by about a quarter at most (below ~128 rows
# an 8B decode on the whole GPU reads weights more than it computes: padding costs little there).
DECODE_GRAPH_STEP = 1.25
_DECODE_SIZE_FLAGS = {"--cuda-graph-bs-decode", "--cuda-graph-bs", "--cuda-graph-config"}


def thinned_decode_sizes(sizes, step: float = DECODE_GRAPH_STEP) -> list[int]:
    """SGLang's decode graph sizes (ascending or not) thinned for capture once per partition: the
    smallest, then each size at least ``step`` times the last kept, and always the largest."""
    out: list[int] = []
    for s in sorted(set(int(x) for x in sizes)):
        if not out or s >= step * out[-1]:
            out.append(s)
    if sizes and out[-1] != max(sizes):
        out.append(int(max(sizes)))
    return out


def thin_decode_graph(server_args, explicit: set[str]) -> str | None:
    """Thin SGLang's resolved decode graph sizes (``cuda_graph_config.decode.bs``) in place unless
    the user chose them; returns the note saying so (None: left as they were)."""
    decode = server_args.cuda_graph_config.decode
    if not decode.bs or explicit & _DECODE_SIZE_FLAGS:
        return None
    thin = thinned_decode_sizes(decode.bs)
    if thin == sorted(decode.bs):
        return None
    n = len(decode.bs)
    decode.bs = thin
    return (f"set --cuda-graph-bs-decode {' '.join(map(str, thin))} (captured once per partition: {len(thin)} "
            f"of SGLang's {n} sizes, each at least {DECODE_GRAPH_STEP}x the last; give the flag to choose)")


def forced_flags(mux, explicit: set[str]) -> list[tuple[str, list[str]]]:
    """The SGLang flags added to the command line before SGLang parses it: those the mux needs and
    the user did not give (none with --disable-mux)."""
    if mux.disable_mux:
        return []
    out = [f for f in _FORCED if f[0] not in explicit]
    if mux.policy == "hybrid" and not explicit & {HYBRID_PREFILL_GRAPH[0], "--disable-cuda-graph"}:
        out.append(HYBRID_PREFILL_GRAPH)
    return out


def explicit_flags(argv: list[str]) -> set[str]:
    return {a.split("=", 1)[0] for a in argv if a.startswith("--")}


def build_server_args(mux, rest: list[str]):
    """SGLang's ServerArgs from its arguments (``rest``) for validated MuxArgs ``mux`` ->
    (ServerArgs, notes). Raises MuxArgError for an SGLang argument multiplexing cannot take."""
    from sglang.srt.server_args import prepare_server_args

    explicit = explicit_flags(rest)
    notes: list[str] = []
    forced = forced_flags(mux, explicit)
    for flag, vals in forced:
        rest = [*rest, flag, *vals]
    server_args = prepare_server_args(rest)
    if not mux.disable_mux:
        notes = reconcile_sglang_args(server_args, explicit)
        note = thin_decode_graph(server_args, explicit)
        if note:
            notes.append(note)
        if HYBRID_PREFILL_GRAPH in forced:
            notes.append(f"set {HYBRID_PREFILL_GRAPH[0]} {HYBRID_PREFILL_GRAPH[1][0]} (the hybrid's fused chunks run "
                         "through SGLang's prefill CUDA graph: ~1 minute more start-up, ~1 GB)")
    return server_args, notes


INSTALL_HINT = ("SGLang is not installed: the server needs the serving extra, pinned to sglang==0.5.16 and "
                "torch==2.11.0: pip install 'sglang_mux[serve]' (in a checkout: pip install -e '.[serve]'; without a "
                "package index, the offline wheel bundle of those pins)")


def mux_help() -> str:
    parser = cli.ArgumentParser(prog="python -m sglang_mux.launch_server", add_help=False,
                                usage="%(prog)s [every sglang.launch_server argument] [--mux-* arguments]")
    add_mux_args(parser)
    return parser.format_help()


def _run(argv: list[str] | None = None, have_sglang: bool | None = None) -> None:
    """The server's start; ``have_sglang`` (default: whether it is installed) lets the tests take
    the path of a machine without it."""
    logging.basicConfig(level=logging.INFO, format="[sglang_mux] %(message)s")
    argv = sys.argv[1:] if argv is None else list(argv)
    if have_sglang is None:
        have_sglang = importlib.util.find_spec("sglang") is not None
    mux, rest = split_argv(argv)
    if "-h" in argv or "--help" in argv:
        print(mux_help())  # ours first: SGLang's own help follows and exits
        if not have_sglang:
            print(INSTALL_HINT + "; then --help lists SGLang's own arguments too.")
            return
    else:
        try:  # our own arguments are checked without SGLang, once
            mux.validate()
        except MuxArgError as e:
            raise cli.UsageError(str(e)) from None
        if not have_sglang:
            raise cli.UsageError(INSTALL_HINT)
    try:
        server_args, notes = build_server_args(mux, rest)
    except MuxArgError as e:
        raise cli.UsageError(str(e)) from None
    for n in notes:
        logger.info(n)

    from sglang.srt.entrypoints.http_server import launch_server
    from sglang.srt.utils import kill_process_tree

    from sglang_mux.patches import guard_http, run_guarded_scheduler_process, run_mux_scheduler_process

    guard_http()  # hostile input is refused before SGLang sees it, multiplexing on or off
    try:
        if mux.disable_mux:
            logger.info("multiplexing off (--disable-mux): plain SGLang scheduling")
            launch_server(server_args, run_scheduler_process_func=run_guarded_scheduler_process)
        else:
            os.environ[ENV_VAR] = mux.to_env()  # read by the spawned scheduler process
            launch_server(server_args, run_scheduler_process_func=run_mux_scheduler_process)
    finally:
        kill_process_tree(os.getpid(), include_parent=False)


def main(argv: list[str] | None = None) -> None:
    """The ``sglang-mux`` console script: user errors as one ``error:`` line (exit 2), a closed
    pipe (``--help | head``) quiet."""
    cli.run(_run, argv)


if __name__ == "__main__":
    main()
