"""Writing ``{csv_prefix}_llm_steps.csv`` (atomically: a reader never sees half a file)."""

from __future__ import annotations

import csv
import os
import tempfile
from pathlib import Path
from typing import Any

from locust_llm.collect.rows import COLUMNS

__all__ = ["steps_csv_path", "write_steps_csv"]


def steps_csv_path(csv_prefix: str) -> Path:
    return Path(f"{csv_prefix}_llm_steps.csv")


def write_steps_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=COLUMNS, extrasaction="ignore")
            writer.writeheader()
            for row in rows:
                writer.writerow({k: ("" if row.get(k) is None else row[k]) for k in COLUMNS})
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
