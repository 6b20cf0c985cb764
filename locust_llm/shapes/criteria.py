"""How a search probe is judged from its per-step row: invalid, past capacity, pass or fail, and borderline. Pure.

Invalid: no row, an invalid row or no success. Past capacity: failures over the error budget
(:mod:`locust_llm.measure.evidence`); for the knee also a sustained server queue or over ``CAP_SHARE`` of 429s.
``sla``: a pass when every limit holds; a limit is *near* within ``BORDERLINE`` of it, or 2 failures of the error
limit. ``knee``: judged against the search's reference by the sweep's rule
(:func:`locust_llm.measure.knee.threshold_ms`). docs/methodology.md, "How a probe is judged".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from locust_llm.measure.evidence import over_budget, server_queue
from locust_llm.measure.knee import threshold_ms
from locust_llm.measure.sla import Sla, error_rate, judged
from locust_llm.measure.thresholds import BORDERLINE, CAP_SHARE, ERROR_BUDGET
from locust_llm.shapes.search import Outcome

__all__ = ["Criterion", "load_of"]


def load_of(row: Mapping[str, Any]) -> float:
    """A row's load: its offered rate in open loop, else its users."""
    offered = row.get("offered_req_s")
    return float(offered) if offered not in (None, "") else float(row["users"])


@dataclass
class Criterion:
    """``sla`` (needs a limit in ``sla``) or ``knee``; a step past ``error_budget`` or with a server queue fails
    either."""

    kind: Literal["sla", "knee"]
    sla: Sla
    error_budget: float = ERROR_BUDGET

    def describe(self) -> str:
        if self.kind == "sla":
            return f"SLA: {self.sla.describe()}"
        return (
            "latency knee: TTFT p99 bends against the load below it (the sweep's rule), or the server is past capacity"
        )

    def judge(self, row: Mapping[str, Any] | None, reference: Mapping[str, Any] | None = None) -> Outcome:
        """The outcome of the probe whose row is ``row``; a knee probe is judged against ``reference``'s row (None:
        the start, measured alone)."""
        if row is None or not row.get("requests"):
            return Outcome(None, detail="no request completed in its steady window")
        if row.get("valid") is False:
            return Outcome(None, detail=str(row.get("invalid_reasons") or "invalid"))
        if not row.get("ok"):
            return Outcome(None, detail="no successful request")
        past = self._past_capacity(row)
        if past is not None:
            return past
        if self.kind == "sla":
            return self._sla(row)
        if reference is None:
            value = row.get("ttft_p99_ms")
            return Outcome(
                True, detail=f"TTFT p99 {value} ms: judged with the next probe", values={"ttft_p99_ms": value}
            )
        return self._knee(row, reference)

    def _past_capacity(self, row: Mapping[str, Any]) -> Outcome | None:
        """A fail at this probe's own load when its errors exceed the budget; for the knee, also when the server shows a
        queue or the provider refuses more than ``CAP_SHARE`` with HTTP 429: the limits the sweep's recommendation
        keeps below (an SLA search finds what meets the SLA, whatever queues meanwhile)."""
        errors = over_budget(row, self.error_budget)
        knee = self.kind == "knee"  # an SLA allows what latency it allows, queueing included: only errors bind it
        queue = server_queue(row) if knee else None
        requests = row.get("requests") or 0
        refused = (row.get("status_429") or 0) / requests if requests and knee else 0.0
        if queue is not None:
            detail = f"past capacity: the server queues {queue[0]:g} requests ({queue[1]:g} running)"
        elif errors is not None:
            detail = f"past capacity: {100 * errors.share:.1f}% failed, over the {100 * self.error_budget:g}% budget"
        elif refused > CAP_SHARE:
            detail = f"past capacity: the provider refused {100 * refused:.1f}% with HTTP 429"
        else:
            return None
        return Outcome(False, detail=detail, values={"past_at": load_of(row)})

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

    def _knee(self, row: Mapping[str, Any], reference: Mapping[str, Any]) -> Outcome:
        """The segment between the two probes bends, by the sweep's rule: a fail of its upper end."""
        (low, low_row), (high, high_row) = sorted(((load_of(r), r) for r in (row, reference)), key=lambda x: x[0])
        low_p99, high_p99 = low_row.get("ttft_p99_ms"), high_row.get("ttft_p99_ms")
        if low_p99 is None or high_p99 is None:
            return Outcome(None, detail="no TTFT measured")
        limit = threshold_ms(low, float(low_p99), high, high_row.get("itl_p50_ms"))
        passed = high_p99 <= limit
        detail = (
            f"TTFT p99 {float(high_p99):.0f} ms at {high:g} {'<=' if passed else '>'} {limit:.0f} ms against "
            f"{float(low_p99):.0f} ms at {low:g}"
        )
        values = {"ttft_p99_ms": row.get("ttft_p99_ms"), "threshold_ms": round(limit, 3), "against": load_of(reference)}
        return Outcome(passed, abs(float(high_p99) - limit) <= BORDERLINE * limit, detail, values)
