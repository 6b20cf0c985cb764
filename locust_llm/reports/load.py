"""Reading a run back: ``{prefix}_llm_steps.csv`` (exact) and ``{prefix}_llm_run.json``, or plain Locust CSVs; or
several shards' ``{prefix}_llm_histograms.json`` merged into one run (:mod:`locust_llm.measure.shards`). Pure.

Cells are typed by :class:`~locust_llm.measure.rows.StepRow`; an empty cell is ``None``, a bad one a one-line
:class:`ReportInputError` naming the file, the line and the column.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from locust_llm.measure import shards
from locust_llm.measure.rows import COLUMNS, StepRow, column_types, series, step_rows
from locust_llm.measure.sla import Prices
from locust_llm.measure.stats import StatsTable
from locust_llm.measure.turns import TurnRow, turns_csv_path
from locust_llm.reports.files import ReportInputError, histograms_path, open_csv, read_json_object
from locust_llm.reports.history import history_path, locust_timeline, steps_from_history

__all__ = ["LoadedRun", "ReportInputError", "load_run", "load_shards", "read_run_meta", "read_steps", "steps_path"]

_TYPES = column_types()
_TURN_TYPES = column_types(TurnRow)
REQUIRED = ("step", "users", "model", "requests", "ok", "errors", "ttft_p50_ms", "ttft_p99_ms", "itl_p99_ms")


@dataclass
class LoadedRun:
    steps: list[StepRow]
    source: str  # "llm_steps" or "locust_history"
    path: Path
    approximate: bool = False
    run_meta: dict[str, Any] = field(default_factory=dict)
    timeline: list[dict[str, Any]] = field(default_factory=list)  # seconds, users, req_s from Locust's history
    turns: list[Any] = field(default_factory=list)  # the rows of {prefix}_llm_turns.csv (conversations)
    table: StatsTable | None = None  # the exact statistics ({prefix}_llm_histograms.json), where the run kept them

    @property
    def models(self) -> list[str]:
        """The series the rows belong to: routes with ``--routes``, else models."""
        return sorted({series(s) for s in self.steps})


def _prefix(target: str | Path) -> Path:
    text = str(target)
    for suffix in ("_llm_steps.csv", "_stats_history.csv"):
        if text.endswith(suffix):
            text = text[: -len(suffix)]
    return Path(text)


def steps_path(prefix: str | Path) -> Path:
    return Path(f"{prefix}_llm_steps.csv")


def load_run(target: str | Path) -> LoadedRun:
    """Load ``PREFIX`` (or a path to its ``_llm_steps.csv`` / ``_stats_history.csv``)."""
    prefix = _prefix(target)
    steps_file, history_file = steps_path(prefix), history_path(prefix)
    if steps_file.exists():
        run = LoadedRun(read_steps(steps_file), "llm_steps", steps_file)
    elif history_file.exists():
        run = LoadedRun(steps_from_history(history_file), "locust_history", history_file, True)
    else:
        raise ReportInputError(
            f"no run found at {prefix}: expected {steps_file} (locust-llm) or {history_file} "
            "(Locust with --csv-full-history)"
        )
    run.timeline = locust_timeline(prefix)
    run.run_meta = read_run_meta(prefix)
    run.turns = read_turns(prefix)
    run.table = read_table(prefix)
    return run


def read_table(prefix: str | Path) -> StatsTable | None:
    """The run's exact statistics from ``{prefix}_llm_histograms.json``; None when it has none (plain Locust CSVs, an
    older run) or it cannot be read (the report is then made without the intervals the gate needs)."""
    path = histograms_path(prefix)
    if not path.exists():
        return None
    try:
        return shards.load(json.loads(path.read_text(encoding="utf-8")), str(path))[0]
    except (OSError, ValueError, shards.ShardError):
        return None


def load_shards(targets: list[str], prices: Prices | None = None) -> LoadedRun:
    """Several runs measured at once (each master's ``--csv`` prefix) as one, from their histograms files, exactly
    (:mod:`locust_llm.measure.shards`); the first one's metadata, with every shard named in ``shards``."""
    parts = []
    for target in targets:
        prefix = _prefix(target)
        path = histograms_path(prefix)
        if not path.exists() and steps_path(prefix).exists():
            raise ReportInputError(f"{path} does not exist: this run was made by a locust-llm without it; rerun it")
        data = read_json_object(path, f"shard {prefix}:")
        try:
            parts.append((str(prefix), *shards.load(data, str(path))))
        except shards.ShardError as exc:
            raise ReportInputError(str(exc)) from None
    try:
        table, windows = shards.merge(parts)
    except shards.ShardError as exc:
        raise ReportInputError(str(exc)) from None
    rows = step_rows(table, windows, prices)
    if not rows:
        raise ReportInputError(f"the shards {', '.join(targets)} hold no step")
    first = _prefix(targets[0])
    meta = {**read_run_meta(first), "shards": [str(_prefix(t)) for t in targets]}
    return LoadedRun(rows, "llm_steps", histograms_path(first), run_meta=meta, table=table)


def read_turns(prefix: str | Path) -> list[dict[str, Any]]:
    """``{prefix}_llm_turns.csv`` (see :mod:`locust_llm.measure.turns`), or ``[]`` when there is none."""
    path = turns_csv_path(prefix)
    if not path.exists():
        return []
    header, body = open_csv(path)
    return _typed_rows(path, header, body, _TURN_TYPES)


def read_run_meta(prefix: str | Path) -> dict[str, Any]:
    """``{prefix}_llm_run.json``, or ``{}`` when there is none."""
    meta_path = Path(f"{prefix}_llm_run.json")
    if not meta_path.exists():
        return {}
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReportInputError(f"{meta_path}: not valid JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise ReportInputError(f"{meta_path}: not a JSON object")
    return meta


def read_steps(path: Path) -> list[StepRow]:
    header, body = open_csv(path)
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise ReportInputError(f"{path}: missing columns {', '.join(missing)} (is it a locust-llm _llm_steps.csv?)")
    steps = _typed_rows(path, header, body, _TYPES)
    if not steps:
        raise ReportInputError(f"{path}: has a header but no steps (did the run end before its first step?)")
    for row in steps:
        for name in COLUMNS:
            row.setdefault(name, None)
    return steps  # type: ignore[return-value]  # every column is set, typed by _value


def _typed_rows(path: Path, header: list[str], body: list[list[str]], types: dict[str, type]) -> list[dict[str, Any]]:
    """The non-blank lines of a CSV as dicts, each cell typed by ``types`` (a one-line error naming the line)."""
    rows: list[dict[str, Any]] = []
    for line_no, cells in enumerate(body, start=2):
        if not any(cells):
            continue
        if len(cells) != len(header):
            raise ReportInputError(
                f"{path}: line {line_no} has {len(cells)} fields, expected {len(header)} (truncated file?)"
            )
        rows.append({name: _value(path, line_no, name, cell, types) for name, cell in zip(header, cells, strict=True)})
    return rows


def _value(path: Path, line_no: int, name: str, cell: str, types: dict[str, type]) -> Any:
    kind = types.get(name, float)
    if kind is str:
        return cell
    if kind is bool:
        if cell not in ("True", "False", ""):
            raise ReportInputError(f"{path}: line {line_no}, column {name}: expected True or False, got {cell!r}")
        return cell == "True" if cell else None
    if cell == "":
        return None
    try:
        return int(cell) if kind is int else float(cell)
    except ValueError:
        expected = "an integer" if kind is int else "a number"
        raise ReportInputError(f"{path}: line {line_no}, column {name}: expected {expected}, got {cell!r}") from None
