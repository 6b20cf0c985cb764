"""Fail fast: a run whose every request fails the same systematic way stops with one clear line. Pure.

When ``threshold`` (10) attempts in a row, in the order they end in one process, failed with the same systematic
cause (HTTP 400/401/403/404, connection refused, DNS, TLS) and none succeeded between, :meth:`FailFast.feed`
returns the message that stops the run, once. Any success or other outcome (a 429, a 5xx, a timeout) starts over.
"""

from __future__ import annotations

from locust_llm.protocol.metrics import SYSTEMATIC, RequestResult

__all__ = ["THRESHOLD", "FailFast"]

THRESHOLD = 10


class FailFast:
    __slots__ = ("cause", "count", "fired", "threshold")

    def __init__(self, threshold: int = THRESHOLD) -> None:
        self.threshold = threshold
        self.cause = ""
        self.count = 0
        self.fired = False

    def feed(self, result: RequestResult) -> str | None:
        """Count one ended attempt; the message that stops the run when the rule fires (once), else None."""
        cause = result.cause if not result.ok else ""
        if cause not in SYSTEMATIC:
            self.cause, self.count = "", 0
            return None
        self.count = self.count + 1 if cause == self.cause else 1
        self.cause = cause
        if self.count < self.threshold or self.fired:
            return None
        self.fired = True
        return f"the last {self.count} requests all failed: {SYSTEMATIC[cause]}; the server said: {result.error}"
