"""Distribution-free confidence intervals of a quantile, from the order statistics of a histogram. Pure.

For the q-quantile of ``n`` samples the interval is ``[X_(l), X_(u)]``, the ranks ``l < u`` with
``P(l <= B < u) >= 1 - alpha`` for ``B ~ Binomial(n, q)``; an end past the sample is open (``None``). From a
histogram each end is its bucket's outer bound: at most one bucket wider. docs/methodology.md, "Intervals".
"""

from __future__ import annotations

import bisect
import functools
import itertools

from locust_llm.measure.histogram import Histogram, bucket_bounds

__all__ = ["CONFIDENCE", "Ranks", "quantile_interval", "quantile_ranks", "rank_bounds"]

CONFIDENCE = 0.95


@functools.lru_cache(maxsize=1024)
def quantile_ranks(n: int, q: float, confidence: float = CONFIDENCE) -> tuple[int | None, int | None]:
    """The ranks ``(l, u)`` (1-based) bracketing the ``q``-quantile of ``n`` samples at ``confidence``; ``None`` for
    an end past the sample. Cached: a binomial quantile costs 40 us, and a finished step's counts never change while
    its rows are made again each second."""
    if n < 1:
        return None, None
    tail = (1 - confidence) / 2
    from scipy.stats import binom  # here: importing scipy.stats costs a process 0.5 s, and a worker never needs it

    low = int(binom.ppf(tail, n, q))  # the smallest k with P(B <= k) >= tail, so P(B < k) < tail
    high = int(binom.ppf(1 - tail, n, q)) + 1  # the smallest u with P(B <= u - 1) >= 1 - tail
    return (low if low >= 1 else None), (high if high <= n else None)


class Ranks:
    """A histogram's samples by rank: the bounds of the bucket holding any rank, from one sorted pass."""

    def __init__(self, hist: Histogram) -> None:
        self.hist = hist
        self.indexes = sorted(hist.buckets)
        self.cumulative = list(itertools.accumulate(hist.buckets[i] for i in self.indexes))

    def bounds(self, rank: int) -> tuple[float, float]:
        """The bounds (raw values) of the bucket holding the sample of ``rank`` (1-based), clamped to the samples'
        minimum and maximum."""
        hist = self.hist
        at = bisect.bisect_left(self.cumulative, rank)
        if at >= len(self.indexes):
            return float(hist.max), float(hist.max)
        low, high = bucket_bounds(self.indexes[at], hist.precision)
        return float(max(low * hist.unit, hist.min)), float(min(high * hist.unit, hist.max))

    def interval(self, q: float, confidence: float = CONFIDENCE) -> tuple[float | None, float | None]:
        """The interval of the module docstring, in raw values; ``(None, None)`` when the histogram is empty."""
        low_rank, high_rank = quantile_ranks(self.hist.count, q, confidence)
        low = None if low_rank is None else self.bounds(low_rank)[0]
        high = None if high_rank is None else self.bounds(high_rank)[1]
        return low, high


def rank_bounds(hist: Histogram, rank: int) -> tuple[float, float]:
    """:meth:`Ranks.bounds` of one rank."""
    return Ranks(hist).bounds(rank)


def quantile_interval(hist: Histogram, q: float, confidence: float = CONFIDENCE) -> tuple[float | None, float | None]:
    """The interval of the module docstring, in the histogram's raw values; ``(None, None)`` when it is empty."""
    return Ranks(hist).interval(q, confidence)
