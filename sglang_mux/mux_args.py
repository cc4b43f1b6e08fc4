"""The project's server arguments: parsing, validation, and what they force on SGLang's own.

Plain Python (argparse + dataclass); SGLang's ServerArgs is touched only through attribute
names in `reconcile_sglang_args`, so this module is tested on the CPU with a stand-in object.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import asdict, dataclass

from sglang_mux.partitions import validate_granularity

ENV_VAR = "SGLANG_MUX_CONFIG"  # carries MuxArgs to the scheduler subprocess (spawned)
POLICIES = ("dispatcher", "fixed", "batch-size")
# Attention backends whose decode graphs can be captured per partition and whose prefill runs
# layer by layer here (measured on the GPU machine: bench/results/); others are refused at start.
MUX_BACKENDS = ("fa3", "triton")


class MuxArgError(ValueError):
    """An invalid or incompatible mux argument; the message says what to do."""


@dataclass
class MuxArgs:
    tbt_slo_ms: float = 50.0
    ttft_slo_ms: float = 5000.0
    # Length-aware TTFT SLO for preemption decisions: slo + k * prompt tokens. With k = 0 (a flat
    # SLO) preemption can never help both batches, so it never fires (dispatch.py explains).
    ttft_ms_per_token: float = 0.0
    sm_granularity: int = 16
    contention_table: str = "auto"
    preemption: bool = True
    policy: str = "dispatcher"
    fixed_decode_sms: int = 64
    timeline: str | None = None
    timeline_max_mb: float = 256.0
    tbt_host_budget: bool = True
    tbt_host_quantile: float = 0.9  # which quantile of the loop's host time the TBT budget takes
    defer_prefill_start: bool = False  # form a new prefill batch after the decode launch (scheduler_loop)
    disable_mux: bool = False

    def validate(self, total_sms: int | None = None) -> None:
        if not self.tbt_slo_ms > 0:
            raise MuxArgError(f"--mux-tbt-slo-ms must be > 0 (got {self.tbt_slo_ms}); the paper uses 50 for 8B models")
        if not self.ttft_slo_ms > 0:
            raise MuxArgError(f"--mux-ttft-slo-ms must be > 0 (got {self.ttft_slo_ms})")
        if self.ttft_ms_per_token < 0:
            raise MuxArgError(f"--mux-ttft-ms-per-token must be >= 0 (got {self.ttft_ms_per_token})")
        if not 0.0 <= self.tbt_host_quantile <= 1.0:
            raise MuxArgError(f"--mux-tbt-host-quantile must be in [0, 1] (got {self.tbt_host_quantile}); "
                              "0.9 is the default, 0.99 plans for the tail of the host's time")
        if not self.timeline_max_mb > 0:
            raise MuxArgError(f"--mux-timeline-max-mb must be > 0 (got {self.timeline_max_mb})")
        if self.policy not in POLICIES:
            raise MuxArgError(f"--mux-policy must be one of {', '.join(POLICIES)} (got {self.policy!r})")
        if self.contention_table != "auto" and not os.path.isdir(self.contention_table):
            raise MuxArgError(
                f"--mux-contention-table {self.contention_table!r} is not a directory; pass a "
                "contention_tables/<model>__<gpu>/ dir, or 'auto' to pick by model and GPU"
            )
        try:
            validate_granularity(total_sms or 132, self.sm_granularity)
        except ValueError as e:
            raise MuxArgError(str(e)) from None
        if self.policy == "fixed":
            g = self.sm_granularity
            if self.fixed_decode_sms <= 0 or self.fixed_decode_sms % g:
                raise MuxArgError(
                    f"--mux-fixed-decode-sms {self.fixed_decode_sms} must be a positive multiple of "
                    f"--mux-sm-granularity {g}"
                )
            if total_sms is not None and total_sms - self.fixed_decode_sms < g:
                raise MuxArgError(
                    f"--mux-fixed-decode-sms {self.fixed_decode_sms} leaves fewer than {g} SMs for "
                    f"prefill on this {total_sms}-SM GPU"
                )

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls, environ=os.environ) -> "MuxArgs":
        raw = environ.get(ENV_VAR)
        return cls(**json.loads(raw)) if raw else cls()


def add_mux_args(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("sglang_mux (PD multiplexing)")
    d = MuxArgs()
    g.add_argument("--mux-tbt-slo-ms", type=float, default=d.tbt_slo_ms, help="decode time-between-tokens SLO (ms)")
    g.add_argument("--mux-ttft-slo-ms", type=float, default=d.ttft_slo_ms, help="time-to-first-token SLO (ms)")
    g.add_argument("--mux-ttft-ms-per-token", type=float, default=d.ttft_ms_per_token,
                   help="length-aware TTFT SLO for preemption: slo + k * prompt tokens (0 = flat)")
    g.add_argument("--mux-sm-granularity", type=int, default=d.sm_granularity, help="SMs per partition step")
    g.add_argument("--mux-contention-table", default=d.contention_table,
                   help="contention table dir, or 'auto' (pick by model shape and GPU)")
    g.add_argument("--mux-preemption", action=argparse.BooleanOptionalAction, default=d.preemption,
                   help="non-recursive preemption of long prefills by short ones")
    g.add_argument("--mux-policy", choices=POLICIES, default=d.policy)
    g.add_argument("--mux-fixed-decode-sms", type=int, default=d.fixed_decode_sms,
                   help="decode SMs with --mux-policy fixed")
    g.add_argument("--mux-timeline", default=None, help="append every dispatch decision to this JSONL file")
    g.add_argument("--mux-timeline-max-mb", type=float, default=d.timeline_max_mb,
                   help="past this size the timeline moves to FILE.1 and a new one begins")
    g.add_argument("--mux-tbt-host-budget", action=argparse.BooleanOptionalAction, default=d.tbt_host_budget,
                   help="plan decode partitions for the TBT SLO less the loop's measured host time per iteration")
    g.add_argument("--mux-tbt-host-quantile", type=float, default=d.tbt_host_quantile,
                   help="the quantile of the loop's recent host times (per decode iteration) that the TBT budget "
                        "takes off the SLO")
    g.add_argument("--mux-defer-prefill-start", action="store_true",
                   help="form a new prefill batch (SGLang's batch formation: prefix match, KV allocation) after "
                        "the decode iteration is launched, so its host time overlaps the decode's GPU time "
                        "instead of lengthening a token's gap (not yet measured on a GPU)")
    g.add_argument("--disable-mux", action="store_true", help="plain SGLang scheduling (no multiplexing)")


def split_argv(argv: list[str]) -> tuple[MuxArgs, list[str]]:
    """Separate our flags from SGLang's, so SGLang's own parser sees only its arguments."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    add_mux_args(parser)
    ns, rest = parser.parse_known_args(argv)
    args = MuxArgs(
        tbt_slo_ms=ns.mux_tbt_slo_ms,
        ttft_slo_ms=ns.mux_ttft_slo_ms,
        ttft_ms_per_token=ns.mux_ttft_ms_per_token,
        sm_granularity=ns.mux_sm_granularity,
        contention_table=ns.mux_contention_table,
        preemption=ns.mux_preemption,
        policy=ns.mux_policy,
        fixed_decode_sms=ns.mux_fixed_decode_sms,
        timeline=ns.mux_timeline,
        timeline_max_mb=ns.mux_timeline_max_mb,
        tbt_host_budget=ns.mux_tbt_host_budget,
        tbt_host_quantile=ns.mux_tbt_host_quantile,
        defer_prefill_start=ns.mux_defer_prefill_start,
        disable_mux=ns.disable_mux,
    )
    return args, rest


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
    if getattr(server_args, "tp_size", 1) != 1 or getattr(server_args, "dp_size", 1) != 1:
        raise MuxArgError("sglang_mux supports --tp-size 1 and --dp-size 1 (one GPU); add --disable-mux for more")
    if getattr(server_args, "speculative_algorithm", None):
        raise MuxArgError("speculative decoding cannot combine with PD multiplexing; drop --speculative-algorithm")
    attention_backend(server_args)
    server_args.enable_pdmux = True
    return notes
