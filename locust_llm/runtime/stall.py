"""A watchdog on this process's event loop: how late the loop runs, as a share of the time, for the validity rules.

A libev timer asks to run every :data:`TICK_S` and files how late it ran (``L``: the gap since its last run less the
tick), and, for the ticks a late run swallowed, ``L - TICK``, ``L - 2 TICK``, ... (HdrHistogram's correction for
coordinated omission): the step's ``loop_stall`` percentiles are shares of its time, whatever held the loop (a
blocking call, a slow scrape, a GC pause, a starved CPU). Only processes that time tokens run it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import gevent

__all__ = ["TICK_S", "LoopWatch"]

TICK_S = 0.010
"""How often the watchdog asks to run: a stall shorter than this is not seen (nor does it stretch a token gap beyond
the ITL noise of a few milliseconds)."""


class LoopWatch:
    """Calls ``file(at_ns, lateness_ns)`` for each run of its timer and each tick a late run swallowed (module
    docstring); ``clock`` is ``time.perf_counter_ns``."""

    def __init__(self, file: Callable[[int, int], None], clock: Callable[[], int] = time.perf_counter_ns) -> None:
        self.file = file
        self.clock = clock
        self.tick_ns = int(TICK_S * 1e9)
        self._timer: Any = None
        self._last_ns = 0

    def start(self) -> None:
        if self._timer is None:
            self._last_ns = self.clock()
            self._timer = gevent.get_hub().loop.timer(TICK_S, TICK_S)
            self._timer.start(self.run)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    def run(self) -> None:
        """One run of the timer: file its lateness (0 when on time) and the ticks a late run swallowed."""
        now = self.clock()
        late = max(0, now - self._last_ns - self.tick_ns)
        self._last_ns = now
        self.file(now, late)
        late -= self.tick_ns
        while late > 0:
            self.file(now, late)
            late -= self.tick_ns
