import pytest

from sglang_mux.prefill_wall import MAX_FACTOR, PrefillWall


def test_one_until_enough_batches_then_wall_over_estimate_summed():
    w = PrefillWall(window=3, min_batches=2)
    assert w.factor == 1.0
    assert w.observe(10.0, 30.0) == 3.0
    assert w.factor == 1.0  # one batch is not a rate
    w.observe(90.0, 100.0)
    assert w.factor == pytest.approx(130.0 / 100.0)  # long batches weigh as they cost, not 2.06
    w.observe(100.0, 100.0)
    w.observe(100.0, 100.0)  # the window drops the first
    assert w.factor == pytest.approx(300.0 / 290.0)


def test_bounds_and_bad_input():
    w = PrefillWall(min_batches=1)
    w.observe(10.0, 5.0)
    assert w.factor == 1.0  # never faster than the GPU estimate
    w.observe(10.0, 500.0)
    assert w.factor == MAX_FACTOR
    assert w.observe(0.0, 5.0) is None and w.observe(5.0, -1.0) is None
    with pytest.raises(ValueError, match="bad PrefillWall settings"):
        PrefillWall(window=0)
