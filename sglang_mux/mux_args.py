"""The project's server arguments: parsing, validation, and what they force on SGLang's own.

Each ``MuxArgs`` field carries its flag, help and README wording (``Flag`` in its metadata);
from that one place come the argparse group (``add_mux_args``), ``split_argv`` and the README's
flag table (``markdown_table``; ``python -m sglang_mux.mux_args --markdown`` prints it).
Plain Python (argparse + dataclass); SGLang's ServerArgs is touched only through attribute
names in `reconcile_sglang_args`, so this module is tested on the CPU with a stand-in object.
A bad value is a ``MuxArgError`` whose message names the flag and what to do.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from dataclasses import asdict, dataclass, field, fields

from sglang_mux.partitions import MIN_GRANULARITY, validate_granularity
from sglang_mux.policy.host_time import FUSED_HOST_QUANTILE
from sglang_mux.policy.slo import SLO, SLOError

ENV_VAR = "SGLANG_MUX_CONFIG"  # carries MuxArgs to the scheduler subprocess (spawned)
POLICIES = ("dispatcher", "hybrid", "fixed", "batch-size")
# Attention backends whose decode graphs can be captured per partition and whose prefill runs
# layer by layer here (both measured on a GPU); others are refused at start.
MUX_BACKENDS = ("fa3", "triton")


class MuxArgError(ValueError):
    """An invalid or incompatible mux argument; the message says what to do."""


@dataclass(frozen=True)
class Flag:
    """How one MuxArgs field appears on the command line and in the README's flag table.

    ``name``: the flag (default ``--mux-<field>``); ``help``: the ``--help`` line; ``doc``: the
    table's wording where it says more (default: ``help``); ``choices``: allowed values. The
    argparse type follows the default's (bool: ``--x`` / ``--no-x`` when the default is True,
    a plain switch when it is False)."""

    help: str
    doc: str | None = None
    name: str | None = None
    choices: tuple | None = None
    metavar: str | None = None


def _flag(default, help: str, **kw):
    return field(default=default, metadata={"flag": Flag(help, **kw)})


@dataclass
class MuxArgs:
    tbt_slo_ms: float = _flag(50.0, "decode time-between-tokens SLO (ms)")
    # Length-aware by default: a flat SLO lets preemption help neither batch, so it never fires,
    # and a long prompt's own prefill would eat a short one's budget (MuxWise §4.4.3).
    ttft_slo_ms: float = _flag(2000.0, "time-to-first-token SLO intercept (ms): SLO + k * prompt tokens; "
                                       "preemption checks it")
    ttft_ms_per_token: float = _flag(
        0.2, "length-aware TTFT SLO for preemption: SLO + k * prompt tokens (0 = flat, which never preempts)",
        doc="length-aware TTFT SLO used by preemption: SLO + k × prompt tokens (with 0, preemption cannot help "
            "both batches and never fires)")
    sm_granularity: int = _flag(16, "SMs per partition step (Hopper: a multiple of 8)")
    contention_table: str = _flag(
        "auto", "a shipped table's name or a contention_tables/<model>__<gpu>__<backend>/ dir, or 'auto' (pick "
                "by model shape, GPU and attention backend)",
        doc="a shipped table's name or a `contention_tables/<model>__<gpu>__<backend>/` dir; `auto` picks by model "
            "shape, GPU and attention backend (never another backend's table), else a roofline probed per "
            "partition at start-up, with a warning saying how to profile")
    preemption: bool = _flag(True, "non-recursive preemption of long prefills by short ones")
    fcfs_prefill: bool = _flag(False, "start prefills first come, first served (default: earliest TTFT deadline "
                                      "first, so short prompts go ahead of long ones not yet started)")
    policy: str = _flag("hybrid", "hybrid (per iteration a fused mixed chunk on the whole GPU or the "
                                  "dispatcher's partition), dispatcher (SLO-aware partitions only), fixed (one "
                                  "partition: --mux-fixed-decode-sms) or batch-size (SGLang's PD-multiplexing demo rule)",
                        doc="`hybrid` (per iteration a fused mixed chunk on the whole GPU or the dispatcher's "
                            "partition), `dispatcher` (SLO-aware partitions only), `fixed` (one partition), "
                            "`batch-size` (SGLang's PD-multiplexing demo rule)", choices=POLICIES)
    fixed_decode_sms: int = _flag(64, "decode SMs with --mux-policy fixed",
                                  doc="decode SMs with `--mux-policy fixed`")
    timeline: str | None = _flag(None, "append every dispatch decision to this JSONL file",
                                 doc="append every dispatch decision to this JSONL file (`bench/plots.py` draws it)",
                                 metavar="FILE")
    timeline_max_mb: float = _flag(256.0, "past this size the timeline moves to FILE.1 and a new one begins",
                                   doc="past this size the timeline moves to `FILE.1` (replacing the last one) and "
                                       "a new file begins")
    tbt_host_budget: bool = _flag(
        True, "plan decode partitions for the TBT SLO less the loop's measured host time per iteration",
        doc="plan decode's partition for the TBT SLO less the loop's measured host time per decode iteration "
            "(a quantile of the last 256, at most half the SLO): a token's gap is GPU time plus that host time")
    tbt_host_quantile: float = _flag(
        0.9, "the quantile of the loop's recent host times (per decode iteration) that the TBT budget takes off "
             "the SLO (a hybrid's fused iteration budgets its own overrun: --mux-fused-host-quantile)",
        doc="which quantile of the loop's recent host times that budget takes; a higher one plans for the "
            "host's tail and leaves prefill fewer SMs. A fused iteration (`--mux-policy hybrid`) budgets its "
            "gap's overrun of its price instead (`--mux-fused-host-quantile`)")
    fused_host_quantile: float = _flag(
        FUSED_HOST_QUANTILE, "the quantile of a fused iteration's recent overruns of its price (wall time less price) that "
              "the hybrid's TBT budget takes off the SLO",
        doc="which quantile of a fused iteration's recent overruns of its price (`--mux-policy hybrid`) its "
            "TBT budget takes off the SLO: the SLO's own P99 by default. Overruns over half the SLO are stalls "
            "that no chunk size avoids, left out while they are fewer than half")
    fused_start_budget: bool = _flag(
        False, "budget the first fused iteration of a streak for its own overrun (--mux-policy hybrid), apart from "
               "the streak's",
        doc="budget the first fused iteration of a streak (after any other kind) for its own overrun of its "
            "price, apart from the streak's (`--mux-policy hybrid`): SGLang sets up the first mixed batch of a "
            "streak in that iteration's gap")
    overlap_decode: bool = _flag(
        True, "with --mux-policy hybrid, run a decode alone (no prefill anywhere) as SGLang's overlap loop does, "
              "so a fused streak goes on through it",
        doc="with `--mux-policy hybrid`, a decode alone (no prefill batch anywhere) runs as SGLang's overlap "
            "loop runs one: on the whole GPU, the next batch formed and launched before the last one's result "
            "is processed, so that processing a result adds no host time to a token's gap. A fused streak goes "
            "on through it instead of ending, and its next fused iteration needs no new set-up")
    # scheduler_loop forms the batch after the decode launch when this is set.
    defer_prefill_start: bool = _flag(
        False, "form a new prefill batch (SGLang's batch formation: prefix match, KV allocation) after the decode "
               "iteration is launched, so its host time overlaps the decode's GPU time instead of lengthening a "
               "token's gap")
    disable_mux: bool = _flag(False, "plain SGLang scheduling (no multiplexing)", name="--disable-mux")
    layerwise_max_tokens: int = _flag(
        0, "hybrid: a longer prompt runs as fused chunks, not one layer-wise prefill (0: what memory holds)",
        metavar="TOKENS")

    @property
    def slo(self) -> SLO:
        """The SLOs the policy plans for (`validate` has checked them)."""
        return SLO(self.tbt_slo_ms, self.ttft_slo_ms, self.ttft_ms_per_token)

    def validate(self) -> None:
        """Every flag's value on its own and against the others; the GPU's SM count is checked
        later (`check_gpu`). Raises MuxArgError naming the flag and what to give."""
        try:
            self.slo
        except SLOError as e:
            flag = {"tbt_ms": "--mux-tbt-slo-ms", "ttft_ms": "--mux-ttft-slo-ms",
                    "ttft_ms_per_token": "--mux-ttft-ms-per-token"}[e.field]
            raise MuxArgError(f"{flag} {e}; the defaults are 50, 5000 and 0") from None
        if not 0.0 <= self.tbt_host_quantile <= 1.0:
            raise MuxArgError(f"--mux-tbt-host-quantile must be in [0, 1] (got {self.tbt_host_quantile}); "
                              "0.9 is the default, 0.99 plans for the tail of the host's time")
        if not 0.0 < self.fused_host_quantile <= 1.0:
            raise MuxArgError(f"--mux-fused-host-quantile must be in (0, 1] (got {self.fused_host_quantile}); "
                              "0.99 is the default")
        if not 0 < self.timeline_max_mb < math.inf:
            raise MuxArgError(f"--mux-timeline-max-mb must be a number of MiB > 0 (got {self.timeline_max_mb})")
        if self.policy not in POLICIES:
            raise MuxArgError(f"--mux-policy must be one of {', '.join(POLICIES)} (got {self.policy!r})")
        if self.contention_table != "auto":
            from sglang_mux.tables import TableError, resolve_table

            try:
                resolve_table(self.contention_table)
            except TableError as e:
                raise MuxArgError(f"--mux-contention-table: {e} (or 'auto' to pick by model, GPU and "
                                  f"attention backend)") from None
        g = self.sm_granularity
        if g < MIN_GRANULARITY or g % MIN_GRANULARITY:
            raise MuxArgError(f"--mux-sm-granularity {g} cannot be honoured: green contexts on Hopper split SMs in "
                              f"multiples of {MIN_GRANULARITY}; use 16 (MuxWise's choice), 24, 32, ...")
        if self.layerwise_max_tokens < 0 or (self.layerwise_max_tokens and self.policy != "hybrid"):
            raise MuxArgError(f"--mux-layerwise-max-tokens {self.layerwise_max_tokens}: a number of tokens >= 0 "
                              "(0: what memory holds), with --mux-policy hybrid only (another policy has no "
                              "chunks to run a longer prompt in)")
        if self.policy == "fixed" and (self.fixed_decode_sms <= 0 or self.fixed_decode_sms % g):
            raise MuxArgError(f"--mux-fixed-decode-sms {self.fixed_decode_sms} must be a positive multiple of "
                              f"--mux-sm-granularity {g}")

    def check_gpu(self, total_sms: int) -> None:
        """What depends on the GPU's SM count: two partitions of the granularity, and prefill SMs
        beside a fixed decode partition. Raises MuxArgError."""
        try:
            validate_granularity(total_sms, self.sm_granularity)
        except ValueError as e:
            raise MuxArgError(str(e)) from None
        g = self.sm_granularity
        if self.policy == "fixed" and total_sms - self.fixed_decode_sms < g:
            raise MuxArgError(f"--mux-fixed-decode-sms {self.fixed_decode_sms} leaves fewer than {g} SMs for "
                              f"prefill on this {total_sms}-SM GPU")

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls, environ=os.environ) -> "MuxArgs":
        raw = environ.get(ENV_VAR)
        return cls(**json.loads(raw)) if raw else cls()


def flag_name(f) -> str:
    """The command-line flag of a MuxArgs field."""
    return f.metadata["flag"].name or "--mux-" + f.name.replace("_", "-")


def _argparse_kwargs(f) -> dict:
    spec: Flag = f.metadata["flag"]
    kw = dict(default=f.default, dest=f.name, help=spec.help)
    if isinstance(f.default, bool):
        kw["action"] = argparse.BooleanOptionalAction if f.default else "store_true"
    else:
        kw["type"] = type(f.default) if f.default is not None and not isinstance(f.default, str) else None
        if spec.choices:
            kw["choices"] = spec.choices
        if spec.metavar:
            kw["metavar"] = spec.metavar
    return kw


def add_mux_args(parser: argparse.ArgumentParser) -> None:
    """Every MuxArgs field as a flag, in one argument group."""
    g = parser.add_argument_group("sglang_mux (PD multiplexing)")
    for f in fields(MuxArgs):
        kw = _argparse_kwargs(f)
        if kw.get("type") is None:
            kw.pop("type", None)
        g.add_argument(flag_name(f), **kw)


def split_argv(argv: list[str]) -> tuple[MuxArgs, list[str]]:
    """Separate our flags from SGLang's, so SGLang's own parser sees only its arguments.
    A bad value of one of ours (``--mux-tbt-slo-ms x``): one ``error:`` line, exit status 2."""
    from sglang_mux import cli

    parser = cli.ArgumentParser(prog="sglang-mux", add_help=False, allow_abbrev=False)
    add_mux_args(parser)
    ns, rest = parser.parse_known_args(argv)
    return MuxArgs(**{f.name: getattr(ns, f.name) for f in fields(MuxArgs)}), rest


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _default_text(v) -> str:
    if isinstance(v, bool):
        return "on" if v else "off"
    if v is None:
        return "—"
    if isinstance(v, str):
        return f"`{v}`"
    return f"{v:g}" if isinstance(v, float) else str(v)


def markdown_table() -> str:
    """The README's flag table (flag | default | meaning), one row per MuxArgs field."""
    rows = ["| flag | default | meaning |", "|---|---|---|"]
    for f in fields(MuxArgs):
        spec: Flag = f.metadata["flag"]
        name = flag_name(f)
        flag = f"`{name}` / `--no-{name[2:]}`" if f.default is True else f"`{name}`"
        rows.append(f"| {flag} | {_default_text(f.default)} | {_cell(spec.doc or spec.help)} |")
    return "\n".join(rows) + "\n"


