"""A run's files: their names, one-line input errors, CSV and JSON reading, and atomic writes.

A file is written to a temporary name and renamed, so a reader (a dashboard, the report) never sees half of it.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "ReportInputError",
    "histograms_path",
    "open_csv",
    "read_json_object",
    "steps_csv_path",
    "workers_csv_path",
    "write_csv",
    "write_text_atomic",
]


class ReportInputError(ValueError):
    """A run's files cannot be read; the message is one line naming the file, the place and the problem."""


def open_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            rows = list(csv.reader(handle))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ReportInputError(f"{path}: cannot be read ({exc})") from None
    if not rows or not any(rows[0]):
        raise ReportInputError(f"{path}: is empty (no header)")
    return rows[0], rows[1:]


def read_json_object(path: str | Path, label: str, error: type[ValueError] = ReportInputError) -> dict[str, Any]:
    """A JSON object from ``path``; ``error`` (one line naming ``label`` and the path) when it cannot be had."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"{label} {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{label} {path} cannot be read ({exc})") from None
    except json.JSONDecodeError as exc:
        raise error(f"{label} {path} is not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(data, dict):
        raise error(f"{label} {path} is not a JSON object")
    return data


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a reader never sees half a file (a temporary file, then a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def steps_csv_path(csv_prefix: str) -> Path:
    return Path(f"{csv_prefix}_llm_steps.csv")


def histograms_path(csv_prefix: str | Path) -> Path:
    """Every step's histograms and window (:mod:`locust_llm.measure.shards`): what merges runs exactly."""
    return Path(f"{csv_prefix}_llm_histograms.json")


def workers_csv_path(csv_prefix: str) -> Path:
    return Path(f"{csv_prefix}_llm_workers.csv")


def write_csv(path: Path, columns: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> None:
    """Write ``rows`` (missing values as empty cells) under ``columns``, replacing ``path`` atomically."""
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=list(columns), extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row[k]) for k in columns})
    write_text_atomic(path, buffer.getvalue())
