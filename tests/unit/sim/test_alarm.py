import asyncio
import os
import time

import pytest

import locust_llm.sim.alarm as alarm_module
from locust_llm.sim.alarm import Alarm


def run(body):
    return asyncio.run(asyncio.wait_for(body(), 10))


def rings_after(arm, wait_s):
    """Make an alarm, ``arm(alarm, start_ns)`` it, wait ``wait_s``: its ring times, ``start_ns`` and whether it
    was backed by a timerfd."""

    async def body():
        rings = []
        alarm = Alarm(asyncio.get_running_loop(), lambda: rings.append(time.monotonic_ns()))
        precise = alarm.precise
        start = time.monotonic_ns()
        arm(alarm, start)
        await asyncio.sleep(wait_s)
        alarm.close()
        return rings, start, precise

    return run(body)


@pytest.fixture(params=["timerfd", "call_at"])
def backend(request, monkeypatch):
    if request.param == "call_at":
        monkeypatch.setattr(alarm_module, "_LIBC", None)
    elif alarm_module._LIBC is None:
        pytest.skip("no timerfd on this platform")
    return request.param


def test_it_rings_once_at_the_instant_and_never_before_with_a_timerfd(backend):
    rings, start, precise = rings_after(lambda alarm, start: alarm.arm(start + 20_000_000), 0.2)
    assert precise == (backend == "timerfd")
    assert len(rings) == 1
    if backend == "timerfd":
        assert rings[0] >= start + 20_000_000  # a timerfd at an absolute CLOCK_MONOTONIC instant cannot ring early


def test_arming_again_replaces_the_instant(backend):
    def arm(alarm, start):
        alarm.arm(start + 30_000_000)
        alarm.arm(start + 80_000_000)

    rings, start, _ = rings_after(arm, 0.25)
    assert len(rings) == 1
    if backend == "timerfd":
        assert rings[0] >= start + 80_000_000


def test_a_cancelled_alarm_does_not_ring(backend):
    def arm(alarm, start):
        alarm.arm(start + 20_000_000)
        alarm.cancel()

    assert rings_after(arm, 0.1)[0] == []


def test_an_instant_in_the_past_rings_at_once(backend):
    assert len(rings_after(lambda alarm, start: alarm.arm(start - 5_000_000), 0.05)[0]) == 1


def test_close_releases_the_descriptor():
    if alarm_module._LIBC is None:
        pytest.skip("no timerfd on this platform")

    async def body():
        alarm = Alarm(asyncio.get_running_loop(), lambda: None)
        fd = alarm._fd
        os.fstat(fd)
        alarm.close()
        alarm.close()  # twice is harmless
        return fd

    fd = run(body)
    with pytest.raises(OSError):
        os.fstat(fd)
