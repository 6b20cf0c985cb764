"""Open-loop arrivals: when requests arrive, whatever the server does. Pure and seeded.

A step of ``R`` requests/s is split across ``N`` generator processes, each taking ``R / N`` with its own seeded
stream (``constant`` ones offset by ``i / R``). Gaps: ``poisson`` exponential (CV 1), ``constant`` exactly ``1 /
r``, ``gamma:CV`` gamma with shape ``1 / CV**2``. An arrival's scheduled time is its request's intended start, so a
generator that falls behind cannot hide it (no coordinated omission).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["ARRIVAL_KINDS", "Arrivals", "share"]

ARRIVAL_KINDS = ("poisson", "constant", "gamma:CV")


@dataclass(frozen=True)
class Arrivals:
    """An arrival process: ``kind`` (poisson, constant or gamma) and, for gamma, its coefficient of variation."""

    kind: str = "poisson"
    cv: float = 1.0

    def describe(self) -> str:
        return f"gamma:{self.cv:g}" if self.kind == "gamma" else self.kind

    def gap_s(self, rate: float, rng: random.Random) -> float:
        """One gap between arrivals of a process of ``rate`` per second (module docstring)."""
        if self.kind == "constant":
            return 1.0 / rate
        if self.kind == "poisson":
            return rng.expovariate(rate)
        k = 1.0 / (self.cv * self.cv)
        return rng.gammavariate(k, 1.0 / (k * rate))

    def times_s(self, rate: float, rng: random.Random, offset_s: float = 0.0) -> Iterator[float]:
        """Arrival times from 0 (the first one gap, or ``offset_s`` for constant arrivals), without end."""
        if self.kind == "constant":
            yield from (offset_s + i / rate for i in itertools.count())
            return
        t = 0.0
        while True:
            t += self.gap_s(rate, rng)
            yield t


def share(rate: float, processes: int, index: int) -> tuple[float, float]:
    """Process ``index``'s share of a step of ``rate``: ``(rate / processes, offset_s)``, the offset spreading
    constant arrivals evenly (``index / rate``)."""
    return rate / processes, index / rate if rate > 0 else 0.0
