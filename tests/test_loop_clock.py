"""sglang_mux.loop_clock: the loop's host time per phase, and GC pauses inside it."""
import gc
import os

from sglang_mux.loop_clock import LoopClock, steal_ticks


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


def test_off_cpu_and_steal_say_whether_a_slow_iteration_ran_or_waited():
    c, cpu = Ticks(), Ticks()
    steal = [100]
    clock = LoopClock(c, cpu_clock=cpu, steal=lambda: steal[0])
    c.t += 0.030                     # 30 ms of wall, 12 of them on the thread's CPU
    cpu.t += 0.012
    steal[0] += 2                    # the VM took 2 ticks from some vCPU meanwhile
    clock.lap("decode_launch")
    assert clock.take() == {"decode_launch": 30.0}
    tick_ms = 1000 / os.sysconf("SC_CLK_TCK")
    assert clock.last_os == {"off_cpu": 18.0, "steal": 2 * tick_ms}
    c.t += 0.004                     # the next iteration ran all the time it took
    cpu.t += 0.004
    clock.lap("result")
    clock.take()
    assert clock.last_os == {"off_cpu": 0.0, "steal": 0.0}
    no_proc = LoopClock(c, cpu_clock=cpu, steal=lambda: None)  # no /proc/stat: steal unknown
    no_proc.lap("poll")
    no_proc.take()
    assert no_proc.last_os["steal"] is None


def test_without_os_stats_nothing_is_read_but_the_laps():
    """A server without a timeline has no use for them: no /proc/stat read per iteration."""
    c = Ticks()

    def never():
        raise AssertionError("read although os_stats is off")
    clock = LoopClock(c, cpu_clock=never, steal=never, os_stats=False)
    c.t += 0.002
    clock.lap("recv")
    clock.reset()
    c.t += 0.003
    clock.lap("recv")
    assert clock.take() == {"recv": 3.0} and clock.last_os is None


def test_steal_is_the_eighth_number_of_proc_stats_cpu_line(tmp_path):
    f = tmp_path / "stat"
    f.write_text("cpu  342321 0 22919 2684771 2264 0 701 243 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
    assert steal_ticks(str(f)) == 243
    f.write_text("cpu  1 2 3 4 5 6 7\n")          # a kernel that reports no steal
    assert steal_ticks(str(f)) is None
    assert steal_ticks(str(tmp_path / "none")) is None
