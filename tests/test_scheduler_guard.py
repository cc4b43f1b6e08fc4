"""The scheduler's last line against out-of-vocabulary token ids (sglang_mux.scheduler_guard), on
stand-ins for SGLang's Scheduler and request (no GPU, no SGLang)."""

from array import array
from types import SimpleNamespace as NS

import pytest

from sglang_mux.patches import _UvicornGuarded
from sglang_mux.scheduler_guard import bad_token_id, guarded


@pytest.mark.parametrize("ids, vocab, says", [
    ([1, -7, 3], 100, "input_ids[1] is -7: token ids must be in [0, 99]"),
    (array("q", [5, 99, 100]), 100, "input_ids[2] is 100: token ids must be in [0, 99]"),
    ([10 ** 9], 128256, "input_ids[0] is 1000000000"),
])
def test_an_id_outside_the_vocabulary_is_named(ids, vocab, says):
    assert says in bad_token_id(ids, vocab)


@pytest.mark.parametrize("ids", [None, [], array("q"), [0, 99], array("q", range(100))])
def test_ids_inside_the_vocabulary_pass(ids):
    assert bad_token_id(ids, 100) is None


class Req:
    def __init__(self, rid, ids):
        self.rid, self.origin_input_ids, self.aborted = rid, ids, None

    def set_finish_with_abort(self, msg):  # SGLang's: one harmless token, finished at once with a 400
        self.origin_input_ids, self.aborted = array("q", [0]), msg


def handle(sched, recv):
    """SGLang's handle_generate_request, reduced to what the guard relies on: it queues the request."""
    sched.handled.append(list(recv.input_ids))
    sched.waiting_queue.append(Req(recv.rid, recv.input_ids))


def sched():
    return NS(model_config=NS(vocab_size=100), waiting_queue=[Req("earlier", array("q", [1]))], handled=[])


def test_a_request_of_bad_ids_is_queued_harmless_and_aborted_alone():
    s, h = sched(), guarded(handle)
    h(s, NS(rid="bad", input_ids=array("q", [1, 2, 100]), input_embeds=None))
    h(s, NS(rid="good", input_ids=array("q", [1, 2, 3]), input_embeds=None))
    assert s.handled == [[0], [1, 2, 3]]  # what the model would see: never the bad id
    earlier, bad, good = s.waiting_queue
    assert bad.aborted.startswith("input_ids[2] is 100") and list(bad.origin_input_ids) == [0]
    assert earlier.aborted is None and good.aborted is None and list(good.origin_input_ids) == [1, 2, 3]


def test_embeddings_and_a_request_the_scheduler_did_not_queue_are_left_as_they_are():
    s, h = sched(), guarded(handle)
    h(s, NS(rid="e", input_ids=array("q", [1, 1]), input_embeds=[[0.0], [0.0]]))
    assert s.waiting_queue[-1].aborted is None
    refused = guarded(lambda sc, r: sc.handled.append(list(r.input_ids)))  # e.g. SGLang's queue limit refused it
    refused(s, NS(rid="bad", input_ids=[-1], input_embeds=None))
    assert s.handled[-1] == [0] and all(r.aborted is None for r in s.waiting_queue)


def test_the_guard_keeps_the_original_for_idempotent_patching():
    assert guarded(handle).__wrapped__ is handle


def test_uvicorn_told_sglangs_app_by_name_imports_the_guarded_one():
    calls = []
    u = _UvicornGuarded(NS(run=lambda app, **kw: calls.append((app, kw)), Config="the real Config"))
    u.run("sglang.srt.entrypoints.http_server:app", workers=4)
    u.run(obj := object(), port=1)
    assert calls == [("sglang_mux.http_guard:app", {"workers": 4}), (obj, {"port": 1})]
    assert u.Config == "the real Config"
