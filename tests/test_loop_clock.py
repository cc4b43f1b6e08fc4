"""sglang_mux.loop_clock: the loop's host time per phase, and GC pauses inside it."""
import gc

from sglang_mux.loop_clock import LoopClock


class Ticks:
    """A clock the test moves by hand (seconds)."""

    def __init__(self):
        self.t, self.step = 100.0, 0.0

    def __call__(self):
        self.t += self.step
        return self.t


def test_laps_sum_per_phase_and_take_resets():
    c = Ticks()
    clock = LoopClock(c)
    c.t += 0.002
    clock.lap("recv")
    c.t += 0.010
    clock.lap("sync")
    c.t += 0.001
    clock.lap("recv")                      # a repeated phase adds up
    assert clock.take() == {"recv": 3.0, "sync": 10.0}
    c.t += 0.004
    clock.lap("plan")
    assert clock.take() == {"plan": 4.0}   # only what came after the take


def test_reset_drops_an_iteration_that_had_no_decode():
    c = Ticks()
    clock = LoopClock(c)
    c.t += 0.5
    clock.lap("recv")
    clock.reset()
    c.t += 0.001
    clock.lap("recv")
    assert clock.take() == {"recv": 1.0}


def test_gc_pauses_are_counted_while_hooked():
    c = Ticks()
    clock = LoopClock(c)
    clock.hook_gc()
    clock.hook_gc()                        # idempotent: one callback
    try:
        assert gc.callbacks.count(clock._on_gc) == 1
        clock._on_gc("start", {})
        c.t += 0.015
        clock._on_gc("stop", {})
        clock.lap("poll")
        assert clock.take() == {"poll": 15.0, "gc": 15.0}
        c.step = 0.001                     # every reading 1 ms later: a real collection,
        gc.collect()                       # through the hook, takes 1 ms from start to stop
        assert clock.take()["gc"] == 1.0
    finally:
        clock.unhook_gc()
    assert clock._on_gc not in gc.callbacks
