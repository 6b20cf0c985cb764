"""The gevent event loop's turns, as the stamps of received bytes need them.

:class:`LoopTurn` holds when the current turn began (its poll returned), how many turns have begun, and whether reads
in this turn take the kernel's receive time (the rules, with :data:`WORK_NS` and :data:`WAIT_NS`: docs/architecture.md,
"Stamps"). :func:`poll_count` is libev's own count of polls.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from gevent.hub import get_hub

__all__ = ["STALL_NS", "WAIT_NS", "WORK_NS", "LoopTurn", "loop_turn", "poll_count"]

WORK_NS = 100_000
"""A turn that follows more of the loop's own work than this (ns, wall clock) reads with the kernel's receive times."""
WAIT_NS = 1_000_000
"""A turn whose poll waited longer than this (ns) reads with the kernel's receive times."""
STALL_NS = 10_000_000
"""A turn whose own work (from its poll's return to the next poll) took longer than this (ns) held the loop: it is
kept in :attr:`LoopTurn.stalls` for the loop watchdog (``runtime.stall``)."""


@dataclass(slots=True, eq=False)
class LoopTurn:
    """The current turn of one thread's loop, on ``time.perf_counter_ns``'s clock."""

    start_ns: int
    """When this turn's poll returned."""
    count: int
    """Turns begun: a greenlet that reads it before and after a call knows whether the loop turned in between."""
    wall_offset_ns: int
    """``time.time_ns()`` minus ``start_ns`` at the turn's start: turns a kernel receive time into this clock's."""
    kernel_stamps: bool
    """Reads in this turn take the kernel's receive time (module docstring)."""
    polling_ns: int
    """When the loop was about to poll."""
    stalls: list[tuple[int, int]] = field(default_factory=list)
    """``(ended ns, held ns)`` of each turn whose own work took over :data:`STALL_NS`, until taken."""


def loop_turn(clock: Callable[[], int]) -> LoopTurn | None:
    """This thread's :class:`LoopTurn`, or ``None`` when ``clock`` is not ``time.perf_counter_ns`` (the tests'
    scripted clocks stamp each read with ``clock()`` instead).

    Kept by a check watcher of the highest priority (libev runs it first after the poll) and a prepare watcher of the
    lowest (it runs last before the poll, after gevent's callbacks, where users' greenlets are switched to), started
    on first use and kept for the loop's life; neither keeps the loop running."""
    if clock is not time.perf_counter_ns:
        return None
    hub = get_hub()
    loop = hub.loop
    kept = getattr(hub, "_locust_llm_turn", None)
    if kept is not None and kept[0] is loop:
        return kept[1]  # type: ignore[no-any-return]
    start = clock()
    turn = LoopTurn(start, 0, time.time_ns() - start, True, start)
    wall = time.time_ns

    def began() -> None:
        now = clock()
        work = turn.polling_ns - turn.start_ns
        turn.kernel_stamps = work > WORK_NS or now - turn.polling_ns > WAIT_NS
        if work > STALL_NS:
            turn.stalls.append((turn.polling_ns, work))
        turn.start_ns = now
        turn.count += 1
        turn.wall_offset_ns = wall() - now

    def polling() -> None:
        turn.polling_ns = clock()

    after_poll = loop.check(ref=False, priority=loop.MAXPRI)
    after_poll.start(began)
    before_poll = loop.prepare(ref=False, priority=loop.MINPRI)
    before_poll.start(polling)
    hub._locust_llm_turn = (loop, turn, after_poll, before_poll)
    return turn


def poll_count() -> int:
    """How many times this thread's libev loop has polled: unchanged across a call that never waited on the loop."""
    count: int = get_hub().loop.iteration
    return count
