"""Shards of a fleet too large for one master, measured at once, merged exactly into one run. Pure.

Each run writes its per-step histograms and windows (``{prefix}_llm_histograms.json``); shards that ran the same step
plan at the same time (each master its own workers, models or routes) merge step by step, by :func:`merge`'s rules.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any

from locust_llm.measure.rows import StepWindow
from locust_llm.measure.stats import StatsTable

__all__ = ["FORMAT", "ShardError", "dump", "load", "merge"]

FORMAT = "locust-llm-histograms/1"


class ShardError(ValueError):
    """A shard that cannot be read or merged; the message is one line naming it."""


def dump(table: StatsTable, windows: list[StepWindow]) -> dict[str, Any]:
    """What ``{prefix}_llm_histograms.json`` holds: the steady windows and every (step, model, phase)'s statistics."""
    return {"format": FORMAT, "windows": [dataclasses.asdict(w) for w in windows], "stats": table.to_wire()}


def load(data: dict[str, Any], label: str) -> tuple[StatsTable, list[StepWindow]]:
    """The table and windows of :func:`dump`'s output; :class:`ShardError` naming ``label`` when malformed."""
    if data.get("format") != FORMAT:
        raise ShardError(f"{label}: not a locust-llm histograms file (format {data.get('format')!r}, need {FORMAT})")
    try:
        windows = [StepWindow(**{**w, "invalid_reasons": tuple(w["invalid_reasons"])}) for w in data["windows"]]
        return StatsTable.from_wire(data["stats"]), windows
    except (KeyError, TypeError, ValueError) as exc:
        raise ShardError(f"{label}: malformed histograms file ({exc})") from None


def merge(shards: list[tuple[str, StatsTable, list[StepWindow]]]) -> tuple[StatsTable, list[StepWindow]]:
    """The shards (label, table, windows) as one run. The histograms and counters add up (exact: the merge a master
    does of its workers'); a step's users, workers and offered rate are the shards' sums; its window is their mean
    length (they differ by the start skew), so a rate is the shards' total count over it; a step is invalid when any
    shard's was, each reason named with its shard. Shards whose step numbers differ do not merge."""
    first_label, _, first_windows = shards[0]
    steps = [w.step for w in first_windows]
    for label, _, windows in shards[1:]:
        if [w.step for w in windows] != steps:
            raise ShardError(
                f"{label} has steps {[w.step for w in windows]}, {first_label} has {steps}: shards merge only when "
                "they ran the same step plan"
            )
    table = StatsTable()
    for _, part, _ in shards:
        table.merge(part)
    merged = []
    for i, step in enumerate(steps):
        same = [(label, windows[i]) for label, _, windows in shards]
        cpu = [w.cpu_max_pct for _, w in same if w.cpu_max_pct is not None]
        workers = [w.workers for _, w in same if w.workers is not None]
        lost = [w.workers_lost for _, w in same if w.workers_lost is not None]
        rates = [w.rate for _, w in same if w.rate is not None]
        merged.append(
            StepWindow(
                step=step,
                users=sum(w.users for _, w in same),
                start_s=min(w.start_s for _, w in same),
                duration_s=statistics.fmean(w.duration_s for _, w in same),
                warmup_s=max(w.warmup_s for _, w in same),
                cpu_max_pct=max(cpu) if cpu else None,
                workers=sum(workers) if workers else None,
                invalid_reasons=tuple(f"{label}: {r}" for label, w in same for r in w.invalid_reasons),
                rate=sum(rates) if rates else None,
                speed=same[0][1].speed,
                workers_lost=sum(lost) if lost else None,
            )
        )
    return table, merged
