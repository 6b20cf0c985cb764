import asyncio
import os
import time

import pytest

import locust_llm.sim.alarm as alarm_module
from locust_llm.sim.alarm import Alarm


def run(body):
    return asyncio.run(asyncio.wait_for(body(), 10))


@pytest.fixture(params=["timerfd", "call_at"])
def backend(request, monkeypatch):
    if request.param == "call_at":
        monkeypatch.setattr(alarm_module, "_LIBC", None)
    elif alarm_module._LIBC is None:
        pytest.skip("no timerfd on this platform")
    return request.param


def test_it_rings_once_at_the_instant_and_never_before_with_a_timerfd(backend):
    async def body():
        rings = []
        alarm = Alarm(asyncio.get_running_loop(), lambda: rings.append(time.monotonic_ns()))
        assert alarm.precise == (backend == "timerfd")
        at = time.monotonic_ns() + 20_000_000
        alarm.arm(at)
        await asyncio.sleep(0.2)
        alarm.close()
        return rings, at

    rings, at = run(body)
    assert len(rings) == 1
    if backend == "timerfd":
        assert rings[0] >= at  # a timerfd at an absolute CLOCK_MONOTONIC instant cannot ring early


def test_arming_again_replaces_the_instant(backend):
    async def body():
        rings = []
        alarm = Alarm(asyncio.get_running_loop(), lambda: rings.append(time.monotonic_ns()))
        start = time.monotonic_ns()
        alarm.arm(start + 30_000_000)
        alarm.arm(start + 80_000_000)
        await asyncio.sleep(0.25)
        alarm.close()
        return rings, start

    rings, start = run(body)
    assert len(rings) == 1
    if backend == "timerfd":
        assert rings[0] >= start + 80_000_000


def test_a_cancelled_alarm_does_not_ring(backend):
    async def body():
        rings = []
        alarm = Alarm(asyncio.get_running_loop(), lambda: rings.append(1))
        alarm.arm(time.monotonic_ns() + 20_000_000)
        alarm.cancel()
        await asyncio.sleep(0.1)
        alarm.close()
        return rings

    assert run(body) == []


def test_an_instant_in_the_past_rings_at_once(backend):
    async def body():
        rings = []
        alarm = Alarm(asyncio.get_running_loop(), lambda: rings.append(1))
        alarm.arm(time.monotonic_ns() - 5_000_000)
        await asyncio.sleep(0.05)
        alarm.close()
        return rings

    assert run(body) == [1]


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
