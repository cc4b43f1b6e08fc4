"""The one place where sglang_mux changes SGLang 0.5.16, checked against the pinned version.

SGLang 0.5.16 already has the PD-multiplexing plumbing (SPLIT_PREFILL forward mode, per-stream
decode attention backends, decode CUDA graphs captured per stream group); its `--enable-pdmux`
demo crashes at start (`'Scheduler' object has no attribute 'gpu_id'`) and picks partitions by
batch size. We replace exactly two Scheduler methods:

- `init_pdmux` -> `scheduler_loop.init_mux`: builds the loop (`MuxLoop.build`): stream groups
  from ONE green-context split per configuration (green_ctx.py), written into
  `sglang.srt.multiplex.pdmux_context` so SGLang's graph runner captures one decode graph set per
  partition; also the policy, estimator and metrics.
- `event_loop_pdmux` -> `scheduler_loop.mux_event_loop`: runs it (`MuxLoop.run`).

Patches are applied inside the scheduler subprocess (spawned, so a patch in the parent would not
reach it): `run_mux_scheduler_process` is passed to SGLang's `launch_server` as its
`run_scheduler_process_func` hook.
"""

from __future__ import annotations

import logging

from sglang_mux import SGLANG_VERSION

logger = logging.getLogger(__name__)
_applied = False


class SGLangVersionError(RuntimeError):
    pass


def check_sglang_version() -> None:
    import sglang

    have = getattr(sglang, "__version__", "unknown")
    if have != SGLANG_VERSION:
        raise SGLangVersionError(
            f"sglang_mux patches SGLang {SGLANG_VERSION} and found {have}: "
            f"pip install 'sglang=={SGLANG_VERSION}' (the extra: pip install '.[serve]')"
        )


def apply_patches() -> None:
    """Idempotent. Fails loudly if a patched attribute moved (a different SGLang)."""
    global _applied
    if _applied:
        return
    check_sglang_version()
    from sglang.srt.managers.scheduler import Scheduler
    from sglang.srt.multiplex import multiplexing_mixin, pdmux_context

    from sglang_mux import scheduler_loop

    for owner, name in ((Scheduler, "init_pdmux"), (Scheduler, "event_loop_pdmux"),
                        (pdmux_context, "STREAM_GROUPS"), (pdmux_context, "SM_COUNTS"),
                        (multiplexing_mixin, "SchedulerMultiplexMixin")):
        if not hasattr(owner, name):
            raise SGLangVersionError(f"SGLang {SGLANG_VERSION} layout changed: {owner}.{name} is missing")
    Scheduler.init_pdmux = scheduler_loop.init_mux
    Scheduler.event_loop_pdmux = scheduler_loop.mux_event_loop
    _applied = True
    logger.info("sglang_mux: patched Scheduler.init_pdmux and Scheduler.event_loop_pdmux")


def run_mux_scheduler_process(*args, **kwargs):
    """Drop-in for sglang's run_scheduler_process: patch, then run the original."""
    apply_patches()
    from sglang.srt.managers.scheduler import run_scheduler_process

    return run_scheduler_process(*args, **kwargs)
