"""How a search probe is judged, from its per-step row (the exact merged statistics of its steady window). Pure.

- **Invalid**: no row, a row marked invalid (its reasons: a saturated generator, a lost worker, too few requests,
  ...) or a row with no successful request: it decides nothing (:mod:`locust_llm.shapes.search`, rule 5).
- ``sla``: the probe passes when its row meets every limit of the SLA (:meth:`locust_llm.sla.Sla.failures`: the
  client-perceived p99s and the client error rate). A limit is *near* when the judged p99 lies within
  ``BORDERLINE`` (10 %) of it, on either side, or when some client requests failed and their count is within 2
  of the count the error limit allows (``|failed - limit * requests| <= 2``): a p99 of a few hundred samples, or
  a count of a few errors, moves that much between two runs of the same load. The probe is *borderline* when a
  near limit could flip its verdict: a pass with any near limit, a fail whose broken limits are all near.
- ``knee`` (the latency knee of TTFT p99): the reference is the TTFT p99 of the first valid probe (the start
  load, which must be on the flat part of the curve). A probe passes while its TTFT p99 is at most
  ``(1 + KNEE_RISE)`` times the reference (``KNEE_RISE`` = 50 %: the rise :mod:`locust_llm.reports.knee` also
  requires before it calls a knee), and is borderline within ``BORDERLINE`` of that threshold. The answer is the
  highest load still on the flat part.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from locust_llm.reports.knee import MIN_RISE
from locust_llm.shapes.search import Outcome
from locust_llm.sla import Sla, error_rate, judged

__all__ = ["BORDERLINE", "KNEE_RISE", "Criterion"]

BORDERLINE = 0.10
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
        return f"latency knee: TTFT p99 within {1 + KNEE_RISE:g}x the start load's"

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
        threshold = (1 + KNEE_RISE) * self.reference_ms
        passed = value <= threshold
        detail = (
            f"TTFT p99 {value:.0f} ms {'<=' if passed else '>'} {threshold:.0f} ms ({1 + KNEE_RISE:g}x the start's)"
        )
        values = {"ttft_p99_ms": value, "threshold_ms": round(threshold, 3)}
        return Outcome(passed, abs(value - threshold) <= BORDERLINE * threshold, detail, values)
