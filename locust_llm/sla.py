"""Service-level objectives and prices: what "good enough" and "how much" mean for a run. Pure.

A **step** meets the SLA when each given limit holds for it: ``ttft_p99_ms``, ``itl_p99_ms`` and ``e2e_p99_ms``
bound the step's 99th percentiles, and ``max_error_rate`` bounds ``errors / requests``.

A **request** is *good* (it counts towards goodput) when it succeeded, its TTFT is within ``ttft_p99_ms``, its
E2E within ``e2e_p99_ms``, and the 99th percentile of its own ITL gaps (nearest rank; the largest gap of a short
stream) within ``itl_p99_ms``. With no limit given, every successful request is good.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from math import ceil
from typing import Any

from locust_llm.metrics import RequestResult

__all__ = ["Prices", "Sla"]


@dataclass(frozen=True)
class Sla:
    ttft_p99_ms: float | None = None
    itl_p99_ms: float | None = None
    e2e_p99_ms: float | None = None
    max_error_rate: float | None = None

    @property
    def given(self) -> bool:
        return any(v is not None for v in asdict(self).values())

    def as_dict(self) -> dict[str, float | None]:
        return asdict(self)

    def good(self, result: RequestResult) -> bool:
        """Whether one request meets the per-request reading of the SLA (see the module docstring)."""
        if not result.ok:
            return False
        ttft = result.ttft_ns
        if self.ttft_p99_ms is not None and (ttft is None or ttft > self.ttft_p99_ms * 1e6):
            return False
        if self.e2e_p99_ms is not None and result.e2e_ns > self.e2e_p99_ms * 1e6:
            return False
        if self.itl_p99_ms is not None:
            gaps = sorted(result.itl_gaps_ns())
            if gaps and gaps[max(1, ceil(0.99 * len(gaps))) - 1] > self.itl_p99_ms * 1e6:
                return False
        return True

    def failures(self, step: Mapping[str, Any]) -> list[str]:
        """The limits a per-step row (``ttft_p99_ms``, ..., ``requests``, ``errors``) breaks, as readable text."""
        out = []
        for key, column, label in (
            ("ttft_p99_ms", "ttft_p99_ms", "TTFT p99"),
            ("itl_p99_ms", "itl_p99_ms", "ITL p99"),
            ("e2e_p99_ms", "e2e_p99_ms", "E2E p99"),
        ):
            limit = getattr(self, key)
            if limit is None:
                continue
            value = step.get(column)
            if value is None:
                out.append(f"{label} unknown (no successful request)")
            elif value > limit:
                out.append(f"{label} {value:.0f} ms > {limit:g} ms")
        if self.max_error_rate is not None:
            rate = error_rate(step)
            if rate > self.max_error_rate:
                out.append(f"error rate {100 * rate:.1f}% > {100 * self.max_error_rate:g}%")
        return out


def error_rate(step: Mapping[str, Any]) -> float:
    requests = step.get("requests") or 0
    return (step.get("errors") or 0) / requests if requests else 0.0


@dataclass(frozen=True)
class Prices:
    input_usd_per_mtok: float | None = None
    output_usd_per_mtok: float | None = None

    @property
    def given(self) -> bool:
        return self.input_usd_per_mtok is not None or self.output_usd_per_mtok is not None

    def cost_usd(self, prompt_tokens: int, completion_tokens: int) -> float:
        """``prompt * in / 1e6 + completion * out / 1e6``."""
        return (
            prompt_tokens * (self.input_usd_per_mtok or 0.0) + completion_tokens * (self.output_usd_per_mtok or 0.0)
        ) / 1e6
