"""How a search probe is judged from its per-step row: invalid, pass or fail, and borderline. Pure.

Invalid: no row, an invalid row or no success. ``sla``: a pass when every limit holds; a limit is *near* within
``BORDERLINE`` of it, or 2 failures of the error limit. ``knee``: a fail once TTFT p99 exceeds ``1 + KNEE_RISE``
times the first probe's and it by ``KNEE_STEPS`` decode steps. Borderline: a near limit could flip the verdict.
docs/methodology.md, "How a probe is judged".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from locust_llm.measure.sla import Sla, error_rate, judged
from locust_llm.measure.thresholds import BORDERLINE, KNEE_STEPS, MIN_RISE
from locust_llm.shapes.search import Outcome

__all__ = ["Criterion"]

KNEE_RISE = MIN_RISE


@dataclass
class Criterion:
    """``sla`` (needs a limit in ``sla``) or ``knee``; ``reference_ms`` is set by the first valid ``knee`` probe."""

    kind: Literal["sla", "knee"]
    sla: Sla
    reference_ms: float | None = None

    def describe(self) -> str:
        if self.kind == "sla":
            return f"SLA: {self.sla.describe()}"
        return (
            f"latency knee: TTFT p99 within {1 + KNEE_RISE:g}x the start load's, or within {KNEE_STEPS} decode steps"
            " of it"
        )

    def judge(self, row: Mapping[str, Any] | None) -> Outcome:
        if row is None or not row.get("requests"):
            return Outcome(None, detail="no request completed in its steady window")
        if row.get("valid") is False:
            return Outcome(None, detail=str(row.get("invalid_reasons") or "invalid"))
        if not row.get("ok"):
            return Outcome(None, detail="no successful request")
        return self._sla(row) if self.kind == "sla" else self._knee(row)

    def _sla(self, row: Mapping[str, Any]) -> Outcome:
        values: dict[str, Any] = {}
        parts: list[str] = []
        checks: list[tuple[bool, bool]] = []  # (met, near its limit) for each limit
        for label, column, limit in self.sla.latency_limits():
            column = judged(row, column)
            value = row.get(column)
            values[column] = value
            if value is None:
                parts.append(f"{label} unknown")
                checks.append((False, False))
                continue
            checks.append((value <= limit, abs(value - limit) <= BORDERLINE * limit))
            parts.append(f"{label} {value:.0f} ms {'<=' if value <= limit else '>'} {limit:g} ms")
        error_limit = self.sla.error_limit
        if error_limit is not None:
            rate, clients = error_rate(row), row.get("client_requests") or row.get("requests") or 0
            failed = round(rate * clients)
            values["error_rate"] = round(rate, 4)
            checks.append((rate <= error_limit, failed > 0 and abs(failed - error_limit * clients) <= 2))
            parts.append(f"errors {100 * rate:.1f}% {'<=' if rate <= error_limit else '>'} {100 * error_limit:g}%")
        passed = all(met for met, _ in checks)
        # too close to call when a near limit could flip the verdict: any of them for a pass, all broken ones for a fail
        borderline = any(near for _, near in checks) if passed else all(near for met, near in checks if not met)
        return Outcome(passed, borderline, ", ".join(parts), values)

    def _knee(self, row: Mapping[str, Any]) -> Outcome:
        value = row.get("ttft_p99_ms")
        if value is None:
            return Outcome(None, detail="no TTFT measured")
        if self.reference_ms is None:
            self.reference_ms = float(value)
        steps_ms = KNEE_STEPS * float(row.get("itl_p50_ms") or 0.0)
        threshold = max((1 + KNEE_RISE) * self.reference_ms, self.reference_ms + steps_ms)
        passed = value <= threshold
        detail = (
            f"TTFT p99 {value:.0f} ms {'<=' if passed else '>'} {threshold:.0f} ms ({1 + KNEE_RISE:g}x the start's"
            + (f", or {KNEE_STEPS} decode steps over it)" if steps_ms else ")")
        )
        values = {"ttft_p99_ms": value, "threshold_ms": round(threshold, 3)}
        return Outcome(passed, abs(value - threshold) <= BORDERLINE * threshold, detail, values)
