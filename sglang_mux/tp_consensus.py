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

SGLang 0.5.16 creates the TP group (``Scheduler.tp_group``) after ``init_pdmux``, where the loop is
built: the loop starts with `PendingTp` (its role from ``Scheduler.ps``) and joins the group when
its event loop starts (`TpConsensus.of`): built from a missing group, every rank would lead itself
and the ranks' plans would part (the server hangs).
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence


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


def tp_size(sched: Any) -> int:
    """The Scheduler's TP size: ``ps.tp_size`` (set before ``init_pdmux``), else its server args'."""
    n = getattr(getattr(sched, "ps", None), "tp_size", None)
    if n is None:
        n = getattr(getattr(sched, "server_args", None), "tp_size", 1)
    return int(n or 1)


def before_group(sched: Any) -> Consensus:
    """The consensus while the Scheduler is being built: `SingleRank` at TP 1, else `PendingTp`
    (TP rank 0 will lead)."""
    if tp_size(sched) <= 1:
        return SingleRank()
    return PendingTp(leader=int(getattr(getattr(sched, "ps", None), "tp_rank", 0) or 0) == 0)


class PendingTp:
    """TP > 1 before SGLang's TP group exists: the rank's role is known, nothing can be shared yet."""

    def __init__(self, leader: bool):
        self.leader = leader

    def share(self, decision: Any) -> Any:
        raise RuntimeError("sglang_mux: a TP decision before the TP group was joined (MuxLoop.run joins it first)")

    def min(self, value: int) -> int:
        raise RuntimeError("sglang_mux: a TP minimum before the TP group was joined (MuxLoop.run joins it first)")


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

    def __init__(self, group: Any, rank: int, src: int, broadcast: Callable, all_min: Callable[[int, Any], int],
                 ranks: Sequence[int] = ()):
        self.group, self.rank, self.src = group, rank, src
        self.ranks = tuple(ranks)  # the group's global ranks, in TP order (for naming a lost peer)
        self.leader = rank == src
        self._broadcast, self._all_min = broadcast, all_min

    @classmethod
    def of(cls, sched: Any) -> Consensus:
        """The Scheduler's TP group (``tp_group``: ``world_size``, ``rank``, ``ranks``,
        ``cpu_group``); SingleRank at TP 1. Raises at TP > 1 while the Scheduler has no group of
        that size: each rank would decide alone."""
        n = tp_size(sched)
        if n <= 1:
            return SingleRank()
        tp = getattr(sched, "tp_group", None)
        if tp is None or getattr(tp, "world_size", None) != n:
            raise RuntimeError(f"sglang_mux: TP size {n} but the Scheduler has no TP group of {n} ranks yet "
                               f"({tp!r}); join it once SGLang has created it (MuxLoop.run)")
        import torch
        import torch.distributed as dist
        from sglang.srt.utils.common import broadcast_pyobj

        def all_min(value: int, group: Any) -> int:
            t = torch.tensor([int(value)], dtype=torch.long)
            dist.all_reduce(t, op=dist.ReduceOp.MIN, group=group)
            return int(t.item())

        return cls(tp.cpu_group, tp.rank, tp.ranks[0], broadcast_pyobj, all_min, tp.ranks)

    def share(self, decision: Any) -> Any:
        try:
            got = self._broadcast([decision] if self.leader else [], self.rank, self.group, src=self.src)
        except RuntimeError as e:  # gloo: a peer's socket closed (the rank died); name it for the log
            raise self.lost_peer(e, "sharing a plan") from e
        if not got:
            raise RuntimeError(f"sglang_mux: TP rank {self.rank} received no decision from rank {self.src}")
        return got[0]

    def min(self, value: int) -> int:
        return self._all_min(value, self.group)

    def lost_peer(self, e: BaseException, doing: str) -> RuntimeError:
        """The error for a collective over the TP group that ``e`` ended while ``doing`` (e.g.
        "receiving requests": SGLang broadcasts them too), naming the ranks that may have died;
        SGLang's launcher names no rank when it takes the server down."""
        return RuntimeError(f"sglang_mux: {self._who()} lost the TP group while {doing}: {self._peers()} ended "
                            f"({e}); the server stops")

    def _who(self) -> str:
        return f"TP rank {self.ranks.index(self.rank)}" if self.rank in self.ranks else f"rank {self.rank}"

    def _peers(self) -> str:
        """The other TP ranks (the dead one among them; with two ranks, it)."""
        others = [i for i, r in enumerate(self.ranks) if r != self.rank]
        if not others:
            return "another rank"
        return f"TP rank {others[0]}" if len(others) == 1 else f"one of TP ranks {others}"
