"""bench.analysis.whatif_fused_tail: the served draws it replays, read from the stored timelines."""
import numpy as np
import pytest

from bench.analysis import whatif_fused_tail as W


def test_the_served_draws_are_the_timelines_fused_overruns_and_batch_starts():
    timeline = W.CELLS["capped conversation (<= 8000)"][0]
    o, st = W.overruns(timeline), W.start_hosts(timeline)
    # as bench.analysis.tbt_tail reports them for this timeline: 1,688 fused, P50 -0.8, P99 5.2 ms
    assert len(o) == 1688 and np.median(o) == pytest.approx(-0.8, abs=0.05)
    assert np.percentile(o, 99) == pytest.approx(5.2, abs=0.05)
    assert len(st) == 92 and min(st) >= 0.0 and np.median(st) == pytest.approx(8.1, abs=0.05)
