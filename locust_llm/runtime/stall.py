"""A watchdog on this process's event loop: how long the loop was held, as a share of the time (validity rule 3).

It adds no timer: from the loop's turn watchers (``http.loop.LoopTurn``) it files what a watchdog ticking every
:data:`TICK_S` would have seen (``W``, ``W - TICK``, ... for a turn held ``W``: no coordinated omission).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from locust_llm.http.loop import STALL_NS, LoopTurn, loop_turn

__all__ = ["TICK_S", "LoopWatch"]

TICK_S = STALL_NS / 1e9
"""The watchdog's resolution: a turn shorter than this is not a stall (nor does it stretch a token gap beyond the ITL
noise of a few milliseconds)."""


class LoopWatch:
    """Files ``file(at_ns, lateness_ns)`` samples for this thread's loop (module docstring) at each :meth:`flush`."""

    def __init__(self, file: Callable[[int, int], None], clock: Callable[[], int] = time.perf_counter_ns) -> None:
        self.file = file
        self.clock = clock
        self.tick_ns = STALL_NS
        self.turn: LoopTurn | None = None
        self._since_ns = 0

    def start(self, turn: LoopTurn | None = None) -> None:
        """Watch this thread's loop (or ``turn``, the tests' own); from now on."""
        if self.turn is None:
            self.turn = turn if turn is not None else loop_turn(time.perf_counter_ns)
            self._since_ns = self.clock()

    def flush(self) -> None:
        """File the samples of the time since the last flush: each held turn's, and 0 for the rest of its ticks."""
        if self.turn is None:
            return
        now = self.clock()
        stalls, self.turn.stalls = self.turn.stalls, []
        held = 0
        for ended_ns, work_ns in stalls:
            late = work_ns
            while late > 0:
                self.file(ended_ns, late)
                late -= self.tick_ns
                held += 1
        on_time = (now - self._since_ns) // self.tick_ns - held
        self._since_ns = now
        for _ in range(max(0, on_time)):
            self.file(now, 0)
