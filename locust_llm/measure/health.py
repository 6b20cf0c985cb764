"""Validity of a step: the rules that decide whether its numbers can be trusted. Pure.

A step is invalid, with one reason per rule that fires, when during it: (1) a generator process used more than
``max_cpu_pct`` of a core; (2) a worker was lost; (3) a scheduling-lag or loop-stall p99 exceeded ``max_lag_ms``;
(4) its steady window holds fewer than ``min_requests`` completed requests; (5) the E2E p50 exceeds
``max_e2e_share`` of the window; (6) its warm-up was shorter than the previous step's E2E p90; (7) the run was
stopped. docs/methodology.md, "When a step is invalid".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from locust_llm.measure.histogram import Histogram
from locust_llm.measure.stats import STALL_PRECISION, STEADY, StatsTable
from locust_llm.measure.thresholds import BACKLOG_Z, MAX_E2E_SHARE

__all__ = [
    "StepHealth",
    "Validity",
    "backlog_grows",
    "invalid_reasons",
    "needed_step_s",
    "step_backlog",
    "warmup_for",
]


def backlog_grows(growth: float | None, in_flight_p50: float | None) -> bool:
    """Whether an open-loop step's in-flight count rose beyond what a stable queue does: ``growth`` (arrivals in less
    client requests out, over the steady window) above ``BACKLOG_Z`` times ``sqrt(2 L)``, ``L`` the in-flight p50. A
    stable queue holds about ``L`` requests, like a Poisson count, so its counts at two moments differ by about
    ``sqrt(2 L)``; an overloaded one grows by ``(offered - served) * D``."""
    if growth is None:
        return False
    return growth > BACKLOG_Z * math.sqrt(2 * max(1.0, in_flight_p50 or 0.0))


def step_backlog(step: int, table: StatsTable) -> tuple[int, float | None] | None:
    """An open-loop step's backlog growth and in-flight p50 over its steady window (all models); None in closed loop."""
    arrivals = growth = 0
    in_flight = Histogram()
    for key, stats in table:
        if key.step == step and key.phase == STEADY:
            c = stats.counts
            arrivals += c["arrivals"]
            growth += c["arrivals"] - c["dropped"] - c["client_requests"]
            in_flight.merge(stats.hist["in_flight"])
    if not arrivals:
        return None
    return growth, (float(in_flight.quantile(0.5) // 1000) if in_flight.count else None)


@dataclass(frozen=True)
class Validity:
    """The limits of rules 1-5 (module docstring)."""

    max_cpu_pct: float
    max_lag_ms: float
    min_requests: int = 0
    max_e2e_share: float = MAX_E2E_SHARE


@dataclass
class StepHealth:
    """What the generators looked like during one step (master or local view)."""

    cpu_max_pct: dict[str, float] = field(default_factory=dict)  # process name -> max CPU % seen
    workers_min: int | None = None
    workers_max: int | None = None
    lost: list[str] = field(default_factory=list)
    carryover: tuple[float, float] | None = None  # (warm-up s, previous step's E2E p90 s) when the first is shorter
    partial: bool = False  # the run was stopped during the step

    def add_cpu(self, name: str, pct: float) -> None:
        if pct > self.cpu_max_pct.get(name, -1.0):
            self.cpu_max_pct[name] = pct

    def add_workers(self, n: int) -> None:
        self.workers_min = n if self.workers_min is None else min(self.workers_min, n)
        self.workers_max = n if self.workers_max is None else max(self.workers_max, n)

    @property
    def cpu_max(self) -> float | None:
        return round(max(self.cpu_max_pct.values()), 1) if self.cpu_max_pct else None


def invalid_reasons(
    step: int,
    health: StepHealth,
    table: StatsTable,
    max_cpu_pct: float,
    max_lag_ms: float,
    window_s: float | None = None,
    min_requests: int = 0,
    max_e2e_share: float = MAX_E2E_SHARE,
) -> list[str]:
    """The reasons step ``step`` is invalid (rules 1-7 of the module docstring, in that order); empty when valid.
    Rules 4 and 5 need the steady window's length ``window_s``."""
    reasons = [
        f"generator saturated: {name} CPU {pct:.0f}% > {max_cpu_pct:g}%"
        for name, pct in sorted(health.cpu_max_pct.items())
        if pct > max_cpu_pct
    ]
    reasons += [f"worker lost during the step: {name}" for name in health.lost]
    stalls = Histogram(precision=STALL_PRECISION)
    for key, stats in table:
        lag = stats.hist["lag"]
        if key.step == step and key.phase == STEADY:
            stalls.merge(stats.hist["loop_stall"])
        if key.step == step and key.phase == STEADY and lag.count:
            p99_ms = lag.quantile(0.99) / 1e6
            if p99_ms > max_lag_ms:
                reasons.append(f"scheduling lag p99 {p99_ms:.1f} ms > {max_lag_ms:g} ms ({key.model})")
    if stalls.count and stalls.quantile(0.99) / 1e6 > max_lag_ms:
        stalled_ms = stalls.quantile(0.99) / 1e6
        reasons.append(
            f"generator loop stalled: p99 {stalled_ms:.1f} ms > {max_lag_ms:g} ms (a blocking call, a GC pause or a "
            "starved CPU held the loop that times tokens)"
        )
    backlog = step_backlog(step, table)
    overloaded = backlog is not None and backlog_grows(*backlog)
    if window_s is not None and not overloaded:
        reasons += _length_reasons(step, table, window_s, min_requests, max_e2e_share)
    if health.carryover is not None and not overloaded:
        warmup_s, p90_s = health.carryover
        reasons.append(
            f"warm-up {warmup_s:.1f} s shorter than the previous step's E2E p90 {p90_s:.1f} s: requests sent under "
            "its load end in this window (lengthen --step-duration)"
        )
    if health.partial:
        reasons.append("partial: the run was stopped during this step")
    return reasons


def _length_reasons(step: int, table: StatsTable, window_s: float, min_requests: int, share: float) -> list[str]:
    requests = 0
    e2e = Histogram()
    for key, stats in table:
        if key.step == step and key.phase == STEADY:
            requests += stats.counts["requests"]
            e2e.merge(stats.hist["e2e"])
    reasons = []
    if requests < min_requests:
        reasons.append(
            f"too few completed requests in the steady window: {requests} < {min_requests} (lengthen --step-duration)"
        )
    if e2e.count and e2e.quantile(0.5) / 1e9 > share * window_s:
        reasons.append(
            f"requests too long for the step: E2E p50 {e2e.quantile(0.5) / 1e9:.1f} s > {_share(share)} the "
            f"{window_s:.1f} s steady window (lengthen --step-duration)"
        )
    return reasons


def _share(share: float) -> str:
    return "the whole of" if share == 1 else f"{100 * share:g}% of"


def warmup_for(auto_s: float, previous_p90_s: float | None, step_s: float) -> tuple[float, bool]:
    """The automatic warm-up of a step: ``max(auto_s, previous step's E2E p90)``, at most half the step; and
    whether the cap left it shorter than that p90 (rule 6)."""
    if previous_p90_s is None or previous_p90_s <= auto_s:
        return auto_s, False
    return min(previous_p90_s, 0.5 * step_s), previous_p90_s > 0.5 * step_s


def needed_step_s(e2e_p50_s: float, e2e_p90_s: float, req_s: float, min_requests: int, warmup_s: float) -> float:
    """How long a step must last for this workload: twice the warm-up that covers the E2E p90 (rule 6: the
    automatic warm-up is at most half the step), and at least that warm-up plus a steady window holding the E2E
    p50 (rule 5) and ``min_requests`` completed requests at ``req_s`` (rule 4):
    ``max(2 * max(warmup, p90), max(warmup, p90) + max(p50 / share, min_requests / req_s))``."""
    warmup = max(warmup_s, e2e_p90_s)
    window = max(e2e_p50_s / MAX_E2E_SHARE, min_requests / req_s if req_s > 0 else 0.0)
    return max(2 * warmup, warmup + window)
