"""Steps recovered from plain Locust CSVs, approximately, and Locust's users-over-time timeline. Pure.

From ``PREFIX_stats_history.csv`` (run with ``--csv-full-history``): equal ``User Count`` rows lasting
``MIN_STEP_S`` are a step; its first ``max(15 s, 30 %)`` is skipped; latencies are the median of the kept seconds'
"current" percentiles; counts are differences of the totals. Locust rounds times and its windows lag, so such
results are marked ``approximate``.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from locust_llm.measure.rows import COLUMNS, StepRow
from locust_llm.reports.files import ReportInputError, open_csv

__all__ = ["MIN_STEP_S", "history_path", "locust_timeline", "steps_from_history"]

MIN_STEP_S = 5.0


def history_path(prefix: str | Path) -> Path:
    return Path(f"{prefix}_stats_history.csv")


def locust_timeline(prefix: str | Path) -> list[dict[str, Any]]:
    """Users and requests/s over time from Locust's ``{prefix}_stats_history.csv`` (empty when unreadable)."""
    path = history_path(prefix)
    return _timeline(path) if path.exists() else []


def _history_rows(path: Path) -> list[dict[str, str]]:
    header, body = open_csv(path)
    needed = ("Timestamp", "User Count", "Type", "Name", "50%", "99%", "Total Request Count")
    missing = [c for c in needed if c not in header]
    if missing:
        raise ReportInputError(f"{path}: missing columns {', '.join(missing)} (is it a Locust _stats_history.csv?)")
    rows = []
    for line_no, cells in enumerate(body, start=2):
        if len(cells) != len(header):
            raise ReportInputError(
                f"{path}: line {line_no} has {len(cells)} fields, expected {len(header)} (truncated file?)"
            )
        rows.append(dict(zip(header, cells, strict=True)))
    return rows


def _num(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "", "N/A") else None
    except ValueError:
        return None


def _timeline(path: Path) -> list[dict[str, Any]]:
    try:
        rows = _history_rows(path)
    except ReportInputError:
        return []
    entry = "E2E" if any(r["Type"] == "E2E" for r in rows) else ""
    points = []
    start = None
    for r in rows:
        if (entry and r["Type"] != entry) or (not entry and r["Name"] != "Aggregated"):
            continue
        t = _num(r["Timestamp"])
        if t is None:
            continue
        start = t if start is None else start
        points.append({"t_s": t - start, "users": int(_num(r["User Count"]) or 0), "req_s": _num(r.get("Requests/s"))})
    return points


def steps_from_history(path: Path) -> list[StepRow]:
    rows = _history_rows(path)
    llm = any(r["Type"] in ("TTFT", "ITL", "E2E") for r in rows)
    by_time: dict[float, dict[str, dict[str, str]]] = {}
    for r in rows:
        t = _num(r["Timestamp"])
        if t is None:
            continue
        key = r["Type"] if llm else ("E2E" if r["Name"] == "Aggregated" else "")
        if key:
            by_time.setdefault(t, {})[key] = r
    times = sorted(by_time)
    segments = _segments(times, by_time)
    if not segments:
        raise ReportInputError(f"{path}: no step of at least {MIN_STEP_S:g} s with users found")
    return [_history_step(i + 1, seg, by_time) for i, seg in enumerate(segments)]


def _segments(times: list[float], by_time: dict[float, dict[str, dict[str, str]]]) -> list[list[float]]:
    segments: list[list[float]] = []
    current: list[float] = []
    users = None
    for t in times:
        row = next(iter(by_time[t].values()))
        n = int(_num(row["User Count"]) or 0)
        if n != users:
            if current and users and current[-1] - current[0] >= MIN_STEP_S:
                segments.append(current)
            current, users = [], n
        current.append(t)
    if current and users and current[-1] - current[0] >= MIN_STEP_S:
        segments.append(current)
    return segments


def _history_step(step: int, times: list[float], by_time: dict[float, dict[str, dict[str, str]]]) -> StepRow:
    span = times[-1] - times[0]
    skip = min(max(15.0, 0.3 * span), 0.7 * span)
    kept = [t for t in times if t >= times[0] + skip]
    first, last = by_time[kept[0]].get("E2E"), by_time[kept[-1]].get("E2E")
    duration = kept[-1] - kept[0]
    requests = errors = 0
    tokens = None
    if first and last and duration > 0:
        requests = int((_num(last["Total Request Count"]) or 0) - (_num(first["Total Request Count"]) or 0))
        errors = int((_num(last.get("Total Failure Count")) or 0) - (_num(first.get("Total Failure Count")) or 0))
        size_first = (_num(first.get("Total Average Content Size")) or 0) * (_num(first["Total Request Count"]) or 0)
        size_last = (_num(last.get("Total Average Content Size")) or 0) * (_num(last["Total Request Count"]) or 0)
        tokens = int(size_last - size_first)

    def median(kind: str, column: str) -> float | None:
        values = [_num(by_time[t][kind].get(column)) for t in kept if kind in by_time[t]]
        present = [v for v in values if v is not None]
        return statistics.median(present) if present else None

    users = int(_num(next(iter(by_time[times[0]].values()))["User Count"]) or 0)
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(
        step=step,
        users=users,
        model="(locust)",
        start_s=kept[0] - times[0],
        duration_s=duration,
        requests=requests,
        ok=requests - errors,
        errors=errors,
        req_s=round(requests / duration, 4) if duration else None,
        output_tok_s=round(tokens / duration, 4) if tokens and duration else None,
        completion_tokens=tokens,
        ttft_p50_ms=median("TTFT", "50%"),
        ttft_p90_ms=median("TTFT", "90%"),
        ttft_p99_ms=median("TTFT", "99%"),
        itl_p50_ms=median("ITL", "50%"),
        itl_p90_ms=median("ITL", "90%"),
        itl_p99_ms=median("ITL", "99%"),
        e2e_p50_ms=median("E2E", "50%"),
        e2e_p99_ms=median("E2E", "99%"),
        warmup_s=skip,
        valid=True,
        invalid_reasons="",
    )
    return row  # type: ignore[return-value]  # every column is set
