"""A mergeable log-linear histogram of non-negative integers (nanoseconds, token counts). Pure.

With ``u = value // unit`` and ``p`` bits of precision (10): below ``2**p`` each ``u`` has its own bucket; above,
with ``e = u.bit_length() - p``, index ``= 2**(p-1) * e + (u >> e)``, so a bucket spans at most ``2**-(p-1)`` of its
lower bound and its midpoint is within ``2**-p`` (0.1 %) of every value in it. ``count``, ``sum``, ``min`` and ``max``
are exact; merging adds counts. ``quantile(q)`` is the nearest-rank sample, its bucket's midpoint within
``[min, max]``.
"""

from __future__ import annotations

from itertools import chain
from math import ceil
from typing import Any

import numpy as np

__all__ = ["PRECISION", "Histogram"]

PRECISION = 10
"""Default linear bits: buckets at most 0.2 % wide (see the module docstring)."""

VECTOR_MIN_GAPS = 256
"""From this many gaps on, :meth:`Histogram.record_gap_runs` has numpy do the per-gap work."""

LEGACY_PRECISION = 7
"""The precision assumed for a wire form that does not name its own (the first wire form's)."""


def bucket_bounds(index: int, precision: int = PRECISION) -> tuple[int, int]:
    """Half-open ``[low, high)`` range of units covered by bucket ``index``."""
    if index < 1 << precision:
        return index, index + 1
    half = 1 << (precision - 1)
    e = index // half - 1
    mantissa = index - half * e
    return mantissa << e, (mantissa + 1) << e


def _gap_array(runs: list[list[int]], vector_min: int) -> tuple[Any, int] | None:
    """The gaps of ``runs`` (each at least two times) as one int64 array, negative ones 0 (as :meth:`Histogram.record`
    clamps them), and its maximum; ``None`` when there are fewer than ``vector_min`` gaps or numpy's integers would not
    be exact (a time beyond int64, a gap of 2**52 or more, a sum that could pass 2**62)."""
    lengths = [len(run) for run in runs]
    total = sum(lengths)
    if total - len(runs) < max(vector_min, 1):
        return None
    try:
        flat = np.fromiter(chain.from_iterable(runs), dtype=np.int64, count=total)
    except OverflowError:
        return None
    boundaries = np.cumsum(lengths[:-1], dtype=np.int64) - 1  # the differences across two runs: not gaps
    return _exact(np.maximum(np.delete(np.diff(flat), boundaries), 0))


def _exact(values: Any) -> tuple[Any, int] | None:
    """A non-empty int64 array of non-negative values and its maximum, or ``None`` when numpy's integers would not be
    exact for it (a value of 2**52 or more, a sum that could pass 2**62)."""
    top = int(values.max())
    return None if top >= 1 << 52 or top * len(values) >= 1 << 62 else (values, top)


