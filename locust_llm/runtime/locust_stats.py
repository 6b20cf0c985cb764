"""Locust's statistics rows logged in one call per request or batch instead of one event per row.

When the runner's own listener is the ``request`` event's only listener (:func:`sole_runner_listener`),
:func:`log_gaps`, :func:`log_one` and :func:`log_rows` change Locust's entries exactly as the events would have (the
same counts, per-second counts, sum, min, max, rounded buckets and content length); any other listener keeps
receiving every event. ``tests/unit/runtime/test_locust_stats.py`` compares every field with per-event logging.
"""

from __future__ import annotations

import csv
import gc
import logging
import math
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import chain, repeat
from operator import sub, truediv
from typing import Any

import gevent
import locust.stats as locust_stats
import numpy as np
from locust.stats import RequestStats

__all__ = [
    "RUNNER_LISTENER",
    "Row",
    "Times",
    "gaps_ms",
    "log_gaps",
    "log_one",
    "log_rows",
    "ship_flushed",
    "sole_runner_listener",
    "thin_history",
    "trim_per_second",
    "write_final_csvs",
]

_LOCUST_BUCKET = locust_stats.bucket_response_time

_SUM_IN_ORDER = sys.version_info < (3, 12)
"""``sum()`` of floats adds them one by one, in order, in a C double before Python 3.12 (bit for bit what Locust's
``total_response_time += t`` per event gives); from 3.12 on it compensates rounding, so the sum is then a loop."""

Times = Sequence[float] | np.ndarray
"""Response times in ms: a list of floats, or a float64 numpy array."""

logger = logging.getLogger("locust_llm")

RUNNER_LISTENER = "Runner.__init__.<locals>.on_request"
"""The qualified name of the listener every Locust runner adds to ``events.request`` (it logs into its stats)."""


FINAL_WRITE_NAMES = (
    "requests_csv_filehandle",
    "failures_csv_filehandle",
    "exceptions_csv_filehandle",
    "stats_history_csv_writer",
    "requests_csv",
    "failures_csv",
    "exceptions_csv",
    "_stats_history_data_rows",
    "stats_history_flush",
)
"""What :func:`write_final_csvs` uses of Locust's ``StatsCSVFileWriter`` (``runtime/contract.py`` checks them)."""


def write_final_csvs() -> None:
    """Locust's CSV writer writes every second, never at the end, and its files are closed right after ``quit``: its
    last write can miss the last second of requests. At ``quit`` its greenlet is stopped (else a process that yields
    after the files are closed logs ``I/O operation on closed file``) and its files written once more from the final
    statistics: the request, failure and exception tables whole, and one last row of history. A writer without
    :data:`FINAL_WRITE_NAMES` is left alone, with one line: its own last periodic write stands."""
    for obj in gc.get_objects():
        # type(), not isinstance(): isinstance reads __class__, which loads a lazy module's proxy (the openai SDK's)
        run = getattr(obj, "_run", None) if issubclass(type(obj), gevent.Greenlet) else None
        if getattr(run, "__name__", "") != "stats_writer":
            continue
        writer = getattr(run, "__self__", None)
        missing = [name for name in FINAL_WRITE_NAMES if not hasattr(writer, name)]
        if not isinstance(writer, locust_stats.StatsCSVFileWriter) or missing:
            logger.warning(
                "locust-llm: Locust's CSV writer has changed (%s): its own last write stands, which may miss the "
                "last second of requests",
                ", ".join(missing) or f"a {type(writer).__name__}",
            )
            continue
        obj.kill(block=False)
        try:
            _write_final(writer)
        except Exception as exc:  # a file already closed or gone, a changed signature: Locust's last write stands
            logger.error("locust-llm: could not write Locust's final CSV rows: %s: %s", type(exc).__name__, exc)


def _write_final(writer: Any) -> None:
    for handle, write in (
        (writer.requests_csv_filehandle, writer.requests_csv),
        (writer.failures_csv_filehandle, writer.failures_csv),
        (writer.exceptions_csv_filehandle, writer.exceptions_csv),
    ):
        handle.seek(0)
        handle.truncate()
        write(csv.writer(handle))
        handle.flush()
    writer._stats_history_data_rows(writer.stats_history_csv_writer, time.time())
    writer.stats_history_flush()


