"""Writing the per-step CSVs atomically: a reader (a dashboard, the report) never sees half a file."""

from __future__ import annotations

import csv
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["steps_csv_path", "workers_csv_path", "write_csv"]


def steps_csv_path(csv_prefix: str) -> Path:
    return Path(f"{csv_prefix}_llm_steps.csv")


def workers_csv_path(csv_prefix: str) -> Path:
    return Path(f"{csv_prefix}_llm_workers.csv")


def write_csv(path: Path, columns: Sequence[str], rows: list[dict[str, Any]]) -> None:
    """Write ``rows`` (missing values as empty cells) under ``columns``, replacing ``path`` atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(columns), extrasaction="ignore")
            writer.writeheader()
            for row in rows:
                writer.writerow({k: ("" if row.get(k) is None else row[k]) for k in columns})
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
