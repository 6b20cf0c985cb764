"""The latency knee: the highest load before the tail bends away from the unloaded curve. Pure.

Between tested loads ``a < b``, with ``y`` the TTFT p99 made non-decreasing and ``d_b`` the decode step (ITL p50)
at ``b``, the tail *bends* when ``y_b > max(y_a * max(b / a, 1 + MIN_RISE), y_a + KNEE_STEPS * d_b)``: faster than
the load, by ``MIN_RISE``, and by more than a few decode steps. A bend whose next valid step falls back to its
threshold is a *spike*, set aside. The knee is the lower
end of the first segment that bends, the bracket the segment; confidence is low when that is the first or the last.
:func:`knee_resamples` says how sure the knee is of its samples. docs/methodology.md, "The latency knee".
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from locust_llm.measure.histogram import Histogram
from locust_llm.measure.thresholds import KNEE_STEPS, MIN_RISE

__all__ = ["RESAMPLES", "Knee", "knee_resamples", "latency_knee", "share_of", "threshold_ms"]

RESAMPLES = 200
"""Resamples of the knee's block bootstrap: the share it gives is within about 3 points of its limit."""


def threshold_ms(load_a: float, p99_a: float, load_b: float, decode_ms_b: float | None = None) -> float:
    """The p99 at ``load_b`` above which the segment from ``load_a`` (whose p99 is ``p99_a``) bends (module
    docstring); without a decode step (ITL, E2E), only the proportional and relative rises count."""
    proportional = p99_a * max(load_b / load_a, 1 + MIN_RISE)
    return max(proportional, p99_a + KNEE_STEPS * (decode_ms_b or 0.0))


@dataclass(frozen=True)
class Knee:
    """The knee's load (None: none found), the bracket the bend lies in, why, and how sure (``high`` or ``low``)."""

    users: float | None
    bracket: tuple[float, float] | None
    reason: str
    confidence: str = "low"


def latency_knee(
    loads: Sequence[float],
    values: Sequence[float | None],
    decode_ms: Sequence[float | None] | None = None,
    usable: Sequence[bool] | None = None,
) -> Knee:
    """The knee of ``values`` (a p99 in ms) against ``loads`` (increasing), with each load's decode step ``decode_ms``
    (the module docstring's rule); a step not ``usable`` (an invalid step) never sets a spike aside."""
    steps = decode_ms if decode_ms is not None else [None] * len(loads)
    valid = usable if usable is not None else [True] * len(loads)
    points = [(u, v, d, ok) for u, v, d, ok in zip(loads, values, steps, valid, strict=True) if v is not None and u > 0]
    if len(points) < 2:
        return Knee(None, None, f"needs at least 2 loads with latencies, got {len(points)}")
    spikes: list[str] = []
    first, tail = points[0][0], float(points[0][1])  # the last load kept and its running maximum of the p99
    a = first
    for j in range(1, len(points)):
        b, raw, d, _ = points[j]
        limit = threshold_ms(a, tail, b, d)
        if raw <= limit:
            a, tail = b, max(tail, float(raw))  # a p99 that falls as the load grows is noise, not a recovery
            continue
        after = points[j + 1] if j + 1 < len(points) else None
        if after is not None and after[3] and after[1] <= limit:
            spikes.append(f"the p99 at {b:g} ({raw:.0f} ms) fell back to {after[1]:.0f} ms at {after[0]:g}")
            continue
        where = f"the tail's p99 rose from {tail:.0f} to {raw:.0f} ms (over {limit:.0f} bends)" + _aside(spikes)
        if a == first:
            return Knee(a, (a, b), f"{where} already between the first two loads: the knee may lie below {a:g}")
        if after is None:
            return Knee(a, (a, b), f"{where} only at the last step: extend the sweep to confirm the bend")
        return Knee(a, (a, b), where, "high")
    rise = tail / float(points[0][1]) - 1 if points[0][1] else 0.0
    return Knee(
        None,
        None,
        f"no knee up to {points[-1][0]:g}: the tail's p99 rose {100 * rise:.0f}% over the sweep, never faster than "
        "the load (extend the sweep, or add steps)" + _aside(spikes),
    )


def _aside(spikes: list[str]) -> str:
    """The spikes set aside, for a knee's reason."""
    return f"; set aside as spikes: {'; '.join(spikes)}" if spikes else ""


def knee_resamples(
    loads: Sequence[float],
    blocks: Sequence[Sequence[Histogram]],
    decode_ms: Sequence[float | None],
    resamples: int = RESAMPLES,
    seed: int = 0,
    usable: Sequence[bool] | None = None,
) -> list[tuple[float | None, float]] | None:
    """The knees of bootstrap resamples of the steps, each with the share of resamples that find it (most found
    first; ``None``: no knee). Each resample draws, for each load, as many of its one-second blocks of TTFT samples
    (``blocks``: the step's, by the second they were observed in) as it has, with replacement, so that a second's
    burst stays together, and finds the knee of the resampled p99s; seeded, so a report is the same each time it is
    made (``usable``: as :func:`latency_knee`'s). None without blocks."""
    if not any(blocks):
        return None
    rng = random.Random(seed)
    found: Counter[float | None] = Counter()
    for _ in range(resamples):
        p99s: list[float | None] = []
        for step_blocks in blocks:
            if not step_blocks:
                p99s.append(None)
                continue
            drawn = Histogram(precision=step_blocks[0].precision)
            for _ in step_blocks:
                drawn.merge(rng.choice(step_blocks))
            p99s.append(drawn.quantile(0.99) / 1e6)
        found[latency_knee(loads, p99s, decode_ms, usable).users] += 1
    return [(knee, count / resamples) for knee, count in found.most_common()]


def share_of(resampled: Sequence[Sequence[Any]] | None, knee: float | None) -> float | None:
    """The share of resamples (:func:`knee_resamples`, or their JSON lists) that find ``knee``: the knee's
    agreement."""
    if resampled is None:
        return None
    return float(sum(share for found, share in resampled if found == knee))
