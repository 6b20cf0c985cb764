"""Open-loop arrivals: when requests arrive, whatever the server does. Pure and seeded.

A step of rate ``R`` requests per second is split exactly across the ``N`` generator processes: each gets
``R / N`` with its own seeded random stream, so the merged process has rate ``R`` (a superposition of independent
Poisson processes is a Poisson process; for ``constant``, process ``i`` of ``N`` is offset by ``i / R`` so that the
merged arrivals are evenly spaced). The gaps between one process's arrivals, with mean ``1 / r``:

- ``poisson``: exponential, coefficient of variation (CV) 1;
- ``constant``: exactly ``1 / r``, CV 0;
- ``gamma:CV``: gamma with shape ``k = 1 / CV**2`` and scale ``CV**2 / r`` (CV < 1 is more regular than Poisson,
  CV > 1 burstier).

Each arrival's scheduled time is its request's *intended start*: TTFT, E2E and the scheduling lag are measured from
it, so a generator that falls behind cannot hide it (no coordinated omission).
"""

from __future__ import annotations

import itertools
import math
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass

from locust_llm.parsers import ConfigError

__all__ = ["ARRIVAL_KINDS", "Arrivals", "parse_arrivals", "parse_rates", "share"]

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


def parse_arrivals(text: str, flag: str = "--arrivals") -> Arrivals:
    """``poisson``, ``constant`` or ``gamma:CV`` with ``CV > 0``."""
    raw = str(text).strip().lower()
    if raw in ("poisson", "constant"):
        return Arrivals(raw)
    match = re.fullmatch(r"gamma:(\d+(?:\.\d+)?)", raw)
    if match and 0 < float(match.group(1)) <= 100:
        return Arrivals("gamma", float(match.group(1)))
    raise ConfigError(f"{flag} must be one of poisson, constant, gamma:CV (0 < CV <= 100), got {text!r}")


def parse_rates(text: str, flag: str = "--rates") -> tuple[float, ...]:
    """Parse ``2,4,8.5`` into a strictly increasing tuple of positive request rates (per second)."""
    parts = [p.strip() for p in str(text).split(",")]
    try:
        rates = tuple(float(p) for p in parts)
    except ValueError:
        raise ConfigError(f"{flag} must be comma-separated request rates per second like 2,4,8, got {text!r}") from None
    if not all(math.isfinite(r) and r > 0 for r in rates):
        raise ConfigError(f"{flag} rates must be positive numbers, got {text}")
    if any(b <= a for a, b in itertools.pairwise(rates)):
        raise ConfigError(f"{flag} must be strictly increasing, got {text}")
    return rates
