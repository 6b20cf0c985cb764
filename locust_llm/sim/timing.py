"""When the simulator writes a decode step's tokens, and how far from their due time they went out.

:class:`WriteLead` centres a step's writes on its due time (the alarm rings the expected wake-up delay plus half the
batch's write time early; medians over recent steps). Only the moment of each write moves, never the engine's
schedule. :class:`EmissionError` records ``|written - due|`` and what each stream was delivered. docs/simulator.md,
"Timing of the writes".
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from statistics import median
from typing import Any, Protocol

from locust_llm.measure.histogram import Histogram

__all__ = [
    "ALARM_GUARD_NS",
    "EARLY_NS",
    "FILE_EVERY",
    "LATE_NS",
    "MAX_LEAD_NS",
    "MAX_SPIN_NS",
    "SPIN_SPAN_NS",
    "SPREAD_WINDOW",
    "START_QUANTILE",
    "WINDOW",
    "BehindWatch",
    "EmissionError",
    "WriteLead",
]

EARLY_NS = 500_000
"""The timer fires this much before a step ends: asyncio's timers wake up to 1 ms late (epoll's millisecond timeout),
so aiming half a millisecond early centres the wake-up error on zero."""

LATE_NS = 5_000_000
"""A token written more than 5 ms after it was due counts as late (see :class:`BehindWatch`)."""

MAX_LEAD_NS = 10_000_000
"""No token is written more than this before it is due, whatever the estimate says."""

WINDOW = 15
"""Steps (that wrote tokens) the estimates are medians over: 0.3 s of 20 ms steps."""

FILE_EVERY = 4096
"""Token errors (or delivered intervals) :class:`EmissionError` gathers before filing them at once."""

SPIN_SPAN_NS = 500_000
"""A step expected to take this long to write (its tokens times the cost of one write) or longer starts precisely
(module docstring): its alarm rings early by the wake delay's spread and its writes wait for their instant in a
spin. Smaller steps (the pacing engine's, a few streams each) start when they are ready, as they cost no more."""

MAX_SPIN_NS = 2_000_000
"""The allowance for the wake delay's spread, and a step's spin, are never longer than this."""

ALARM_GUARD_NS = 200_000
"""A made step's second alarm rings this much before its writes' instant, and it spins the rest: the timerfd wakes
within tens of microseconds, and the loop may be finishing a callback (a request handler catches up, though)."""

START_QUANTILE = 0.75
"""A precise step's writes begin half their span at this quantile of the cost per write before the due time: the
cost varies from step to step, so a span centred on the median runs late more often than early."""

SPREAD_WINDOW = 64
"""Steps whose wake delays give its spread: the 95th percentile less the median needs more than :data:`WINDOW`."""

_START_WRITE_NS = 5_000
"""The cost of one write assumed before the first step has been measured."""


class WriteLead:
    """How long before a step's end its writes start (module docstring)."""

    __slots__ = ("_costs", "_lead", "_spread", "_wakes", "tokens")

    def __init__(self) -> None:
        self.tokens = 0
        """Tokens the last step wrote: the estimate of the next one's."""
        self._wakes: deque[int] = deque(maxlen=WINDOW)
        self._spread: deque[int] = deque(maxlen=SPREAD_WINDOW)  # the wake delays of the precise steps
        self._costs: deque[tuple[float, int]] = deque(maxlen=WINDOW)  # (ns per write, writes) of each step
        self._lead = EARLY_NS

    @property
    def wake_ns(self) -> float:
        """How long after the alarm was asked to ring the first write starts: the median of the window."""
        return float(median(self._wakes)) if self._wakes else float(EARLY_NS)

    @property
    def write_ns(self) -> float:
        """The cost of one write: the median of the window's steps, each weighted by its writes."""
        return self.write_cost(0.5)

    def write_cost(self, q: float) -> float:
        """The ``q`` quantile of the cost of one write over the window's steps, each weighted by its writes."""
        if not self._costs:
            return float(_START_WRITE_NS)
        ordered = sorted(self._costs)
        part = sum(writes for _, writes in ordered) * q
        seen = 0
        for cost, writes in ordered:
            seen += writes
            if seen >= part:
                return cost
        return ordered[-1][0]  # unreachable: the weights add up to more than part

    @property
    def allowance_ns(self) -> int:
        """How much earlier than its median wake delay a precise step's alarm rings: the 95th percentile of the
        precise steps' wake delays less their median (at most :data:`MAX_SPIN_NS`; zero before ten were seen), plus
        twice :data:`ALARM_GUARD_NS`, so that a step made at that 95th percentile still yields the loop (it would
        spin otherwise: at the median alone a tenth of the steps were made after their instant)."""
        spread = self._spread
        if len(spread) < 10:
            return 0
        ordered = sorted(spread)
        return min(MAX_SPIN_NS, ordered[len(ordered) * 19 // 20] - ordered[len(ordered) // 2]) + 2 * ALARM_GUARD_NS

    def lead_ns(self) -> int:
        return self._lead

    def start_ns(self, due_ns: int, writes: int) -> int:
        """When a step due at ``due_ns`` with ``writes`` writes should begin them, if it is to start precisely
        (:data:`SPIN_SPAN_NS`): half their time at the :data:`START_QUANTILE` cost per write before it; else ``0``
        (now)."""
        if writes * self.write_ns < SPIN_SPAN_NS:
            return 0
        return int(due_ns - writes * self.write_cost(START_QUANTILE) / 2)

    def observe(self, tokens: int, ready_late_ns: int, elapsed_ns: int) -> None:
        """A step's ``tokens`` writes were ready ``ready_late_ns`` after the planned instant (the wake delay) and
        took ``elapsed_ns`` from the first write's start to the last one's end."""
        self.tokens = tokens
        if tokens:
            wake = max(0, ready_late_ns)
            self._wakes.append(wake)
            self._costs.append((elapsed_ns / tokens, tokens))
        span = tokens * self.write_ns
        if span >= SPIN_SPAN_NS:  # so tokens > 0
            self._spread.append(wake)
            lead = self.wake_ns + self.allowance_ns + tokens * self.write_cost(START_QUANTILE) / 2
        else:
            lead = self.wake_ns + span / 2
        self._lead = min(MAX_LEAD_NS, int(lead))


class EmissionError:
    """Every token's ``|written - due|`` and, apart, the earliness of those written early; the TTFT and ITL the
    streams were delivered (module docstring). A step's values wait in lists and are filed
    :data:`FILE_EVERY` at a time (numpy does the per-value work, :meth:`Histogram.record_values`), or when the
    figures are read or cleared: the histograms are the same as filed one by one."""

    __slots__ = ("_errors", "_firsts", "_gaps", "early", "error", "itl", "ttft")

    def __init__(self) -> None:
        self.error = Histogram()
        self.early = Histogram()
        self.ttft = Histogram()
        self.itl = Histogram()
        self._errors: list[int] = []
        self._firsts: list[int] = []
        self._gaps: list[int] = []

    def clear(self) -> None:
        for histogram in (self.error, self.early, self.ttft, self.itl):
            histogram.clear()
        for pending in (self._errors, self._firsts, self._gaps):
            pending.clear()

    def add(self, errors: list[int], late_ns: int) -> int:
        """Take the ``written - due`` of a step's tokens (ns); returns how many were over ``late_ns`` late."""
        pending = self._errors
        pending += errors
        if len(pending) >= FILE_EVERY:
            self.file()
        return sum(error > late_ns for error in errors)

    def deliver(self, firsts: list[int], gaps: list[int]) -> None:
        """Take a step's delivered TTFTs (its streams' first tokens) and ITLs, in nanoseconds."""
        self._firsts += firsts
        pending = self._gaps
        pending += gaps
        if len(pending) >= FILE_EVERY:
            self.file()

    def file(self) -> None:
        """File every value taken and not filed yet."""
        errors = self._errors
        self.error.record_values(list(map(abs, errors)))
        self.early.record_values([-e for e in errors if e < 0])
        self.ttft.record_values(self._firsts)
        self.itl.record_values(self._gaps)
        for pending in (errors, self._firsts, self._gaps):
            pending.clear()

    def stats(self) -> dict[str, Any]:
        self.file()
        early = self.early
        return {
            "lateness_ms": _summary(self.error),
            "early_ms": {"count": early.count, "p99": early.quantile(0.99) / 1e6, "max": early.max / 1e6},
            "delivered_ms": {name: _summary(h) for name, h in (("ttft", self.ttft), ("itl", self.itl))},
        }


def _summary(histogram: Histogram) -> dict[str, float]:
    """Count, p50, p99 and max of a histogram of nanoseconds, in milliseconds."""
    return {
        "count": histogram.count,
        "p50": histogram.quantile(0.5) / 1e6,
        "p99": histogram.quantile(0.99) / 1e6,
        "max": histogram.max / 1e6,
    }


class _Counted(Protocol):
    """What :class:`BehindWatch` reads of a model (``ModelRuntime``): its tokens written, and those written late."""

    tokens_emitted: int
    late_tokens: int


class BehindWatch:
    """Warns (on stderr, at most once a minute) when over 1 % of the tokens of the last interval were late: the
    simulator itself is then the bottleneck and its timing is no longer the ground truth."""

    def __init__(self, models: Mapping[str, _Counted]) -> None:
        self.models = models
        self.last = self._totals()
        self.warned_ns = 0

    def _totals(self) -> tuple[int, int]:
        models = self.models.values()
        return sum(m.tokens_emitted for m in models), sum(m.late_tokens for m in models)

    def check(self, now_ns: int) -> str | None:
        tokens, late = self._totals()
        d_tokens, d_late = tokens - self.last[0], late - self.last[1]
        self.last = (tokens, late)
        if d_tokens and d_late > 0.01 * d_tokens and now_ns - self.warned_ns > 60 * 10**9:
            self.warned_ns = now_ns
            return (
                f"locust-llm sim: warning: falling behind: {100 * d_late / d_tokens:.0f}% of the last {d_tokens} "
                "tokens were written more than 5 ms late; timing is not ground truth now (too many streams for "
                "one simulator process on this machine?)"
            )
        return None
