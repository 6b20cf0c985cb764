"""Service-level objectives and prices: what "good enough" and "how much" mean for a run. Pure.

A step meets the SLA when each given limit holds: client-perceived TTFT and E2E p99, ITL p99, and the client error
rate (1 % by default once any latency limit is set). A client request is *good* (goodput) when it succeeded within
every latency limit, its ITL judged by the p99 of its final attempt's gaps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from math import ceil
from typing import Any

from locust_llm.measure.thresholds import DEFAULT_MAX_ERROR_RATE
from locust_llm.protocol.metrics import RequestResult

__all__ = ["Prices", "Sla", "error_rate", "judged"]


@dataclass(frozen=True)
class Sla:
    ttft_p99_ms: float | None = None
    itl_p99_ms: float | None = None
    e2e_p99_ms: float | None = None
    max_error_rate: float | None = None

    @property
    def given(self) -> bool:
        return any(v is not None for v in asdict(self).values())

    @property
    def error_limit(self) -> float | None:
        """``max_error_rate``, or :data:`DEFAULT_MAX_ERROR_RATE` when only latency limits are given."""
        if self.max_error_rate is not None or not self.given:
            return self.max_error_rate
        return DEFAULT_MAX_ERROR_RATE

    def as_dict(self) -> dict[str, float | None]:
        return asdict(self)

    def describe(self) -> str:
        """The limits in words, e.g. ``TTFT p99 <= 500 ms, error rate <= 1% (default)``."""
        parts = [f"{label} <= {limit:g} ms" for label, _, limit in self.latency_limits()]
        limit = self.error_limit
        if limit is not None:
            parts.append(f"error rate <= {100 * limit:g}%" + (" (default)" if self.max_error_rate is None else ""))
        return ", ".join(parts)

    def latency_limits(self) -> list[tuple[str, str, float]]:
        limits = (
            ("TTFT p99", "ttft_p99_ms", self.ttft_p99_ms),
            ("ITL p99", "itl_p99_ms", self.itl_p99_ms),
            ("E2E p99", "e2e_p99_ms", self.e2e_p99_ms),
        )
        return [(label, column, limit) for label, column, limit in limits if limit is not None]

    def good(self, result: RequestResult, start_ns: int | None = None) -> bool:
        """Whether one request meets the per-request reading of the SLA (see the module docstring), its TTFT and
        E2E measured from ``start_ns`` (a client request's intended start) or else from the attempt's send."""
        if not result.ok:
            return False
        start = result.sent_ns if start_ns is None else start_ns
        ttft = result.token_ns[0] - start if result.token_ns else None
        if self.ttft_p99_ms is not None and (ttft is None or ttft > self.ttft_p99_ms * 1e6):
            return False
        if self.e2e_p99_ms is not None and result.end_ns - start > self.e2e_p99_ms * 1e6:
            return False
        if self.itl_p99_ms is not None:
            gaps = sorted(result.itl_gaps_ns())
            if gaps and gaps[max(1, ceil(0.99 * len(gaps))) - 1] > self.itl_p99_ms * 1e6:
                return False
        return True

    def failures(self, step: Mapping[str, Any]) -> list[str]:
        """The limits a per-step row breaks (module docstring), as readable text."""
        out = []
        for label, column, limit in self.latency_limits():
            value = step.get(judged(step, column))
            if value is None:
                out.append(f"{label} unknown (no successful request)")
            elif value > limit:
                out.append(f"{label} {value:.0f} ms > {limit:g} ms")
        error_limit = self.error_limit
        if error_limit is not None:
            rate = error_rate(step)
            if rate > error_limit:
                out.append(f"error rate {100 * rate:.1f}% > {100 * error_limit:g}%")
        return out


def judged(step: Mapping[str, Any], column: str) -> str:
    """The column an SLA limit on ``column`` judges: the client-perceived one when the row has it."""
    client = f"client_{column}"
    return client if column in ("ttft_p99_ms", "e2e_p99_ms") and step.get(client) is not None else column


def error_rate(step: Mapping[str, Any]) -> float:
    """Failed client requests / client requests; failed attempts / attempts without client figures."""
    clients = step.get("client_requests") or 0
    if clients:
        return (clients - (step.get("client_ok") or 0)) / clients
    requests = step.get("requests") or 0
    return (step.get("errors") or 0) / requests if requests else 0.0


@dataclass(frozen=True)
class Prices:
    input_usd_per_mtok: float | None = None
    output_usd_per_mtok: float | None = None
    cached_input_usd_per_mtok: float | None = None

    @property
    def given(self) -> bool:
        return self.input_usd_per_mtok is not None or self.output_usd_per_mtok is not None

    def as_dict(self) -> dict[str, float | None]:
        return {
            "input_usd_per_mtok": self.input_usd_per_mtok,
            "output_usd_per_mtok": self.output_usd_per_mtok,
            "cached_input_usd_per_mtok": self.cached_input_usd_per_mtok,
        }

    def cost_usd(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> float:
        """``((prompt - cached) * in + cached * cached_in + completion * out) / 1e6``, where ``cached_in`` is the
        cached-input price (the input price when not given). Completion tokens include reasoning tokens, as
        providers bill them."""
        price_in = self.input_usd_per_mtok or 0.0
        cached_in = price_in if self.cached_input_usd_per_mtok is None else self.cached_input_usd_per_mtok
        cached = min(cached_tokens, prompt_tokens)
        return (
            (prompt_tokens - cached) * price_in
            + cached * cached_in
            + completion_tokens * (self.output_usd_per_mtok or 0.0)
        ) / 1e6
