"""A baseline, never part of the server: SGLang's chunked prefill with a per-request cap of T
prompt tokens per step (vLLM's ``--long-prefill-token-threshold``; SGLang PR #34623 proposes
the same), so that short prompts share each step with a long one instead of waiting behind it.

    python -m bench.capped_prefill --long-prefill-token-threshold T [every sglang.launch_server argument]

(``bench.systems``: ``sglang-chunked-<B>-cap<T>``, with ``--chunked-prefill-size B
--enable-mixed-chunk``.) SGLang 0.5.16 lets one request be mid-prefill at a time, so the cap
is its ``PrefillAdder`` with two changes, both in `cap_prefill_adder`:

- a request takes at most T tokens of the step's chunk budget (the request being chunked as
  well as a new one); the rest of the budget goes on down the queue;
- while one request is mid-prefill, a waiting prompt that would need more than that is passed
  over (it keeps its place; shorter prompts behind it go first), as vLLM V0 did with one
  partial prefill allowed.

The patch is applied in SGLang's spawned scheduler process (`run_capped_scheduler_process`).
"""

from __future__ import annotations

import os
import sys

from sglang_mux import cli

ENV = "BENCH_LONG_PREFILL_TOKEN_THRESHOLD"
FLAG = "--long-prefill-token-threshold"


def cap_prefill_adder(adder_cls, threshold: int, continue_result) -> None:
    """Patch ``adder_cls`` (SGLang's PrefillAdder, or a stand-in with the same methods and
    ``rem_chunk_tokens``, ``can_run_list``, ``new_chunked_req``, ``budget_state()``) in place:
    each request's share of ``rem_chunk_tokens`` is at most ``threshold`` tokens, and with a
    request mid-prefill a waiting one that needs more than its share returns
    ``continue_result`` (SGLang's AddReqResult.CONTINUE: passed over, still queued).
    Idempotent."""
    if threshold <= 0:
        raise ValueError(f"{FLAG} must be a positive token count, got {threshold}")
    if getattr(adder_cls, "_capped_at", None) is not None:
        adder_cls._capped_at = threshold
        return
    add_chunked, add_one = adder_cls.add_chunked_req, adder_cls.add_one_req
    adder_cls._capped_at = threshold

    def capped(self, call):
        """Run ``call`` with this request's share as the chunk budget; the budget then loses
        what it took. -> (call's result, whether it took any)."""
        saved = self.rem_chunk_tokens
        share = min(saved, self._capped_at)
        n = len(self.can_run_list)
        self.rem_chunk_tokens = share
        try:
            out = call()
        finally:
            self.rem_chunk_tokens = saved - (share - self.rem_chunk_tokens)
        return out, len(self.can_run_list) > n

    def add_chunked_req(self, req):
        if self.rem_chunk_tokens is None:
            return add_chunked(self, req)
        return capped(self, lambda: add_chunked(self, req))[0]

    def add_one_req(self, req, has_chunked_req, truncation_align_size):
        if self.rem_chunk_tokens is None:
            return add_one(self, req, has_chunked_req, truncation_align_size)
        need = len(req.full_untruncated_fill_ids) - len(req.prefix_indices)
        if need > min(self.rem_chunk_tokens, self._capped_at) and (
                has_chunked_req or self.new_chunked_req is not None):
            return continue_result  # one request mid-prefill at a time in SGLang 0.5.16
        res, took = capped(self, lambda: add_one(self, req, has_chunked_req, truncation_align_size))
        # SGLang's own verdict was on the share; once it took its tokens, the step's budget decides
        return self.budget_state() if took else res

    adder_cls.add_chunked_req = add_chunked_req
    adder_cls.add_one_req = add_one_req


def run_capped_scheduler_process(*args, **kwargs):
    """SGLang's run_scheduler_process with PrefillAdder capped at $BENCH_LONG_PREFILL_TOKEN_THRESHOLD."""
    from sglang.srt.managers import schedule_policy
    from sglang.srt.managers.scheduler import run_scheduler_process

    from sglang_mux.patches import check_sglang_version

    check_sglang_version()
    cap_prefill_adder(schedule_policy.PrefillAdder, int(os.environ[ENV]), schedule_policy.AddReqResult.CONTINUE)
    return run_scheduler_process(*args, **kwargs)


def split_threshold(argv: list[str]) -> tuple[int, list[str]]:
    """(T, the other arguments); raises cli.UsageError saying what to give when T is missing or
    bad, or when there is no chunked prefill for it to cap."""
    rest, t = [], None
    it = iter(argv)
    for a in it:
        if a == FLAG or a.startswith(FLAG + "="):
            t = a.partition("=")[2] if "=" in a else next(it, None)
        else:
            rest.append(a)
    try:
        value = int(t)
        if value <= 0:
            raise ValueError
    except (TypeError, ValueError):
        raise cli.UsageError(f"{FLAG}: give a positive token count (e.g. {FLAG} 512), got {t!r}") from None
    if "--chunked-prefill-size" not in {a.split("=", 1)[0] for a in rest}:
        raise cli.UsageError(f"{FLAG} caps chunked prefill: give --chunked-prefill-size B too (B > {value})")
    return value, rest


def _run(argv: list[str] | None = None) -> None:
    threshold, rest = split_threshold(sys.argv[1:] if argv is None else list(argv))
    from sglang.srt.entrypoints.http_server import launch_server
    from sglang.srt.server_args import prepare_server_args
    from sglang.srt.utils import kill_process_tree

    os.environ[ENV] = str(threshold)  # read by the spawned scheduler process
    server_args = prepare_server_args(rest)
    try:
        launch_server(server_args, run_scheduler_process_func=run_capped_scheduler_process)
    finally:
        kill_process_tree(os.getpid(), include_parent=False)


def main(argv: list[str] | None = None) -> None:
    """Bad arguments: one ``error:`` line, exit status 2."""
    cli.run(_run, argv)


if __name__ == "__main__":
    main()
