"""Knee of a latency curve: where p99 starts to rise disproportionately with concurrency. Pure.

:func:`kneedle_convex_increasing` is Kneedle (Satopaa et al., 2011) for a convex increasing curve, as ``kneed``
implements it. :func:`latency_knee` applies it with ``x = log2(users)`` and ``y`` made non-decreasing; the knee is
the last step on the flat part, the bend lies between it and the next (``bracket``), and a curve rising less than
``min_rise`` (50 %) has none. docs/methodology.md, "The latency knee".
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from locust_llm.measure.thresholds import MIN_RISE

__all__ = ["Knee", "kneedle_convex_increasing", "latency_knee"]


def _normalise(values: Sequence[float]) -> list[float] | None:
    low, high = min(values), max(values)
    if high == low:
        return None
    return [(v - low) / (high - low) for v in values]


def kneedle_convex_increasing(x: Sequence[float], y: Sequence[float], sensitivity: float = 1.0) -> int | None:
    """Index of the knee of a convex increasing curve sampled at ``x`` (increasing), or None (module docstring)."""
    n = len(x)
    if n != len(y):
        raise ValueError("x and y must have the same length")
    if n < 3:
        return None
    xn, yn = _normalise(x), _normalise(y)
    if xn is None or yn is None:
        return None
    xt = [1.0 - v for v in reversed(xn)]
    yt = [1.0 - v for v in reversed(yn)]
    d = [yt[i] - xt[i] for i in range(n)]
    maxima = [i for i in range(n) if d[i] >= d[max(i - 1, 0)] and d[i] >= d[min(i + 1, n - 1)]]
    minima = {i for i in range(n) if d[i] <= d[max(i - 1, 0)] and d[i] <= d[min(i + 1, n - 1)]}
    if not maxima:
        return None
    mean_dx = abs(sum(xt[i + 1] - xt[i] for i in range(n - 1)) / (n - 1))
    thresholds = [d[i] - sensitivity * mean_dx for i in maxima]
    maxima_set = set(maxima)
    next_maximum = 0
    threshold = 0.0
    threshold_index = maxima[0]
    active = True
    for i in range(maxima[0], n - 1):
        if i in maxima_set:
            threshold = thresholds[next_maximum]
            threshold_index = i
            next_maximum += 1
            active = True
        if i in minima:
            threshold = 0.0
            active = False
        if active and d[i + 1] < threshold:
            return n - 1 - threshold_index
    return None


@dataclass(frozen=True)
class Knee:
    users: int | None
    bracket: tuple[int, int] | None
    reason: str


def latency_knee(users: Sequence[int], values: Sequence[float | None], min_rise: float = MIN_RISE) -> Knee:
    """The knee of ``values`` (a p99, in any unit) against ``users`` (increasing); see the module docstring."""
    points = [(u, v) for u, v in zip(users, values, strict=True) if v is not None and u > 0]
    if len(points) < 3:
        return Knee(None, None, f"needs at least 3 steps with latencies, got {len(points)}")
    xs = [math.log2(u) for u, _ in points]
    ys = list(itertools.accumulate((float(v) for _, v in points), max))
    low = min(ys)
    rise = (max(ys) - low) / low if low > 0 else math.inf
    if rise < min_rise:
        return Knee(None, None, f"no knee: p99 rose only {100 * rise:.0f}% over the sweep")
    index = kneedle_convex_increasing(xs, ys)
    if index is None:
        return Knee(None, None, "no knee: the curve does not bend (Kneedle found none)")
    knee_users = points[index][0]
    if index == len(points) - 1:
        return Knee(knee_users, None, "the curve bends only at the last step: the knee may lie beyond the sweep")
    return Knee(knee_users, (knee_users, points[index + 1][0]), "")
