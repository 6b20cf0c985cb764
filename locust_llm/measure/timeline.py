"""Which step a sample belongs to, and whether it falls in that step's warm-up. Pure; local clock only.

A sample observed at local time ``t`` belongs to the last step that began at or before ``t`` (step 0 before the
first); its phase is ``steady`` when ``t - began >= warmup``, ``warmup`` before, and ``drain`` once the run ended.
Each process stamps step changes with its own clock, so clock skew between machines never matters.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

__all__ = ["DRAIN", "STEADY", "WARMUP", "StepMark", "Timeline"]

STEADY = "steady"
WARMUP = "warmup"
DRAIN = "drain"


@dataclass(frozen=True)
class StepMark:
    step: int
    users: int
    began_ns: int
    warmup_ns: int
    rate: float | None = None  # open loop: the step's arrival rate, all generators together (requests/s)
    processes: int = 1  # open loop: the generator processes sharing the rate

    @property
    def rest(self) -> bool:
        """A rest between a search's open-loop probes: no arrivals, no row (its samples are all warm-up)."""
        return self.rate == 0.0


class Timeline:
    def __init__(self) -> None:
        self._began: list[int] = []
        self._marks: list[StepMark] = []
        self.ended_ns: int | None = None

    @property
    def marks(self) -> tuple[StepMark, ...]:
        return tuple(self._marks)

    @property
    def current(self) -> StepMark | None:
        return self._marks[-1] if self._marks else None

    def begin(
        self, step: int, users: int, now_ns: int, warmup_ns: int, rate: float | None = None, processes: int = 1
    ) -> StepMark:
        """Record that step number ``step`` began at ``now_ns`` (times must not go backwards)."""
        if self._began and now_ns < self._began[-1]:
            now_ns = self._began[-1]
        mark = StepMark(step, users, now_ns, warmup_ns, rate, processes)
        self._began.append(now_ns)
        self._marks.append(mark)
        return mark

    def end(self, now_ns: int) -> None:
        """Record the end of the run (samples from then on are ``drain``)."""
        if self.ended_ns is None:
            self.ended_ns = now_ns

    def locate(self, t_ns: int) -> tuple[int, str]:
        """``(step, phase)`` of a sample observed at ``t_ns``."""
        i = bisect.bisect_right(self._began, t_ns) - 1
        if i < 0:
            return 0, WARMUP
        mark = self._marks[i]
        if self.ended_ns is not None and t_ns >= self.ended_ns:
            return mark.step, DRAIN
        return mark.step, STEADY if t_ns - mark.began_ns >= mark.warmup_ns else WARMUP
