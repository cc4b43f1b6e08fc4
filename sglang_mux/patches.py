"""The one place where sglang_mux changes SGLang 0.5.16, checked against the pinned version.

SGLang 0.5.16 already has the PD-multiplexing plumbing (SPLIT_PREFILL forward mode, per-stream
decode attention backends, decode CUDA graphs captured per stream group); its `--enable-pdmux`
demo crashes at start (`'Scheduler' object has no attribute 'gpu_id'`) and picks partitions by
batch size. With multiplexing on, we replace exactly two Scheduler methods:

- `init_pdmux` -> `scheduler_loop.init_mux`: builds the loop (`MuxLoop.build`): stream groups
  from ONE green-context split per configuration (green_ctx.py), written into
  `sglang.srt.multiplex.pdmux_context` so SGLang's graph runner captures one decode graph set per
  partition; also the policy, estimator and metrics.
- `event_loop_pdmux` -> `scheduler_loop.mux_event_loop`: runs it (`MuxLoop.run`).

With it on or off (``--disable-mux``), hostile input is kept away from the engine:

- `guard_http`: SGLang's FastAPI app gets `http_guard.RequestGuard`, in this process and (by the
  app's import name, which uvicorn's workers import) in each tokenizer worker;
- `guard_scheduler`: ``Scheduler.handle_generate_request`` aborts a request of out-of-vocabulary
  token ids alone (`scheduler_guard`), instead of letting it end the CUDA context.

Scheduler patches are applied inside the scheduler subprocess (spawned, so a patch in the parent
would not reach it): `run_mux_scheduler_process` (or, multiplexing off,
`run_guarded_scheduler_process`) is passed to SGLang's `launch_server` as its
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


def _require(owner, name: str) -> None:
    if not hasattr(owner, name):
        raise SGLangVersionError(f"SGLang {SGLANG_VERSION} layout changed: {owner}.{name} is missing")


def guard_http() -> None:
    """SGLang's app guarded (`http_guard`), here and in uvicorn's worker processes. Idempotent."""
    check_sglang_version()
    from sglang.srt.entrypoints import http_server

    from sglang_mux import http_guard

    for name in ("app", "uvicorn", "get_global_state"):
        _require(http_server, name)
    http_guard.install(http_server.app)
    if not isinstance(http_server.uvicorn, _UvicornGuarded):
        http_server.uvicorn = _UvicornGuarded(http_server.uvicorn)


class _UvicornGuarded:
    """uvicorn as SGLang's http_server calls it, but told to import SGLang's app by name (its
    multi-worker mode) it imports the guarded one."""

    def __init__(self, real):
        self._real = real

    def run(self, app, *args, **kwargs):
        from sglang_mux.http_guard import GUARDED_APP, SGLANG_APP

        return self._real.run(GUARDED_APP if app == SGLANG_APP else app, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._real, name)


def guard_scheduler() -> None:
    """``Scheduler.handle_generate_request`` aborts a request of out-of-vocabulary ids alone."""
    from sglang.srt.managers.scheduler import Scheduler

    from sglang_mux.scheduler_guard import guarded

    _require(Scheduler, "handle_generate_request")
    if not hasattr(Scheduler.handle_generate_request, "__wrapped__"):
        Scheduler.handle_generate_request = guarded(Scheduler.handle_generate_request)


def run_guarded_scheduler_process(*args, **kwargs):
    """SGLang's run_scheduler_process with the scheduler guard (multiplexing off)."""
    check_sglang_version()
    guard_scheduler()
    from sglang.srt.managers.scheduler import run_scheduler_process

    return run_scheduler_process(*args, **kwargs)


def apply_patches() -> None:
    """The mux's patches and the scheduler guard. Idempotent. Fails loudly if a patched attribute
    moved (a different SGLang)."""
    global _applied
    if _applied:
        return
    check_sglang_version()
    guard_scheduler()
    from sglang.srt.managers.scheduler import Scheduler
    from sglang.srt.multiplex import multiplexing_mixin, pdmux_context

    from sglang_mux import scheduler_loop

    for owner, name in ((Scheduler, "init_pdmux"), (Scheduler, "event_loop_pdmux"),
                        (pdmux_context, "STREAM_GROUPS"), (pdmux_context, "SM_COUNTS"),
                        (multiplexing_mixin, "SchedulerMultiplexMixin")):
        _require(owner, name)
    Scheduler.init_pdmux = scheduler_loop.init_mux
    Scheduler.event_loop_pdmux = scheduler_loop.mux_event_loop
    _applied = True
    logger.info("sglang_mux: patched Scheduler.init_pdmux and Scheduler.event_loop_pdmux")


def run_mux_scheduler_process(*args, **kwargs):
    """Drop-in for sglang's run_scheduler_process: patch, then run the original."""
    apply_patches()
    from sglang.srt.managers.scheduler import run_scheduler_process

    return run_scheduler_process(*args, **kwargs)
