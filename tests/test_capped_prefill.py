"""The capped chunked-prefill baseline (bench.capped_prefill) on a stand-in of SGLang 0.5.16's
PrefillAdder and the queue walk of its get_new_batch_prefill."""

from __future__ import annotations

from enum import Enum, auto

import pytest

from bench import capped_prefill, systems
from sglang_mux.cli import UsageError


class Result(Enum):
    CONTINUE = auto()
    NO_TOKEN = auto()
    OTHER = auto()


class Req:
    def __init__(self, rid: str, n: int, done: int = 0):
        self.rid, self.full_untruncated_fill_ids, self.prefix_indices = rid, [0] * n, [0] * done
        self.took = 0


class Adder:
    """PrefillAdder's chunk-budget arithmetic, as in SGLang 0.5.16 (page size 1, memory ample)."""

    def __init__(self, budget: int):
        self.rem_chunk_tokens, self.can_run_list, self.new_chunked_req = budget, [], None

    def budget_state(self):
        return Result.OTHER if self.rem_chunk_tokens <= 0 else Result.CONTINUE

    def add_chunked_req(self, req):
        need = len(req.full_untruncated_fill_ids) - len(req.prefix_indices)
        req.took = min(need, self.rem_chunk_tokens)
        self.can_run_list.append(req)
        self.rem_chunk_tokens -= req.took
        return req if need > req.took else None

    def add_one_req(self, req, has_chunked_req, truncation_align_size):
        need = len(req.full_untruncated_fill_ids) - len(req.prefix_indices)
        req.took = min(need, self.rem_chunk_tokens)
        if req.took <= 0:
            return Result.OTHER
        self.can_run_list.append(req)
        if need > req.took:
            self.new_chunked_req = req
        self.rem_chunk_tokens -= req.took
        return self.budget_state()


class CappedAdder(Adder):
    pass


capped_prefill.cap_prefill_adder(CappedAdder, 512, Result.CONTINUE)


def step(adder_cls, budget: int, chunked: Req | None, waiting: list[Req]):
    """get_new_batch_prefill's walk: the chunked request first, then the queue until a stop.
    -> ({rid: tokens taken}, the request mid-prefill after the step)."""
    a = adder_cls(budget)
    if chunked is not None:
        chunked = a.add_chunked_req(chunked)
    for r in waiting:
        if a.add_one_req(r, has_chunked_req=chunked is not None, truncation_align_size=None) != Result.CONTINUE:
            break
    if a.new_chunked_req is not None:
        assert chunked is None  # SGLang 0.5.16 asserts this: one request mid-prefill at a time
        chunked = a.new_chunked_req
    return {r.rid: r.took for r in a.can_run_list}, (chunked.rid if chunked else None)


def test_uncapped_a_long_prompt_takes_the_whole_chunk():
    taken, mid = step(Adder, 2048, Req("long", 50_000, done=4096), [Req("s1", 100), Req("s2", 300)])
    assert taken == {"long": 2048} and mid == "long"


def test_capped_short_prompts_share_the_step_and_a_second_long_one_waits():
    waiting = [Req("s1", 100), Req("s2", 300), Req("long2", 10_000), Req("s3", 200), Req("s4", 900)]
    taken, mid = step(CappedAdder, 2048, Req("long", 50_000, done=4096), waiting)
    # the long one 512; s1, s2, s3 whole; long2 (> 512) and s4 (> 512) passed over, still queued
    assert taken == {"long": 512, "s1": 100, "s2": 300, "s3": 200} and mid == "long"


def test_capped_a_new_long_prompt_starts_at_the_cap_and_the_budget_goes_on():
    taken, mid = step(CappedAdder, 2048, None, [Req("long", 10_000), Req("s1", 100), Req("long2", 9_000)])
    assert taken == {"long": 512, "s1": 100} and mid == "long"


def test_capped_the_last_chunk_frees_the_way_for_the_next_long_prompt():
    taken, mid = step(CappedAdder, 2048, Req("long", 4_300, done=4096), [Req("long2", 9_000)])
    assert taken == {"long": 204, "long2": 512} and mid == "long2"


def test_capped_the_step_budget_still_bounds_the_batch():
    taken, _ = step(CappedAdder, 1024, None, [Req(f"s{i}", 400) for i in range(4)])
    assert taken == {"s0": 400, "s1": 400, "s2": 224}  # the third is cut to what the step has left


def test_a_bad_threshold_is_refused_with_what_to_give():
    with pytest.raises(ValueError, match="positive token count"):
        capped_prefill.cap_prefill_adder(type("A", (Adder,), {}), 0, Result.CONTINUE)
    with pytest.raises(UsageError, match="give a positive token count"):
        capped_prefill.split_threshold(["--chunked-prefill-size", "2048", "--long-prefill-token-threshold", "x"])
    with pytest.raises(UsageError, match="give --chunked-prefill-size"):
        capped_prefill.split_threshold(["--long-prefill-token-threshold=512"])
    assert capped_prefill.split_threshold(["--chunked-prefill-size", "2048", "--long-prefill-token-threshold=512"]) \
        == (512, ["--chunked-prefill-size", "2048"])


def test_the_system_name_runs_the_capped_launcher():
    cmd = systems.server_command("sglang-chunked-2048-cap512", "/m", 30000, python="py")
    assert systems.kind("sglang-chunked-2048-cap512") == "sglang"
    assert cmd[:3] == ["py", "-m", "bench.capped_prefill"]
    assert cmd[-5:] == ["--chunked-prefill-size", "2048", "--enable-mixed-chunk",
                        "--long-prefill-token-threshold", "512"]
