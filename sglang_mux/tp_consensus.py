"""One decision for every tensor-parallel rank: the first rank of the TP group decides, the others
follow.

At TP > 1 every rank runs its own Scheduler and MuxLoop, and every rank must launch the same
layers, partitions and batches in the same order, or their collectives wait on each other for
good. SGLang hands every rank the same requests (its request receiver broadcasts them), but the
loop's choices also read the clock and CUDA events (which prefill chunks have finished, how many
are still queued) and the estimator's online state, which differ from rank to rank. So the leader
makes those choices and broadcasts them once per iteration (`MuxLoop.plan`: a `Decision`) over
SGLang's CPU (gloo) group; the followers apply them, waiting on their own events where theirs are
behind. Startup values that must agree (the prompt-length limit) take the minimum over ranks.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol


class Consensus(Protocol):
    leader: bool

    def share(self, decision: Any) -> Any:
        """The leader's ``decision`` on every rank (a follower passes None)."""

    def min(self, value: int) -> int:
        """The smallest ``value`` over the ranks."""


def agree(consensus: Consensus, value: Any, what: str) -> None:
    """Every rank holds the leader's ``value`` (e.g. the partition list: each rank builds its own from
    its GPU, and ranks that differ would launch layers on different SMs); raises on the rank that
    does not, naming both."""
    theirs = consensus.share(value if consensus.leader else None)
    if theirs != value:
        raise RuntimeError(f"sglang_mux: TP ranks disagree on {what}: the leader has {theirs}, this rank {value}. "
                           "Serve on GPUs of one model, or with --disable-mux")


class SingleRank:
    """TP = 1: this rank decides alone."""

    leader = True

    def share(self, decision: Any) -> Any:
        return decision

    def min(self, value: int) -> int:
        return value


class TpConsensus:
    """TP > 1 over SGLang's TP CPU group. ``broadcast(data, rank, group, src)`` is SGLang's
    ``broadcast_pyobj``; ``all_min(value, group)`` an all-reduce of one integer with MIN."""

    def __init__(self, group: Any, rank: int, src: int, broadcast: Callable, all_min: Callable[[int, Any], int]):
        self.group, self.rank, self.src = group, rank, src
        self.leader = rank == src
        self._broadcast, self._all_min = broadcast, all_min

    @classmethod
    def of(cls, sched: Any) -> Consensus:
        """The Scheduler's TP group (``tp_group``: ``world_size``, ``rank``, ``ranks``,
        ``cpu_group``); SingleRank when it has one rank."""
        tp = getattr(sched, "tp_group", None)
        if tp is None or getattr(tp, "world_size", 1) <= 1:
            return SingleRank()
        import torch
        import torch.distributed as dist
        from sglang.srt.utils.common import broadcast_pyobj

        def all_min(value: int, group: Any) -> int:
            t = torch.tensor([int(value)], dtype=torch.long)
            dist.all_reduce(t, op=dist.ReduceOp.MIN, group=group)
            return int(t.item())

        return cls(tp.cpu_group, tp.rank, tp.ranks[0], broadcast_pyobj, all_min)

    def share(self, decision: Any) -> Any:
        got = self._broadcast([decision] if self.leader else [], self.rank, self.group, src=self.src)
        if not got:
            raise RuntimeError(f"sglang_mux: TP rank {self.rank} received no decision from rank {self.src}")
        return got[0]

    def min(self, value: int) -> int:
        return self._all_min(value, self.group)
