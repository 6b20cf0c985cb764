"""Client discipline after a refusal (HTTP 429 or 503): when, if ever, to try again. Pure.

Policies (``--retry-policy``):

- ``honor`` (default): wait at least what the server asked — ``retry-after-ms`` (milliseconds), else
  ``Retry-After`` (seconds, or an HTTP date) — before this user's next attempt; without either, exponential
  backoff with full jitter: ``delay = uniform(0, min(backoff_max, backoff_base * 2 ** attempt))`` for the
  ``attempt``-th retry (from 0). At most ``max_retries`` retries per request.
- ``none``: record the failure and move on to the next request.
- ``naive``: retry at once, up to ``max_retries`` times (to show what a retry storm does).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime

__all__ = ["POLICIES", "RETRYABLE", "FlowConfig", "RetryPolicy", "retry_after_s"]

POLICIES = ("honor", "none", "naive")
RETRYABLE = frozenset({429, 503})


def retry_after_s(retry_after_ms: str | None, retry_after: str | None, now_epoch_s: float) -> float | None:
    """The server's requested wait in seconds: ``retry-after-ms`` first, then ``Retry-After`` (seconds or date)."""
    if retry_after_ms:
        try:
            return max(0.0, float(retry_after_ms) / 1000.0)
        except ValueError:
            pass
    if retry_after:
        value = retry_after.strip()
        try:
            return max(0.0, float(value))
        except ValueError:
            pass
        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - now_epoch_s)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    return None


@dataclass(frozen=True)
class RetryPolicy:
    name: str = "honor"
    max_retries: int = 3
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0

    def __post_init__(self) -> None:
        if self.name not in POLICIES:
            raise ValueError(f"retry policy must be one of {', '.join(POLICIES)}, got {self.name!r}")

    def delay_s(self, status: int, server_wait_s: float | None, attempt: int, rng: random.Random) -> float | None:
        """Seconds to wait before retry number ``attempt`` (from 0), or None when the request is not retried."""
        if self.name == "none" or status not in RETRYABLE or attempt >= self.max_retries:
            return None
        if self.name == "naive":
            return 0.0
        return self.wait_s(server_wait_s, attempt, rng)

    def wait_s(self, server_wait_s: float | None, attempt: int, rng: random.Random) -> float:
        """``honor``'s wait: the server's, else full-jitter exponential backoff."""
        if server_wait_s is not None:
            return server_wait_s
        return rng.uniform(0.0, min(self.backoff_max_s, self.backoff_base_s * 2**attempt))


@dataclass(frozen=True)
class FlowConfig:
    """How a user makes a client request: retry policy, fallback route, hedging (see :mod:`.flow`)."""

    policy: RetryPolicy = field(default_factory=RetryPolicy)
    fallbacks: tuple[str, ...] = ()
    fallback_on: frozenset[int] = RETRYABLE
    hedge_after_s: float | None = None
