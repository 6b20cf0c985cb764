"""Writing the per-step CSVs atomically: a reader (a dashboard, the report) never sees half a file."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from locust_llm.reports.files import write_text_atomic

__all__ = ["steps_csv_path", "workers_csv_path", "write_csv"]


def steps_csv_path(csv_prefix: str) -> Path:
    return Path(f"{csv_prefix}_llm_steps.csv")


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
