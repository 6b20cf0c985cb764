"""What a step row says about the server's capacity beyond its latencies: a queue, errors, keeping up. Pure.

- **A sustained queue**: the server's median over the steady window, ``waiting_p50 > max(QUEUE, QUEUE_SHARE *
  running_p50)``: requests wait for the server, whatever the latency curve shows.
- **The error budget**: ``k`` of ``n`` client requests failed other than with HTTP 429 (the provider cap's) and
  ``k / n`` exceeds the budget ``b`` beyond chance, ``P(X >= k | Binomial(n, b)) < ERROR_ALPHA``.
- **Behind** (open loop): arrivals dropped, or the backlog grew by more than ``BACKLOG_Z * sqrt(var + 2 L)``
  (``L`` the in-flight p50; ``var`` the arrival count's own where a row gives only the offered rate). Failures count
  as ended: the error budget judges them.
The sweep, the search and the recommendation read these rules (docs/methodology.md, "Evidence of capacity").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from locust_llm.measure.thresholds import BACKLOG_Z, ERROR_ALPHA, QUEUE, QUEUE_SHARE

__all__ = ["ErrorShare", "behind", "error_share", "over_budget", "server_queue"]


def _number(row: Mapping[str, Any], key: str) -> float | None:
    value = row.get(key)
    return None if value is None or value == "" else float(value)


def server_queue(row: Mapping[str, Any]) -> tuple[float, float] | None:
    """``(waiting, running)`` medians when the row shows a sustained queue (module docstring), else None."""
    waiting, running = _number(row, "server_waiting_p50"), _number(row, "server_running_p50")
    if waiting is None or not _number(row, "server_scrapes"):
        return None
    return (waiting, running or 0.0) if waiting > max(QUEUE, QUEUE_SHARE * (running or 0.0)) else None


class ErrorShare(tuple[int, int]):
    """``(failed, of)``: client requests that failed other than with HTTP 429, and all client requests."""

    @property
    def share(self) -> float:
        return self[0] / self[1] if self[1] else 0.0


def error_share(row: Mapping[str, Any]) -> ErrorShare:
    """The row's failures other than HTTP 429: of client requests (their final attempt's status), else of attempts
    (rows without client figures)."""
    clients = int(_number(row, "client_requests") or 0)
    if clients:
        failed = clients - int(_number(row, "client_ok") or 0) - int(_number(row, "client_429") or 0)
        return ErrorShare((max(0, failed), clients))
    requests = int(_number(row, "requests") or 0)
    failed = int(_number(row, "errors") or 0) - int(_number(row, "status_429") or 0)
    return ErrorShare((max(0, failed), requests))


def over_budget(row: Mapping[str, Any], budget: float) -> ErrorShare | None:
    """The row's :class:`ErrorShare` when it exceeds ``budget`` beyond chance (module docstring), else None."""
    errors = error_share(row)
    failed, of = errors
    if not of or errors.share <= budget:
        return None
    from scipy.stats import binom  # here: importing scipy.stats costs a process 0.5 s (see measure.intervals)

    return errors if float(binom.sf(failed - 1, of, budget)) < ERROR_ALPHA else None


def behind(row: Mapping[str, Any]) -> str | None:
    """Why an open-loop step fell behind its offered rate (module docstring), or None when it kept up. The backlog's
    growth is the row's ``backlog_growth`` (arrivals less dropped less ended, counted); a row without it (an older
    CSV) is judged on its offered rate, whose count has its own Poisson noise."""
    dropped = int(_number(row, "dropped") or 0)
    if dropped:
        return f"{dropped} arrivals dropped at --max-in-flight"
    ended = _number(row, "client_requests") or 0.0
    growth, variance = _number(row, "backlog_growth"), 0.0
    if growth is None:
        counted = _number(row, "arrivals")
        expected = (_number(row, "offered_req_s") or 0.0) * (_number(row, "duration_s") or 0.0)
        growth, variance = (
            (counted if counted is not None else expected) - ended,
            0.0 if counted is not None else expected,
        )
    limit = BACKLOG_Z * math.sqrt(variance + 2 * max(1.0, _number(row, "in_flight_p50") or 0.0))
    if growth <= limit:
        return None
    return f"{ended:.0f} client requests ended, a backlog growing by {growth:.0f} (noise {limit:.0f})"
