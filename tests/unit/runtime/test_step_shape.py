"""The shape's wait for a step boundary due before Locust's next tick (StepShape: steps change on time)."""

import pytest

from locust_llm.shapes.plan import TICK_S, until_boundary


class Clock:
    """A scripted run time: each sleep advances it by what was asked; the first ones by ``short`` less (a sleep
    that ends early), ``early`` times."""

    def __init__(self, now: float, short: float = 0.0, early: int = 1) -> None:
        self.now, self.short, self.early, self.slept = now, short, early, []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds - (self.short if len(self.slept) <= self.early else 0.0)


@pytest.mark.parametrize("short", [0.0, 0.001])
def test_a_boundary_before_the_next_tick_is_waited_for_and_passed(short):
    clock = Clock(10.0, short)
    assert until_boundary(10.3, clock, clock.sleep, lambda: True)
    assert clock.now >= 10.3  # the tick that follows is in the next step, never a hair before it
    assert clock.slept[0] == pytest.approx(0.3) and (len(clock.slept) > 1) == (short > 0)


@pytest.mark.parametrize("end_s", [10.0 + TICK_S, 10.0 + 5 * TICK_S, 10.0, 9.0])
def test_a_boundary_at_or_after_the_next_tick_or_already_past_is_not_waited_for(end_s):
    clock = Clock(10.0)
    assert until_boundary(end_s, clock, clock.sleep, lambda: True)
    assert clock.slept == [] and clock.now == 10.0


def test_a_clock_that_never_gets_there_is_not_waited_for_forever():
    clock = Clock(10.0, short=0.001, early=100)
    assert until_boundary(10.3, clock, clock.sleep, lambda: True)
    assert len(clock.slept) == 3


def test_a_run_stopped_during_the_wait_is_said_so():
    clock = Clock(10.0, short=0.001)
    assert until_boundary(10.3, clock, clock.sleep, lambda: False) is False
    assert len(clock.slept) == 1  # no second sleep once the run stopped
