"""The knee search: the sweep's latency knee (:mod:`locust_llm.measure.knee`), found in few probes. Pure; no clock.

Each decision judges a *segment* between two probed loads ``a < b`` (the caller's criterion): ``b`` is past the knee
when it bends or a probe is past capacity (that load), else flat. The start is judged against half its load (so it
can answer below its start); the search walks the doubling ladder down while the lowest segment bends (the lowest load
tried is flat by definition), up while the highest is flat (to the maximum), then bisects the first bending segment,
each midpoint against the highest flat load, to the precision; the answer is that load. Borderline, invalid and
budget rules are :mod:`locust_llm.shapes.search`'s. docs/methodology.md, "The capacity search".
"""

from __future__ import annotations

import math
from typing import Any

from locust_llm.shapes.search import Next, Outcome, Probe

__all__ = ["KneeSearch"]


class KneeSearch:
    """The rules of the module docstring. :meth:`next` names the load to run and the load it is judged against
    (``reference``); :meth:`record` takes the outcome (``passed``: the segment's upper end is flat; an outcome whose
    ``values`` hold ``past_at`` says that load itself is past capacity)."""

    def __init__(self, start: float, precision: float, max_load: float, *, integer: bool = True) -> None:
        if start <= 0 or max_load <= 0:
            raise ValueError(f"start and max load must be > 0, got {start} and {max_load}")
        if not 0 < precision < 1:
            raise ValueError(f"precision must be within (0, 1), got {precision}")
        self.integer = integer
        self.precision = precision
        self.max_load = self._round(max_load)
        self.min_load = 1.0 if integer else start / 64
        self.low: float | None = None
        self.high: float | None = None
        self.measured: set[float] = set()
        self.probes: list[Probe] = []
        self.reason = ""
        self.complete = False
        self._next: Next | None = Next(self._round(min(start, self.max_load)))

    # -- driving ----------------------------------------------------------------------------------------------

    def next(self) -> Next | None:
        return None if self.reason else self._next

    def record(self, outcome: Outcome, steps: tuple[int, ...] = ()) -> Probe:
        planned = self._next
        if planned is None or self.reason:
            raise RuntimeError("the search has ended: nothing to record")
        probe = Probe(len(self.probes) + 1, planned.load, planned.kind, steps, outcome, planned.reference)
        self.probes.append(probe)
        if outcome.passed is None:
            if planned.kind == "retry":
                self._end(
                    f"not sure: the probe at {self.text(planned.load)} was invalid twice ({outcome.detail})", False
                )
            else:
                self._next = Next(planned.load, "retry", planned.reference)
            return probe
        if outcome.borderline and planned.kind != "repeat":
            self._next = Next(planned.load, "repeat", planned.reference)
            return probe
        self.measured.add(planned.load)
        self._decide(planned, outcome)
        self._plan()
        return probe

    def stop(self, reason: str) -> None:
        if not self.reason:
            self._end(reason, False)

    # -- results (as shapes.search.Search) -------------------------------------------------------------------

    @property
    def answer(self) -> float | None:
        return self.low

    @property
    def bracket(self) -> tuple[float | None, float | None]:
        return self.low, self.high

    def text(self, load: float | None) -> str:
        if load is None:
            return "none"
        return f"{load:g} users" if self.integer else f"{load:g} req/s"

    def where(self) -> str:
        low, high = self.low, self.high
        if low is not None and high is not None:
            return f"the knee lies between {self.text(low)} and {self.text(high)}"
        if low is not None:
            return f"no knee up to {self.text(low)}"
        return f"the knee lies below {self.text(high)}" if high is not None else ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "precision": self.precision,
            "max_load": self.max_load,
            "probes": [p.as_dict() for p in self.probes],
            "bracket": [self.low, self.high],
            "answer": self.low,
            "complete": self.complete,
            "reason": self.reason,
        }

    def probes_left(self) -> int | None:
        low, high = self.low, self.high
        if self.reason:
            return 0
        if low is None or high is None:
            return None
        width, enough, n = high - low, max(self.precision * low, self._resolution), 0
        while width > enough and n < 64:
            width, n = width / 2, n + 1
        return n

    # -- rules ------------------------------------------------------------------------------------------------

    @property
    def _resolution(self) -> float:
        return 1.0 if self.integer else 0.0

    def _decide(self, planned: Next, outcome: Outcome) -> None:
        """What the outcome says: a load past capacity, a segment's upper end past the knee, or flat loads."""
        past_at = outcome.values.get("past_at")
        if past_at is not None:
            self._past(float(past_at))
            return
        if planned.reference is None:  # the start, measured alone: judged with the next probe
            if planned.load <= self.min_load:
                self._flat(planned.load)
            return
        lower, upper = sorted((planned.load, planned.reference))
        if not outcome.passed:
            self._past(upper)
            if lower <= self.min_load:
                self._flat(lower)  # rule 2: the lowest load is flat by definition
        elif self.high is None or upper < self.high:
            self._flat(upper)
        elif lower <= self.min_load:
            self._flat(lower)
        # else: a segment that does not bend below a load already past capacity says nothing of its lower end

    def _flat(self, load: float) -> None:
        self.low = load if self.low is None else max(self.low, load)

    def _past(self, load: float) -> None:
        self.high = load if self.high is None else min(self.high, load)
        if self.low is not None and self.low >= self.high:
            self.low = None  # noise: the curve is assumed to rise, so the newer verdict stands

    def _plan(self) -> None:
        low, high = self.low, self.high
        if high is None and low is None:  # rule 1: the start alone, judged against half its load
            start = max(self.measured)
            self._next = Next(self._round(max(start / 2, self.min_load)), reference=start)
        elif high is None:
            assert low is not None
            if low >= self.max_load:
                self._end(f"no knee up to the search's maximum, {self.text(low)}: the capacity is at least that", True)
                return
            self._next = Next(self._round(min(2 * low, self.max_load)), reference=low)
        elif low is None:
            lowest = min(self.measured)
            if lowest <= self.min_load:
                self._end(f"past capacity even at {self.text(lowest)}, the lowest load the search tries", True)
                return
            self._next = Next(self._round(max(lowest / 2, self.min_load)), reference=lowest)
        else:
            mid = self._round((low + high) / 2)
            if high - low <= max(self.precision * low, self._resolution) or not low < mid < high:
                self._end(self.where(), True)
                return
            self._next = Next(mid, reference=low)

    def _round(self, load: float) -> float:
        if self.integer:
            return float(max(1, math.floor(load)))
        return float(f"{load:.3g}")

    def _end(self, reason: str, complete: bool) -> None:
        self.reason, self.complete, self._next = reason, complete, None