def attention_backend(server_args) -> str:
    """The one attention backend the server runs (SGLang resolves its default, FA3 on Hopper,
    while parsing); refuses one the mux cannot run and split prefill/decode backends."""
    base = getattr(server_args, "attention_backend", None)
    pre = getattr(server_args, "prefill_attention_backend", None) or base
    dec = getattr(server_args, "decode_attention_backend", None) or base
    ok = ", ".join(MUX_BACKENDS)
    if pre != dec:
        raise MuxArgError(f"prefill attention backend {pre!r} != decode attention backend {dec!r}: the mux runs both "
                          f"phases with one backend and one contention table; pass one --attention-backend ({ok})")
    if dec not in MUX_BACKENDS:
        raise MuxArgError(f"--attention-backend {dec!r} cannot be multiplexed here; use one of {ok} "
                          f"(fa3 is SGLang's default on H100/H200), or add --disable-mux")
    return dec


def reconcile_sglang_args(server_args, explicit: set[str]) -> list[str]:
    """Make SGLang's arguments compatible with multiplexing; return notes of what was set.

    Settings the user did not choose are set for them (and said); settings the user chose
    explicitly that cannot work with multiplexing are rejected with a message.
    `explicit` holds the SGLang flags (e.g. "--chunked-prefill-size") present on the command line.
    """
    notes = []

    def reject_or_set(flag: str, attr: str, ok, value, why: str):
        cur = getattr(server_args, attr)
        if ok(cur):
            return
        if flag in explicit:
            raise MuxArgError(f"{flag}={cur!r} cannot combine with PD multiplexing: {why}. Drop it, or add --disable-mux.")
        setattr(server_args, attr, value)
        notes.append(f"set {flag}={value!r} ({why})")

    reject_or_set("--pp-size", "pp_size", lambda v: v == 1, 1, "pipeline parallelism splits layers across GPUs")
    reject_or_set("--chunked-prefill-size", "chunked_prefill_size", lambda v: v is not None and v <= 0, -1,
                  "layer-wise prefill replaces chunked prefill")
    reject_or_set("--disaggregation-mode", "disaggregation_mode", lambda v: v in (None, "null"), "null",
                  "prefill and decode share one GPU here")
    reject_or_set("--enable-mixed-chunk", "enable_mixed_chunk", lambda v: not v, False,
                  "mixed chunks need chunked prefill")
    if not getattr(server_args, "disable_overlap_schedule", False):
        server_args.disable_overlap_schedule = True
        notes.append("set --disable-overlap-schedule (the mux loop overlaps prefill and decode itself)")
    if getattr(server_args, "enable_pdmux", False) and "--enable-pdmux" in explicit:
        notes.append("--enable-pdmux: SGLang's demo loop is replaced by sglang_mux's dispatcher")
    # TP ranks agree on every iteration through tp_consensus; each data-parallel replica (SGLang's
    # controller starts it through our scheduler hook) is a mux of its own. DP attention instead
    # shares one batch across replicas, which one replica's dispatcher cannot plan.
    if getattr(server_args, "enable_dp_attention", False):
        raise MuxArgError("--enable-dp-attention cannot combine with PD multiplexing (each replica plans its own "
                          "batches); drop it, or add --disable-mux")
    if getattr(server_args, "speculative_algorithm", None):
        raise MuxArgError("speculative decoding cannot combine with PD multiplexing; drop --speculative-algorithm")
    attention_backend(server_args)
    server_args.enable_pdmux = True
    return notes


def main(argv: list[str] | None = None) -> int:
    """``python -m sglang_mux.mux_args [--markdown]``: the flags' help, or the README's table."""
    from sglang_mux import cli

    ap = cli.ArgumentParser(prog="python -m sglang_mux.mux_args",
                            description="The --mux-* server flags (python -m sglang_mux.launch_server takes them).")
    ap.add_argument("--markdown", action="store_true",
                    help="print the README's flag table (between its <!-- mux-flags:begin/end --> markers)")
    a = ap.parse_args(argv)
    if a.markdown:
        print(markdown_table(), end="")
    else:
        hp = cli.ArgumentParser(prog="python -m sglang_mux.launch_server", add_help=False,
                                usage="%(prog)s [every sglang.launch_server argument] [--mux-* arguments]")
        add_mux_args(hp)
        print(hp.format_help(), end="")
    return 0


if __name__ == "__main__":
    from sglang_mux import cli

    cli.run(main)
