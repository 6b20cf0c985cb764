"""Validity of a step: the rules that decide whether its numbers can be trusted. Pure.

An overloaded load generator inflates the latencies it reports, and a lost worker takes its share of the load
with it, so a step is marked invalid (never silently analysed) when, during the step:

1. a generator process (a worker, the master, or the single process) used more CPU than ``max_cpu_pct`` of one
   core (each process samples its own CPU once a second; the step keeps the maximum);
2. a worker was lost (the master saw it go missing);
3. the scheduling lag p99 (a user was ready, but its request went out later) of a model's steady window exceeded
   ``max_lag_ms``.

Each rule that fires adds one readable reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from locust_llm.collect.stats import STEADY, StatsTable

__all__ = ["StepHealth", "invalid_reasons"]


@dataclass
class StepHealth:
    """What the generators looked like during one step (master or local view)."""

    cpu_max_pct: dict[str, float] = field(default_factory=dict)  # process name -> max CPU % seen
    workers_min: int | None = None
    workers_max: int | None = None
    lost: list[str] = field(default_factory=list)

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
    step: int, health: StepHealth, table: StatsTable, max_cpu_pct: float, max_lag_ms: float
) -> list[str]:
    """The reasons step ``step`` is invalid (rules 1-3 of the module docstring, in that order); empty when valid."""
    reasons = [
        f"generator saturated: {name} CPU {pct:.0f}% > {max_cpu_pct:g}%"
        for name, pct in sorted(health.cpu_max_pct.items())
        if pct > max_cpu_pct
    ]
    reasons += [f"worker lost during the step: {name}" for name in health.lost]
    for key, stats in table:
        lag = stats.hist["lag"]
        if key.step == step and key.phase == STEADY and lag.count:
            p99_ms = lag.quantile(0.99) / 1e6
            if p99_ms > max_lag_ms:
                reasons.append(f"scheduling lag p99 {p99_ms:.1f} ms > {max_lag_ms:g} ms ({key.model})")
    return reasons
