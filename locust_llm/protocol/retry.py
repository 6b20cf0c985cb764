"""Client discipline after a refusal (HTTP 429 or 503), and after server-side failures. Pure.

``honor`` waits what the server asked (``retry-after-ms``, else ``Retry-After``), else full jitter ``uniform(0,
min(backoff_max, backoff_base * 2 ** attempt))``, never "retry now" for an unusable value; after client requests
that failed on the server's side it backs off the same way (:meth:`RetryPolicy.error_backoff`). ``none`` moves on;
``naive`` retries at once. Every wait is capped at ``--max-retry-wait``.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime

from locust_llm.protocol.metrics import Outcome

__all__ = ["POLICIES", "RETRYABLE", "SERVER_ERRORS", "FlowConfig", "RetryPolicy", "Wait", "retry_after_s"]

POLICIES = ("honor", "none", "naive")
RETRYABLE = frozenset({429, 503})  # a 529 acts as a 503 (RequestResult.status)
SERVER_ERRORS = frozenset(
    {
        Outcome.HTTP_5XX,
        Outcome.HTTP_OTHER,
        Outcome.STREAM_ERROR,
        Outcome.CONNECTION,
        Outcome.MALFORMED,
        Outcome.EMPTY,
        Outcome.TRUNCATED,
        Outcome.NOT_SSE,
    }
)
"""Failures on the server's side (a 5xx, a reset, a body that is not a stream or breaks the protocol, an error sent in
the stream): under ``honor`` a user backs off after them (:meth:`RetryPolicy.error_backoff`)."""


def _seconds(text: str, scale: float) -> float | None:
    try:
        value = float(text) * scale
    except (ValueError, OverflowError):
        return None
    return value if math.isfinite(value) and value >= 0 else None


def retry_after_s(retry_after_ms: str | None, retry_after: str | None, now_epoch_s: float) -> float | None:
    """The server's requested wait in seconds: ``retry-after-ms`` first, then ``Retry-After`` (seconds or an HTTP
    date); None when neither is usable (see the module docstring)."""
    if retry_after_ms:
        value = _seconds(retry_after_ms.strip(), 0.001)
        if value is not None:
            return value
    if not retry_after:
        return None
    text = retry_after.strip()
    value = _seconds(text, 1.0)
    if value is not None or text.lstrip("+-").replace(".", "", 1).isdigit():
        return value
    try:
        wait = parsedate_to_datetime(text).timestamp() - now_epoch_s
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return wait if wait > 0 else None


@dataclass(frozen=True)
class Wait:
    """A wait before trying a model again: its length, and whether the cap cut it short."""

    seconds: float
    capped: bool = False


@dataclass(frozen=True)
class RetryPolicy:
    name: str = "honor"
    max_retries: int = 3
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    max_wait_s: float = 60.0

    def __post_init__(self) -> None:
        if self.name not in POLICIES:
            raise ValueError(f"retry policy must be one of {', '.join(POLICIES)}, got {self.name!r}")

    def retries(self, status: int, attempt: int) -> bool:
        """Whether retry number ``attempt`` (from 0) of a request refused with ``status`` is made."""
        return self.name != "none" and status in RETRYABLE and attempt < self.max_retries

    def delay_s(self, status: int, wait: Wait | None, attempt: int) -> float | None:
        """Seconds before retry number ``attempt`` (from 0) of a request refused with ``status``, or None when it is
        not retried: ``naive`` at once; ``honor`` after ``wait`` (the refusal's :meth:`wait`, drawn once when it was
        recorded; none drawn: at once)."""
        if not self.retries(status, attempt):
            return None
        if self.name == "naive" or wait is None:
            return 0.0
        return wait.seconds

    def error_backoff(self, failures: int, rng: random.Random) -> Wait | None:
        """``honor``'s pause after ``failures`` client requests in a row failed on the server's side (see
        :data:`SERVER_ERRORS`): full jitter ``uniform(0, min(backoff_max, backoff_base * 2 ** (failures - 1)))``, at
        most ``max_wait_s``; None under the other policies and after a success."""
        if self.name != "honor" or failures < 1:
            return None
        return self.wait(None, failures - 1, rng)

    def wait(self, server_wait_s: float | None, attempt: int, rng: random.Random) -> Wait:
        """``honor``'s wait: the server's, else full-jitter exponential backoff; at most ``max_wait_s``, saying whether
        the cap applied. Draws the jitter once per call."""
        if server_wait_s is None:
            wanted = rng.uniform(0.0, min(self.backoff_max_s, self.backoff_base_s * 2**attempt))
        else:
            wanted = server_wait_s
        if wanted > self.max_wait_s:
            return Wait(self.max_wait_s, True)
        return Wait(wanted)


@dataclass(frozen=True)
class FlowConfig:
    """How a user makes a client request: retry policy, fallback route, hedging (see :mod:`locust_llm.users.flow`)."""

    policy: RetryPolicy = field(default_factory=RetryPolicy)
    fallbacks: tuple[str, ...] = ()
    fallback_on: frozenset[int] = RETRYABLE
    hedge_after_s: float | None = None
    primaries: tuple[tuple[str, float], ...] = ()
    """With ``--routes``: the routes a client request starts on, drawn by weight (empty: the user's model)."""
    fallback_causes: frozenset[str] = frozenset()
    """Besides statuses, what else sends an attempt to the next route: ``timeout``, ``connect_error``."""
    hedge_to: str | None = None
    """The route a hedge goes to (None: the next of the route, as ``--hedge-ttft-ms`` does)."""