PER_SECOND_KEEP_S = 60
"""How many seconds of Locust's per-second counts :func:`trim_per_second` keeps (Locust reads the last 12)."""


def trim_per_second(stats: RequestStats, now_s: float) -> int:
    """Drops Locust's per-second request and failure counts dated more than ``PER_SECOND_KEEP_S`` before ``now_s``,
    in every entry and the total; returns how many went. Locust keeps one per second for the whole run (about 1 MiB
    an hour at 128 users) but reads only the last 12 s of them (``current_rps``, ``current_fail_per_sec``)."""
    oldest = int(now_s) - PER_SECOND_KEEP_S
    dropped = 0
    for entry in chain(stats.entries.values(), (stats.total,)):
        for per_second in (entry.num_reqs_per_sec, entry.num_fail_per_sec):
            old = [second for second in per_second if second < oldest]
            for second in old:
                del per_second[second]
            dropped += len(old)
    return dropped


HISTORY_KEEP = 1440
"""The most entries of Locust's chart history :func:`thin_history` leaves (the newest hour at one per 5 s, and as many
again for the rest of the run)."""


def thin_history(stats: RequestStats, keep: int = HISTORY_KEEP) -> int:
    """Past ``keep`` entries of Locust's chart history (``stats.history``: one per 5 s for the whole run, about 0.7 MiB
    an hour, drawn by its web UI and HTML report), keeps the newest ``keep // 2`` as they are and, before them, the
    first entry in each stretch of ``5 * 2**k`` seconds from the first, the smallest such stretch that leaves at most
    ``keep // 2``: the run stays drawn end to end, evenly, its last hour in full. Returns how many went."""
    history = stats.history
    if len(history) <= keep:
        return 0
    recent = keep // 2
    older = history[:-recent]
    try:
        times = [datetime.fromisoformat(entry["time"]).timestamp() for entry in older]
    except (KeyError, TypeError, ValueError):  # not Locust's own format: leave it as it is
        return 0
    stride = 5.0
    while (times[-1] - times[0]) / stride + 1 > recent:
        stride *= 2
    kept, last = [], None
    for entry, t in zip(older, times, strict=True):
        stretch = int((t - times[0]) // stride)
        if stretch != last:
            kept.append(entry)
            last = stretch
    history[: len(older)] = kept
    return len(older) - len(kept)


def ship_flushed(stats: RequestStats, data: dict[str, Any]) -> None:
    """A worker's report: rows logged into ``stats`` after Locust's own listener serialized (and cleared) it are added
    to ``data``, so that they go with this report rather than the next (after the last report, never): the master
    merges each entry of the list, and the total, as it merges Locust's own."""
    if "stats" not in data or "stats_total" not in data:
        return  # Locust's listener has not run (or reports otherwise): the rows are in its stats for its own
    data["stats"].extend(stats.serialize_stats())
    total = locust_stats.StatsEntry.unserialize(data["stats_total"], stats)
    total.extend(locust_stats.StatsEntry.unserialize(stats.total.get_stripped_report(), stats))
    data["stats_total"] = total.get_stripped_report()


def sole_runner_listener(events: Any) -> bool:
    """True when Locust's runner listener is the only listener of ``events.request``."""
    handlers = getattr(events.request, "_handlers", None)
    return (
        isinstance(handlers, list)
        and len(handlers) == 1
        and getattr(handlers[0], "__qualname__", "") == RUNNER_LISTENER
    )


def log_one(
    stats: RequestStats, method: str, name: str, response_time: float, length: int, error: Exception | None
) -> None:
    """What the runner's listener does with one ``request`` event (``exception=error``)."""
    stats.log_request(method, name, response_time, length)  # type: ignore[arg-type]  # a float, as in log_gaps
    if error:
        stats.log_error(method, name, error)


def log_gaps(stats: RequestStats, method: str, name: str, response_times_ms: Times) -> None:
    """Log ``response_times_ms`` (content length 0) under ``(name, method)`` and the total, as that many
    ``stats.log_request`` calls in the same second would."""
    if not len(response_times_ms):
        return
    first, rest = response_times_ms[0], _joined([response_times_ms[1:]], len(response_times_ms) - 1)
    run = None
    if len(rest):
        low, high = _extremes(rest)
        run = _Run(low=low, high=high, buckets=_buckets(rest, high))
    entries: tuple[Any, ...] = (stats.total, stats.entries[(name, method)])  # Locust types times as int; they are
    for entry in entries:  # floats in practice (every response time Locust users report)
        entry.log(first, 0)  # the per-second cache and the request timestamp, as Locust does them
        if run is not None:
            entry.num_requests += len(rest)
            entry.num_reqs_per_sec[int(entry.last_request_timestamp)] += len(rest)
            _add_times(entry, run, _sum_in_order(entry.total_response_time, rest))


Row = tuple[float, str, str, Times, int]
"""``(at, method, name, response_times_ms, length)``: one ``request`` event per value of ``response_times_ms``, each
with content length ``length``, all dated ``at`` (a wall-clock time)."""


def log_rows(stats: RequestStats, rows: Sequence[Row]) -> None:
    """Log ``rows`` (none failed), in order, as the runner's listener would have logged each of their events at its
    time ``at`` (``StatsEntry.log`` reads ``time.time()`` itself), except that a row dated before an entry's last
    request does not move that time back (rows logged since by others, at their own time, are not undone). A row's
    response times are a sequence of floats: a list, or a float64 numpy array (the recorder's ``ITL`` gaps).

    The rule, per entry (each row's ``(name, method)`` and the total), for each run of rows dated in one second ``s``
    (consecutive in ``rows``): the per-second cache of second ``s - 1`` is taken once, before the run, when the
    entry's last request was dated in an earlier second (an event dated in the same second as the one before it never
    takes it); then the run's events are added at once: the request count and that of second ``s``, the last request's
    time (the latest of the run, never moved back), the response times' sum (added one by one, in order, as the
    events would), minimum, maximum and rounded buckets, and the content length. That is what logging every event in
    turn gives, field for field (``tests/unit/runtime/test_locust_stats.py``); done per run instead of per event, a
    batch of requests costs a few calls per entry rather than a few per request, and from :data:`VECTOR_MIN_TIMES`
    times on numpy does the per-time work."""
    i, n = 0, len(rows)
    while i < n:
        second = int(rows[i][0])
        j = i + 1
        while j < n and int(rows[j][0]) == second:
            j += 1
        runs: dict[tuple[str, str], _Run] = {}
        in_order: list[Times] = []  # every row's times, for the total's sum
        for at, method, name, values, length in rows[i:j]:
            count = len(values)
            if not count:
                continue
            run = runs.get((name, method))
            if run is None:
                run = runs[name, method] = _Run()
            run.parts.append(values)
            run.count += count
            run.latest = max(run.latest, at)
            run.content += length * count
            in_order.append(values)
        if not runs:
            i = j
            continue
        total = _Run()
        for (name, method), run in runs.items():
            entry = stats.entries[(name, method)]
            _begin_run(entry, second, run.count, run.latest)
            times = _joined(run.parts, run.count)
            run.low, run.high = _extremes(times)
            run.buckets = _buckets(times, run.high)
            _add_times(entry, run, _sum_in_order(entry.total_response_time, times))
            total.latest = max(total.latest, run.latest)
            total.content += run.content
            total.low, total.high = min(total.low, run.low), max(total.high, run.high)
            total.count += run.count
            total.buckets.extend(run.buckets)
        _begin_run(stats.total, second, total.count, total.latest)
        _add_times(stats.total, total, _sum_in_order(stats.total.total_response_time, _joined(in_order, total.count)))
        i = j


@dataclass(slots=True, eq=False)
class _Run:
    """The events of one entry in a run of rows of one second (:func:`log_rows`)."""

    parts: list[Times] = field(default_factory=list)
    """The rows' response times, in order."""
    latest: float = 0.0
    content: int = 0
    count: int = 0
    low: float = math.inf
    high: float = -math.inf
    buckets: list[tuple[Any, int]] = field(default_factory=list)
    """``(rounded response time, events)``, a key perhaps more than once."""


def gaps_ms(runs: Sequence[Sequence[int]]) -> list[Times]:
    """Each run's gaps between consecutive times (ns), in ms, as ``(b - a) / 1e6`` gives them one by one: float64
    arrays (views of one array, for a batch of requests at once), or lists when a time does not fit an int64."""
    lengths = [len(run) for run in runs]
    try:
        flat = np.fromiter(chain.from_iterable(runs), dtype=np.int64, count=sum(lengths))
    except OverflowError:
        return [list(map(truediv, map(sub, run[1:], run), repeat(1e6))) for run in runs]
    ms = np.diff(flat) / 1e6  # int64 differences, exact; each then divided as a double, as Python divides an int
    out: list[Times] = []
    start = 0
    for n in lengths:
        out.append(ms[start : start + max(n - 1, 0)])
        start += n
    return out


def _extremes(times: Times) -> tuple[float, float]:
    """The smallest and the largest of ``times`` (not empty)."""
    if isinstance(times, np.ndarray):
        return float(times.min()), float(times.max())
    return min(times), max(times)


def _joined(parts: list[Times], count: int) -> Times:
    """``parts`` end to end (``count`` times in all): a list of floats, or a float64 array when a part is one or there
    are :data:`VECTOR_MIN_TIMES` or more."""
    if count < VECTOR_MIN_TIMES and all(type(part) is list for part in parts):
        return parts[0] if len(parts) == 1 else list(chain.from_iterable(parts))
    return np.concatenate([np.asarray(part, dtype=np.float64) for part in parts])


def _begin_run(entry: Any, second: int, count: int, latest: float) -> None:
    """The per-second cache, the request counts and the last request's time of ``count`` events dated in ``second``,
    the latest at ``latest`` (:func:`log_rows`)."""
    last = entry.last_request_timestamp
    if entry.use_response_times_cache and last and second > int(last):
        entry._cache_response_times(second - 1)
    entry.num_requests += count
    entry.num_reqs_per_sec[second] += count
    if not last or latest > last:
        entry.last_request_timestamp = latest


def _add_times(entry: Any, run: _Run, summed: float) -> None:
    """The response times of ``run`` (its minimum, maximum and buckets; ``summed``: the entry's sum with them added
    in order) and its content length, into ``entry``."""
    entry.total_response_time = summed
    low = run.low
    entry.min_response_time = low if entry.min_response_time is None else min(entry.min_response_time, low)
    entry.max_response_time = max(entry.max_response_time, run.high)
    buckets = entry.response_times
    for key, count in run.buckets:
        buckets[key] += count
    entry.total_content_length += run.content


def _sum_in_order(start: float, times: Times) -> float:
    """``start`` plus each of ``times`` in turn, as ``total_response_time += t`` per event gives (for an array:
    numpy's accumulate, which adds in order, one double at a time)."""
    if isinstance(times, np.ndarray):
        return float(np.add.accumulate(np.concatenate(([start], times)))[-1])
    if _SUM_IN_ORDER:
        return sum(times, start)
    for value in times:
        start += value
    return start


def _buckets(times: Times, high: float) -> list[tuple[Any, int]]:
    """``times`` rounded by Locust's ``bucket_response_time`` (looked up each time: a run may replace it), counted.
    Locust's own rounding below 100 ms is ``round()`` (half to even, to an int); for an array (:func:`_joined`)
    numpy's ``rint`` does it, which rounds each double the same way."""
    bucket: Callable[[float], Any] = locust_stats.bucket_response_time
    if not isinstance(times, np.ndarray):
        return list(Counter(map(bucket if bucket is not _LOCUST_BUCKET or high >= 100 else round, times)).items())
    if bucket is not _LOCUST_BUCKET or high >= 100:
        return list(Counter(map(bucket, times.tolist())).items())
    keys, counts = np.unique(np.rint(times), return_counts=True)
    return list(zip(keys.astype(np.int64).tolist(), counts.tolist(), strict=True))


VECTOR_MIN_TIMES = 256
"""From this many response times in a run on, numpy joins, sums, rounds and counts them (:func:`_joined`)."""
