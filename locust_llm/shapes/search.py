"""Adaptive capacity search: the highest load that meets a criterion, in few probes. Pure; no clock.

Grow by doubling while probes pass, shrink by halving after a failing start, then bisect between the highest pass and
the lowest failure to the precision; the answer is the highest pass. A borderline probe is run again once; an invalid
one twice, then *not sure*. docs/methodology.md, "The capacity search", states the rule.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Next", "Outcome", "Probe", "Search", "SearchSettings"]

Kind = Literal["probe", "repeat", "retry"]


@dataclass(frozen=True)
class SearchSettings:
    """``--search`` and its flags: the criterion (``sla`` or ``knee``), the precision (a share, 0.1 = 10 %), the
    highest load to try, the wall-time budget, and the steady requests a probe needs before it is judged."""

    criterion: Literal["sla", "knee"]
    precision: float
    max_load: float
    max_duration_s: float
    min_requests: int

    def describe(self) -> dict[str, Any]:
        return {
            "criterion": self.criterion,
            "precision": self.precision,
            "max_load": self.max_load,
            "max_duration_s": self.max_duration_s,
            "min_requests": self.min_requests,
        }


@dataclass(frozen=True)
class Outcome:
    """How a probe did: ``passed`` (None: invalid, not judged), whether that is too close to call alone, in words,
    and the values judged (for the record)."""

    passed: bool | None
    borderline: bool = False
    detail: str = ""
    values: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Next:
    """The probe to run next: its load, and ``kind``: a new ``probe``, the ``repeat`` of a borderline one (to be
    judged together with it) or the ``retry`` of an invalid one (judged alone); a knee search's ``reference``, the
    load whose probe it is judged against (:mod:`locust_llm.shapes.knee_search`)."""

    load: float
    kind: Kind = "probe"
    reference: float | None = None


@dataclass(frozen=True)
class Probe:
    """One decided (or invalid) probe, in the order run; ``steps`` are the step numbers its samples came from."""

    order: int
    load: float
    kind: Kind
    steps: tuple[int, ...]
    outcome: Outcome
    reference: float | None = None

    def as_dict(self) -> dict[str, Any]:
        verdict = "invalid" if self.outcome.passed is None else ("pass" if self.outcome.passed else "fail")
        return {
            "order": self.order,
            "load": self.load,
            "kind": self.kind,
            "steps": list(self.steps),
            "verdict": verdict,
            "borderline": self.outcome.borderline,
            "detail": self.outcome.detail,
            "repeated": self.kind == "repeat",
            "reference": self.reference,
            **dict(self.outcome.values),
        }


class Search:
    """The rules of the module docstring. Call :meth:`next` for the load to run, :meth:`record` with its outcome."""

    def __init__(
        self,
        start: float,
        precision: float,
        max_load: float,
        *,
        integer: bool = True,
        min_load: float | None = None,
    ) -> None:
        if start <= 0 or max_load <= 0:
            raise ValueError(f"start and max load must be > 0, got {start} and {max_load}")
        if not 0 < precision < 1:
            raise ValueError(f"precision must be within (0, 1), got {precision}")
        self.integer = integer
        self.precision = precision
        self.max_load = self._round(max_load)
        self.min_load = min_load if min_load is not None else (1.0 if integer else start / 64)
        self.low: float | None = None
        self.high: float | None = None
        self.probes: list[Probe] = []
        self.reason = ""  # why the search ended ("" while it runs)
        self.complete = False  # it ended by its rules (not by the budget or an invalid load)
        self._next: Next | None = Next(self._round(min(start, self.max_load)))

    # -- driving ----------------------------------------------------------------------------------------------

    def next(self) -> Next | None:
        """The probe to run next; ``None`` once the search has ended."""
        return None if self.reason else self._next

    def record(self, outcome: Outcome, steps: tuple[int, ...] = ()) -> Probe:
        """The outcome of the probe :meth:`next` asked for (for a ``repeat``: of both probes' samples together)."""
        planned = self._next
        if planned is None or self.reason:
            raise RuntimeError("the search has ended: nothing to record")
        probe = Probe(len(self.probes) + 1, planned.load, planned.kind, steps, outcome, planned.reference)
        self.probes.append(probe)
        load = planned.load
        if outcome.passed is None:
            if planned.kind == "retry":
                self._end(f"not sure: the probe at {self.text(load)} was invalid twice ({outcome.detail})", False)
            else:
                self._next = Next(load, "retry", planned.reference)
            return probe
        if outcome.borderline and planned.kind != "repeat":
            self._next = Next(load, "repeat", planned.reference)
            return probe
        self._decide(planned, outcome)
        self._plan()
        return probe

    def stop(self, reason: str) -> None:
        """End the search now (e.g. its time budget is spent), keeping the bracket found so far."""
        if not self.reason:
            self._end(reason, False)

    # -- results ----------------------------------------------------------------------------------------------

    @property
    def answer(self) -> float | None:
        """The highest load that passed: the answer, or a lower bound when the search did not complete."""
        return self.low

    @property
    def bracket(self) -> tuple[float | None, float | None]:
        return self.low, self.high

    def text(self, load: float | None) -> str:
        if load is None:
            return "none"
        return f"{load:g} users" if self.integer else f"{load:g} req/s"

    def where(self) -> str:
        """Where the crossing lies, as far as the bracket tells ("" when nothing was decided)."""
        low, high = self.low, self.high
        if low is not None and high is not None:
            return f"the crossing lies between {self.text(low)} and {self.text(high)}"
        if low is not None:
            return f"the crossing lies above {self.text(low)}"
        return f"the crossing lies below {self.text(high)}" if high is not None else ""

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
        """About how many probes the bisection has left, the next included (repeats aside): halvings of the bracket
        until it is narrow enough; ``None`` while it grows or shrinks (its end is not known yet)."""
        low, high = self.low, self.high
        if low is None or high is None or self.reason:
            return None if not self.reason else 0
        width, enough, n = high - low, max(self.precision * low, self._resolution), 0
        while width > enough and n < 64:
            width, n = width / 2, n + 1
        return n

    # -- rules ------------------------------------------------------------------------------------------------

    @property
    def _resolution(self) -> float:
        return 1.0 if self.integer else 0.0

    def _decide(self, planned: Next, outcome: Outcome) -> None:
        """What a decided probe says: a pass raises the bracket's low end, a failure lowers its high end."""
        if outcome.passed:
            self.low = planned.load if self.low is None else max(self.low, planned.load)
        else:
            self.high = planned.load if self.high is None else min(self.high, planned.load)

    def _plan(self) -> None:
        low, high = self.low, self.high
        if high is None:
            assert low is not None
            if low >= self.max_load:
                self._end(
                    f"meets the criterion at the search's maximum, {self.text(low)}: the capacity is at least that",
                    True,
                )
                return
            self._next = Next(self._round(min(2 * low, self.max_load)))
            return
        if low is None:
            if high <= self.min_load:
                self._end(f"fails even at {self.text(high)}, the lowest load the search tries", True)
                return
            self._next = Next(self._round(max(high / 2, self.min_load)))
            return
        mid = self._round((low + high) / 2)
        if high - low <= max(self.precision * low, self._resolution) or not low < mid < high:
            self._end(self.where(), True)
            return
        self._next = Next(mid)

    def _round(self, load: float) -> float:
        if self.integer:
            return max(1, math.floor(load))  # users stay integers in every output
        return float(f"{load:.3g}")

    def _end(self, reason: str, complete: bool) -> None:
        self.reason, self.complete, self._next = reason, complete, None