class Histogram:
    """Log-linear histogram; see the module docstring for the bucket layout and error bound."""

    __slots__ = ("_limit", "_shift", "buckets", "count", "max", "min", "precision", "sum", "unit")

    def __init__(self, unit: int = 1000, precision: int = PRECISION) -> None:
        if unit < 1:
            raise ValueError(f"unit must be a positive integer, got {unit}")
        if not 2 <= precision <= 16:
            raise ValueError(f"precision must be an integer from 2 to 16 (bits), got {precision}")
        self.unit = unit
        self.precision = precision
        self._limit = 1 << precision
        self._shift = precision - 1
        self.buckets: dict[int, int] = {}
        self.count = 0
        self.sum = 0
        self.min = 0
        self.max = 0

    def clear(self) -> None:
        self.buckets.clear()
        self.count = self.sum = self.min = self.max = 0

    def _index(self, units: int) -> int:
        """The index of the bucket holding ``units`` (the module docstring's layout)."""
        if units < self._limit:
            return units
        e = units.bit_length() - self.precision
        return (e << self._shift) + (units >> e)

    def record(self, value: int) -> None:
        """Add one sample (a non-negative integer; negative values are clamped to 0)."""
        if value < 0:
            value = 0
        units = value // self.unit
        if units < self._limit:
            index = units
        else:
            e = units.bit_length() - self.precision
            index = (e << self._shift) + (units >> e)
        buckets = self.buckets
        buckets[index] = buckets.get(index, 0) + 1
        if self.count == 0:
            self.min = self.max = value
        elif value < self.min:
            self.min = value
        elif value > self.max:
            self.max = value
        self.count += 1
        self.sum += value

    def record_gaps(self, times: list[int], start: int = 1, stop: int | None = None) -> None:
        """Record ``times[i] - times[i - 1]`` for ``i`` in ``range(start, stop)``: the same as that many
        :meth:`record` calls (a request's inter-token gaps), in one loop of local operations."""
        stop = len(times) if stop is None else stop
        if stop - start < 1:
            return
        unit, limit, precision, shift = self.unit, self._limit, self.precision, self._shift
        buckets = self.buckets
        get = buckets.get
        low, high = (self.min, self.max) if self.count else (None, None)
        total = 0
        previous = times[start - 1]
        for i in range(start, stop):
            now = times[i]
            value = now - previous
            previous = now
            if value < 0:
                value = 0
            units = value // unit
            if units < limit:
                index = units
            else:
                e = units.bit_length() - precision
                index = (e << shift) + (units >> e)
            buckets[index] = get(index, 0) + 1
            if low is None or high is None:
                low = high = value
            elif value < low:
                low = value
            elif value > high:
                high = value
            total += value
        self.min, self.max = low, high  # type: ignore[assignment]
        self.count += stop - start
        self.sum += total

    def record_gap_runs(self, runs: list[list[int]], vector_min: int | None = None) -> None:
        """Record the gaps of every list in ``runs``, as :meth:`record_gaps` on each would (many requests' ITLs).

        From ``vector_min`` gaps on (default :data:`VECTOR_MIN_GAPS`), numpy does the per-gap work (differences,
        buckets, counts) over all of them at once, with the same integers: a bucket's index comes from the exact
        ``bit_length`` (the exponent ``frexp`` gives for a float that holds the units exactly, below 2**52), and the
        sum, minimum and maximum are exact in int64. Values outside those bounds, and fewer gaps, take the loop."""
        runs = [run for run in runs if len(run) > 1]
        exact = _gap_array(runs, VECTOR_MIN_GAPS if vector_min is None else vector_min)
        if exact is None:
            for run in runs:
                self.record_gaps(run)
            return
        self._record_exact(*exact)

    def record_values(self, values: list[int]) -> None:
        """Record every value of ``values``, as that many :meth:`record` calls would; numpy does the per-value work
        (as in :meth:`record_gap_runs`) when there are :data:`VECTOR_MIN_GAPS` or more and its integers are exact."""
        if len(values) >= VECTOR_MIN_GAPS:
            try:
                exact = _exact(np.maximum(np.fromiter(values, dtype=np.int64, count=len(values)), 0))
            except OverflowError:
                exact = None
            if exact is not None:
                self._record_exact(*exact)
                return
        for value in values:
            self.record(value)

    def _record_exact(self, values: Any, top: int) -> None:
        """Record a non-empty int64 array of non-negative values whose maximum is ``top`` (below 2**52, and ``top``
        times their count below 2**62, so that numpy's integers are exact)."""
        units = values // self.unit
        e = np.maximum(np.frexp(units.astype(np.float64))[1] - self.precision, 0)  # frexp's exponent: bit_length
        index = np.where(units < self._limit, units, (e << self._shift) + (units >> e))
        keys, counts = np.unique(index, return_counts=True)
        buckets = self.buckets
        get = buckets.get
        for key, count in zip(keys.tolist(), counts.tolist(), strict=True):
            buckets[key] = get(key, 0) + count
        low, high = int(values.min()), top
        if self.count:
            low, high = min(low, self.min), max(high, self.max)
        self.min, self.max = low, high
        self.count += len(values)
        self.sum += int(values.sum())

    def merge(self, other: Histogram) -> Histogram:
        """Add ``other``'s samples to this histogram (in place) and return self. A finer ``other`` is coarsened to
        this precision on the way, exactly: each of its buckets lies inside one of ours (a file written when a
        histogram was kept finer still reads)."""
        if other.unit != self.unit:
            raise ValueError(f"cannot merge histograms with units {self.unit} and {other.unit}")
        if other.precision < self.precision:
            raise ValueError(f"cannot merge histograms with precisions {self.precision} and {other.precision} bits")
        if other.count == 0:
            return self
        buckets = self.buckets
        if other.precision == self.precision:
            for index, n in other.buckets.items():
                buckets[index] = buckets.get(index, 0) + n
        else:
            for index, n in other.buckets.items():
                ours = self._index(bucket_bounds(index, other.precision)[0])
                buckets[ours] = buckets.get(ours, 0) + n
        if self.count == 0:
            self.min, self.max = other.min, other.max
        else:
            self.min = min(self.min, other.min)
            self.max = max(self.max, other.max)
        self.count += other.count
        self.sum += other.sum
        return self

    def copy(self) -> Histogram:
        return Histogram(self.unit, self.precision).merge(self)

    @property
    def mean(self) -> float:
        return self.sum / self.count if self.count else 0.0

    def quantile(self, q: float) -> float:
        """Nearest-rank quantile (0 <= q <= 1), in the histogram's raw value scale; 0.0 when empty."""
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile must be within [0, 1], got {q}")
        if self.count == 0:
            return 0.0
        rank = max(1, ceil(q * self.count))
        seen = 0
        for index in sorted(self.buckets):
            seen += self.buckets[index]
            if seen >= rank:
                low, high = bucket_bounds(index, self.precision)
                mid = (low + high) * self.unit / 2
                return float(min(max(mid, self.min), self.max))
        return float(self.max)  # unreachable: counts add up to self.count

    def to_wire(self) -> dict[str, Any]:
        """Compact, msgpack/JSON-friendly form: bucket indices delta-encoded, interleaved with counts."""
        flat: list[int] = []
        previous = 0
        for index in sorted(self.buckets):
            flat.append(index - previous)
            flat.append(self.buckets[index])
            previous = index
        return {
            "u": self.unit,
            "p": self.precision,
            "n": self.count,
            "s": self.sum,
            "lo": self.min,
            "hi": self.max,
            "b": flat,
        }

    @classmethod
    def from_wire(cls, wire: dict[str, Any]) -> Histogram:
        try:
            hist = cls(int(wire["u"]), int(wire.get("p", LEGACY_PRECISION)))
            flat = wire["b"]
            index = 0
            for i in range(0, len(flat), 2):
                index += int(flat[i])
                hist.buckets[index] = int(flat[i + 1])
            hist.count, hist.sum = int(wire["n"]), int(wire["s"])
            hist.min, hist.max = int(wire["lo"]), int(wire["hi"])
        except (AttributeError, KeyError, TypeError, ValueError, IndexError) as exc:
            raise ValueError(f"malformed histogram wire form: {exc!r}") from exc
        if sum(hist.buckets.values()) != hist.count:
            raise ValueError("malformed histogram wire form: bucket counts do not add up to 'n'")
        return hist

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Histogram):
            return NotImplemented
        return (self.unit, self.precision, self.buckets, self.count, self.sum, self.min, self.max) == (
            other.unit,
            other.precision,
            other.buckets,
            other.count,
            other.sum,
            other.min,
            other.max,
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Histogram(count={self.count}, min={self.min}, max={self.max}, unit={self.unit})"
