"""The scheduler loop's host-time budgets: each token's gap, from one result that gave decoding
requests a token to the next, booked into `HostBudgets` by the kind of iteration that gave it."""

from __future__ import annotations

import time

from sglang_mux.mux_args import MuxArgs
from sglang_mux.policy import HostBudgets, Plan


class TokenGaps:
    """``budgets``: the server's (`for_server`); ``last_done``: perf_counter after the last result
    that gave decoding requests a token (None: the gap is broken, the next result books nothing).
    Not thread-safe: the scheduler's thread only."""

    def __init__(self, budgets: HostBudgets):
        self.budgets = budgets
        self.last_done: float | None = None

    @classmethod
    def for_server(cls, args: MuxArgs) -> "TokenGaps":
        """The four budgets with ``--mux-tbt-host-budget`` (the streak starts' own with
        ``--mux-fused-start-budget``); none without it (the policy is told 0 ms)."""
        if not args.tbt_host_budget:
            return cls(HostBudgets())
        return cls(HostBudgets.measured(args.slo.stall_ms, quantile=args.tbt_host_quantile,
                                        fused_quantile=args.fused_host_quantile,
                                        fused_start=args.fused_start_budget))

    def book(self, plan: Plan, done: float, gpu_ms: float, *, fused: bool = False,
             starts_streak: bool = False) -> None:
        """An iteration of ``gpu_ms`` GPU time whose result came at ``done`` (perf_counter): its
        wall time since the last such result is booked by its kind: a fused one (``fused``, the
        first of a streak: ``starts_streak``) against its planned price, a decode one against its
        GPU time (and, where its plan started a layer-wise batch, to the starts' own too)."""
        if self.last_done is not None:
            wall = (done - self.last_done) * 1e3
            if fused:
                self.budgets.book_fused(wall, planned_ms=plan.t_decode_worst_ms, gpu_ms=gpu_ms,
                                        starts_streak=starts_streak)
            else:
                self.budgets.book_decode(wall, gpu_ms, starts_batch=bool(plan.new_prefill_rids))
        self.last_done = done

    def mark(self, done: float | None = None) -> None:
        """A result whose gap is not booked (a decode whose host work overlapped the GPU's): the
        next gap starts here."""
        self.last_done = time.perf_counter() if done is None else done

    def break_gap(self) -> None:
        """No decoding request had a token this iteration: the next gap is not a token's."""
        self.last_done = None
