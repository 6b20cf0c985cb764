"""The knee search: the sweep's latency knee (:mod:`locust_llm.measure.knee`), found in few probes. Pure; no clock.

Each decision judges a *segment* between two probed loads ``a < b``: ``b`` is past the knee when it bends or a probe
is past capacity, else flat. The start is judged against half its load; the search walks the doubling ladder down
while the lowest segment bends, up while the highest is flat, then bisects the first bending segment to the
precision. docs/methodology.md, "The capacity search".
"""

from __future__ import annotations

from locust_llm.shapes.search import Next, Outcome, Search

__all__ = ["KneeSearch"]


class KneeSearch(Search):
    """The rules of the module docstring. :meth:`next` names the load to run and the load it is judged against
    (``reference``); :meth:`record` takes the outcome (``passed``: the segment's upper end is flat; an outcome whose
    ``values`` hold ``past_at`` says that load itself is past capacity). Driving, retries and the results are
    :class:`~locust_llm.shapes.search.Search`'s."""

    def __init__(self, start: float, precision: float, max_load: float, *, integer: bool = True) -> None:
        super().__init__(start, precision, max_load, integer=integer)
        self.measured: set[float] = set()

    def where(self) -> str:
        low, high = self.low, self.high
        if low is not None and high is not None:
            return f"the knee lies between {self.text(low)} and {self.text(high)}"
        if low is not None:
            return f"no knee up to {self.text(low)}"
        return f"the knee lies below {self.text(high)}" if high is not None else ""

    # -- rules ------------------------------------------------------------------------------------------------

    def _decide(self, planned: Next, outcome: Outcome) -> None:
        """What the outcome says: a load past capacity, a segment's upper end past the knee, or flat loads."""
        self.measured.add(planned.load)
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
