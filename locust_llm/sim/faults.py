"""Fault injection: which request misbehaves, and how. Pure and seeded.

Kinds: ``500``, ``502``, ``503``, ``reset``, ``stall``, ``malformed``, ``no-done`` and ``close``. Each request draws
its fault from the probabilities, seeded by its ordinal, or a script names each request's fault in turn, cycling.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

__all__ = ["FAULT_KINDS", "MID_STREAM", "FaultPlan", "parse_fault"]

FAULT_KINDS = ("500", "502", "503", "reset", "stall", "malformed", "no-done", "close")
MID_STREAM = ("reset", "stall", "malformed")


def parse_fault(text: str) -> tuple[str, float]:
    """``KIND:PROBABILITY`` (e.g. ``503:0.05``) -> ``("503", 0.05)``."""
    kind, sep, prob = text.partition(":")
    if kind not in FAULT_KINDS:
        raise ValueError(f"unknown fault kind {kind!r}; allowed: {', '.join(FAULT_KINDS)}")
    try:
        p = float(prob) if sep else 1.0
    except ValueError:
        raise ValueError(f"fault probability must be a number in [0, 1], got {prob!r}") from None
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"fault probability must be a number in [0, 1], got {prob!r}")
    return kind, p


@dataclass(frozen=True)
class FaultPlan:
    probabilities: tuple[tuple[str, float], ...] = ()
    script: tuple[str, ...] = ()
    seed: int = 0
    _cumulative: tuple[tuple[float, str], ...] = field(init=False, repr=False, default=())

    def __post_init__(self) -> None:
        for kind in self.script:
            if kind != "ok" and kind not in FAULT_KINDS:
                raise ValueError(f"unknown fault kind {kind!r} in script; allowed: ok, {', '.join(FAULT_KINDS)}")
        total = 0.0
        cumulative = []
        for kind, p in self.probabilities:
            total += p
            cumulative.append((total, kind))
        if total > 1.0 + 1e-9:
            raise ValueError(f"fault probabilities add up to {total:g}, more than 1")
        object.__setattr__(self, "_cumulative", tuple(cumulative))

    @property
    def active(self) -> bool:
        return bool(self.script or self._cumulative)

    def decide(self, ordinal: int) -> str | None:
        """The fault of the ``ordinal``-th request (from 0), or None."""
        if self.script:
            kind = self.script[ordinal % len(self.script)]
            return None if kind == "ok" else kind
        if not self._cumulative:
            return None
        u = random.Random(self.seed * 1_000_003 + ordinal).random()
        for bound, kind in self._cumulative:
            if u < bound:
                return kind
        return None
