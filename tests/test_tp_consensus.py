from types import SimpleNamespace as NS

import pytest

from sglang_mux.tp_consensus import PendingTp, SingleRank, TpConsensus, agree, before_group


class Wire:
    """SGLang's broadcast_pyobj as seen by one rank: the leader's message goes on the wire, a
    follower reads it off (the call's arguments are recorded)."""

    def __init__(self, message=None):
        self.calls, self.message = [], message

    def __call__(self, data, rank, group, src):
        self.calls.append((list(data), rank, group, src))
        return list(data) if rank == src else ([self.message] if self.message is not None else [])


def test_the_leader_broadcasts_its_decision_and_a_follower_takes_it():
    wire = Wire()
    leader = TpConsensus("cpu-group", rank=4, src=4, broadcast=wire, all_min=lambda v, g: v)
    assert leader.leader and leader.share("plan A") == "plan A"
    assert wire.calls == [(["plan A"], 4, "cpu-group", 4)]
    wire = Wire(message="plan A")
    follower = TpConsensus("cpu-group", rank=5, src=4, broadcast=wire, all_min=lambda v, g: v)
    assert not follower.leader and follower.share(None) == "plan A"
    assert wire.calls == [([], 5, "cpu-group", 4)]


def test_a_follower_without_a_message_says_which_rank_and_from_whom():
    follower = TpConsensus("g", rank=1, src=0, broadcast=Wire(), all_min=lambda v, g: v)
    with pytest.raises(RuntimeError, match="TP rank 1 received no decision from rank 0"):
        follower.share(None)


def test_min_is_over_the_group():
    seen = []
    c = TpConsensus("g", rank=0, src=0, broadcast=Wire(), all_min=lambda v, g: seen.append((v, g)) or 7)
    assert c.min(9) == 7 and seen == [(9, "g")]


def test_one_rank_decides_alone():
    for sched in (NS(), NS(tp_group=None), NS(tp_group=NS(world_size=1)), NS(ps=NS(tp_size=1)),
                  NS(server_args=NS(tp_size=1), tp_group=None)):
        c = TpConsensus.of(sched)
        assert isinstance(c, SingleRank) and c.leader and c.share("x") == "x" and c.min(3) == 3


def test_ranks_must_agree_on_what_each_builds_alone():
    parts = [(132, 0), (64, 68)]
    agree(TpConsensus("g", rank=0, src=0, broadcast=Wire(), all_min=min), parts, "partitions")
    agree(TpConsensus("g", rank=1, src=0, broadcast=Wire(message=list(parts)), all_min=min), parts, "partitions")
    other = TpConsensus("g", rank=1, src=0, broadcast=Wire(message=[(132, 0), (56, 76)]), all_min=min)
    with pytest.raises(RuntimeError, match=r"disagree on partitions: the leader has \[\(132, 0\), \(56, 76\)\]"):
        agree(other, parts, "partitions")


def test_at_tp_the_group_must_exist_before_anything_is_shared():
    """SGLang creates the TP group after the loop is built: until then a rank knows only its role,
    and joining a group that is missing or of another size fails loudly instead of leading alone."""
    leader, follower = before_group(NS(ps=NS(tp_size=2, tp_rank=0))), before_group(NS(ps=NS(tp_size=2, tp_rank=1)))
    assert isinstance(leader, PendingTp) and leader.leader and not follower.leader
    with pytest.raises(RuntimeError, match="before the TP group was joined"):
        leader.share("plan")
    with pytest.raises(RuntimeError, match="before the TP group was joined"):
        follower.min(3)
    assert isinstance(before_group(NS(ps=NS(tp_size=1, tp_rank=0))), SingleRank)
    assert before_group(NS(server_args=NS(tp_size=2))).leader  # no ps: rank 0
    for sched in (NS(ps=NS(tp_size=2)), NS(ps=NS(tp_size=2), tp_group=NS(world_size=4)),
                  NS(server_args=NS(tp_size=2), tp_group=None)):
        with pytest.raises(RuntimeError, match="TP size 2 but the Scheduler has no TP group of 2 ranks"):
            TpConsensus.of(sched)


def test_a_lost_peer_is_named_in_the_error():
    """A rank that died closes its gloo socket: the survivor's broadcast raises, and the error says
    which TP rank ended (with two ranks, the other one)."""
    def dead(data, rank, group, src):
        raise RuntimeError("[gloo/transport/tcp/pair.cc:538] Read error: Connection reset by peer")

    leader = TpConsensus("g", rank=8, src=8, broadcast=dead, all_min=min, ranks=(8, 9))
    with pytest.raises(RuntimeError, match=r"TP rank 0 lost the TP group while sharing a plan: TP rank 1 ended "
                                           r"\(.*Connection reset by peer\); the server stops"):
        leader.share("plan")
    follower = TpConsensus("g", rank=2, src=0, broadcast=dead, all_min=min, ranks=(0, 1, 2, 3))
    with pytest.raises(RuntimeError, match=r"TP rank 2 lost .*: one of TP ranks \[0, 1, 3\] ended"):
        follower.share(None)
