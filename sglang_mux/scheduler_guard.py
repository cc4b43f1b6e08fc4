"""The scheduler's last line: a request whose token ids fall outside the vocabulary fails alone.

The HTTP front door (`http_guard`) refuses such requests, but a request can reach the scheduler
by other ways (SGLang's Python engine, a tokenizer worker of another build). An id outside
``[0, vocab)`` reaches the embedding lookup, and the device-side assert it trips ends the CUDA
context: the scheduler, and every request in flight, with it. `guarded` wraps SGLang's
``Scheduler.handle_generate_request`` so that such a request is queued with one harmless token and
finished at once with SGLang's own abort (HTTP 400 and the message), as SGLang aborts a request
whose prompt is too long; the others go on. Plain Python: patches.py applies it.
"""

from __future__ import annotations

from array import array
from typing import Callable, Sequence

import numpy as np


def bad_token_id(ids: Sequence[int] | None, vocab_size: int) -> str | None:
    """What is wrong with ``ids`` for a model of ``vocab_size`` tokens, or None (also for no ids)."""
    if ids is None or len(ids) == 0:
        return None
    # numpy's min and max over SGLang's int64 array: ~0.1 ms for a 128K-token prompt on the loop's thread
    a = np.frombuffer(ids, dtype=np.int64) if isinstance(ids, array) and ids.typecode == "q" else np.asarray(ids)
    if a.min() >= 0 and a.max() < vocab_size:
        return None
    i = int(np.flatnonzero((a < 0) | (a >= vocab_size))[0])
    t = ids[i]
    return (f"input_ids[{i}] is {t}: token ids must be in [0, {vocab_size - 1}] for this model's "
            f"vocabulary of {vocab_size}")


def guarded(handle: Callable) -> Callable:
    """``Scheduler.handle_generate_request`` (``handle``) that aborts a request of out-of-vocabulary
    ids instead of letting it reach the model."""

    def handle_generate_request(self, recv_req):
        problem = None if recv_req.input_embeds is not None else \
            bad_token_id(recv_req.input_ids, self.model_config.vocab_size)
        if problem is None:
            return handle(self, recv_req)
        recv_req.input_ids = array("q", [0])  # what is queued can no longer fault the embedding
        result = handle(self, recv_req)
        for req in reversed(self.waiting_queue):
            if req.rid == recv_req.rid:
                req.set_finish_with_abort(problem)
                break
        return result

    handle_generate_request.__wrapped__ = handle
    return handle_generate_request
