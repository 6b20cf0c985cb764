"""Locust's ``ITL`` rows from one call per request instead of one ``request`` event per token gap.

Firing Locust's ``request`` event goes through ``EventHook.fire``, the runner's listener, ``RequestStats.log_request``
and two ``StatsEntry.log`` calls per gap: at 512 streams that was a tenth of the generator's CPU (DESIGN.md "Hot
path"). When the runner's own listener is the event's only listener, :func:`log_gaps` applies a request's gaps to the
same two entries (the ``ITL`` row and the total) exactly as that many ``log`` calls would, made in the same second:
the same request count, per-second counts, sum, min, max, rounded response-time buckets and content length. Any
other listener (a plugin, a user's own hook) keeps receiving every event: :func:`sole_runner_listener` says when
batching is allowed, and is asked on every request. :func:`log_one` does the same for one event (``TTFT``, ``E2E``):
what the runner's listener does, without ``EventHook.fire`` around it. Both take an optional wall-clock time ``at``:
the recorder logs a request's rows a moment after it ended, several requests together
(:class:`~locust_llm.recorder.Recorder`), and :func:`log_at` then does what ``StatsEntry.log`` does at that time.

``tests/unit/test_locust_batch.py`` compares every field of the entries (and the error table) with per-event logging,
so a Locust upgrade that changes ``StatsEntry.log`` or the runner's listener fails there rather than drifting.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import locust.stats as locust_stats
from locust.stats import RequestStats

__all__ = ["RUNNER_LISTENER", "log_at", "log_gaps", "log_one", "sole_runner_listener"]

_LOCUST_BUCKET = locust_stats.bucket_response_time

_SUM_IN_ORDER = sys.version_info < (3, 12)
"""``sum()`` of floats adds them one by one, in order, in a C double before Python 3.12 (bit for bit what Locust's
``total_response_time += t`` per event gives); from 3.12 on it compensates rounding, so the sum is then a loop."""

RUNNER_LISTENER = "Runner.__init__.<locals>.on_request"
"""The qualified name of the listener every Locust runner adds to ``events.request`` (it logs into its stats)."""


def sole_runner_listener(events: Any) -> bool:
    """True when Locust's runner listener is the only listener of ``events.request``."""
    handlers = getattr(events.request, "_handlers", None)
    return (
        isinstance(handlers, list)
        and len(handlers) == 1
        and getattr(handlers[0], "__qualname__", "") == RUNNER_LISTENER
    )


def log_one(
    stats: RequestStats,
    method: str,
    name: str,
    response_time: float,
    length: int,
    error: Exception | None,
    at: float | None = None,
) -> None:
    """What the runner's listener does with one ``request`` event (``exception=error``); with ``at``, as it would
    have done it at that wall-clock time (:func:`log_at`; no ``error`` then: Locust dates errors itself)."""
    if at is None:
        stats.log_request(method, name, response_time, length)  # type: ignore[arg-type]  # a float, as in log_gaps
        if error:
            stats.log_error(method, name, error)
        return
    assert error is None, "a failed request is logged when it ends"
    log_at(stats.total, at, response_time, length)
    log_at(stats.entries[(name, method)], at, response_time, length)


def log_at(entry: Any, at: float, response_time: float, length: int) -> None:
    """``StatsEntry.log(response_time, length)`` as Locust runs it at wall-clock time ``at`` (it reads
    ``time.time()`` itself): the per-second cache when a new second begins, the per-second count and the last
    request's time (never moved back by a request dated before one already logged), the response time."""
    second = int(at)
    last = entry.last_request_timestamp
    if entry.use_response_times_cache and last and second > int(last):
        entry._cache_response_times(second - 1)
    entry.num_requests += 1
    entry.num_reqs_per_sec[second] += 1
    if not last or at > last:
        entry.last_request_timestamp = at
    entry._log_response_time(response_time)
    entry.total_content_length += length


def log_gaps(
    stats: RequestStats, method: str, name: str, response_times_ms: Sequence[float], at: float | None = None
) -> None:
    """Log ``response_times_ms`` (content length 0) under ``(name, method)`` and the total, as that many
    ``stats.log_request`` calls in the same second would (that of ``at``, a wall-clock time, when given)."""
    if not response_times_ms:
        return
    first, rest = response_times_ms[0], response_times_ms[1:]
    low, high = (min(rest), max(rest)) if rest else (first, first)
    bucket: Callable[[float], int] = locust_stats.bucket_response_time  # looked up each time: a run may replace it
    if bucket is _LOCUST_BUCKET and high < 100:  # Locust's own rounding below 100 ms is round() (equal, tested)
        bucket = round
    rounded = Counter(map(bucket, rest))
    entries: tuple[Any, ...] = (stats.total, stats.entries[(name, method)])  # Locust types times as int; they are
    for entry in entries:  # floats in practice (every response time Locust users report)
        if at is None:
            entry.log(first, 0)  # the per-second cache and the request timestamp, as Locust does them
        else:
            log_at(entry, at, first, 0)
        if not rest:
            continue
        entry.num_requests += len(rest)
        entry.num_reqs_per_sec[int(entry.last_request_timestamp if at is None else at)] += len(rest)
        if _SUM_IN_ORDER:
            entry.total_response_time = sum(rest, entry.total_response_time)
        else:
            total = entry.total_response_time
            for value in rest:
                total += value
            entry.total_response_time = total
        entry.min_response_time = min(entry.min_response_time, low)
        entry.max_response_time = max(entry.max_response_time, high)
        buckets = entry.response_times
        for key, count in rounded.items():
            buckets[key] += count
