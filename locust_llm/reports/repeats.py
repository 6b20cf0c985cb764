"""``--repeats``: a plan's passes merged into one row per load, and how many passes agree on the knee. Pure.

A load's merged row holds its passes' samples together, exactly; each percentile's interval then reaches at least
across the passes' own values (:func:`widen`): the spread between passes as well as within them.
docs/methodology.md, "Repeats".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from locust_llm.measure.rows import (
    INTERVAL_METRICS,
    INTERVAL_QUANTILES,
    RouteBook,
    StepRow,
    StepWindow,
    series,
    step_row,
)
from locust_llm.measure.sla import Prices
from locust_llm.measure.stats import STEADY, StatsTable, StepStats

__all__ = ["merge_repeats", "passes", "widen"]


def _load(row: StepRow) -> float:
    offered = row.get("offered_req_s")
    return float(offered) if offered is not None else float(row["users"])


def passes(rows: Sequence[StepRow]) -> dict[int, list[StepRow]]:
    """The rows of each pass (``repeat``), in step order."""
    out: dict[int, list[StepRow]] = {}
    for row in sorted(rows, key=lambda r: r["step"]):
        out.setdefault(int(row.get("repeat") or 1), []).append(row)
    return out


def merge_repeats(rows: Sequence[StepRow], table: StatsTable, prices: Prices | RouteBook | None) -> list[StepRow]:
    """One row per (series, load) of the passes' rows: their steps' steady statistics added (module docstring)."""
    groups: dict[tuple[str, float], list[StepRow]] = {}
    for row in rows:
        groups.setdefault((series(row), _load(row)), []).append(row)
    merged = []
    for (name, _), group in groups.items():
        steps = {row["step"] for row in group}
        stats = StepStats()
        for key, part in table:
            if key.step in steps and key.phase == STEADY and key.model == name:
                stats.merge(part)
        first = min(group, key=lambda r: r["step"])
        cpu = [v for r in group if (v := r["generator_cpu_max_pct"]) is not None]
        workers = [v for r in group if (v := r["workers"]) is not None]
        window = StepWindow(
            step=first["step"],
            users=first["users"],
            start_s=first["start_s"],
            duration_s=sum(r["duration_s"] for r in group),
            warmup_s=first["warmup_s"],
            cpu_max_pct=max(cpu) if cpu else None,
            workers=min(workers) if workers else None,
            invalid_reasons=tuple(
                f"step {r['step']}: {r['invalid_reasons']}" for r in group if r.get("valid") is False
            ),
            rate=first.get("offered_req_s"),
            speed=first.get("speed"),
            repeat=0,
        )
        merged.append(widen(step_row(window, name, stats, prices), group))
    return sorted(merged, key=lambda r: (r["step"], series(r)))


def widen(row: StepRow, group: Sequence[StepRow]) -> StepRow:
    """``row`` (a merged row) with each percentile's interval reaching at least across the passes' own values (an end
    open on the merged row stays open)."""
    out = cast(dict[str, Any], dict(row))
    for metric in INTERVAL_METRICS:
        for q in INTERVAL_QUANTILES:
            name = f"{metric}_p{round(100 * q)}_ms"
            values: list[float] = [float(v) for r in group if (v := cast(dict[str, Any], r).get(name)) is not None]
            if not values:
                continue
            low, high = out.get(f"{name}_ci_low"), out.get(f"{name}_ci_high")
            out[f"{name}_ci_low"] = min(values) if low is None else min(float(low), *values)
            out[f"{name}_ci_high"] = None if high is None else max(float(high), *values)
    return cast(StepRow, out)
