"""The notebook API: a run's per-step rows as a pandas DataFrame, and its summary as a dict.

``load_steps("runs/demo")`` takes a ``--csv`` prefix, a directory or an ``_llm_steps.csv``; dtypes follow
:class:`~locust_llm.measure.rows.StepRow` (nullable ``Int64``, ``float64``, ``boolean``, ``string``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from locust_llm.measure.rows import COLUMNS, column_types
from locust_llm.reports.files import ReportInputError
from locust_llm.reports.load import load_run, steps_path
from locust_llm.reports.make import read_summary

__all__ = ["load_steps", "load_summary"]

_DTYPES = {int: "Int64", float: "float64", bool: "boolean", str: "string"}


def _steps_csv_in(directory: Path) -> Path | None:
    found = sorted(directory.glob("*_llm_steps.csv"))
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        raise ReportInputError(f"{directory} holds several runs ({names}): pass one prefix, e.g. {found[0]}")
    return found[0] if found else None


def load_steps(prefix_or_dir: str | Path) -> pd.DataFrame:
    """The per-step rows of a run, one row per (step, model), with the dtypes of the module docstring.

    ``prefix_or_dir``: a run's ``--csv`` prefix or its ``_llm_steps.csv`` (plain Locust CSVs work too, see
    :func:`~locust_llm.reports.load.load_run`); else a directory holding one ``*_llm_steps.csv``, or a report
    directory (its ``summary.json`` carries the steps)."""
    target = Path(prefix_or_dir)
    if target.is_dir() and not steps_path(target).exists():
        csv_path = _steps_csv_in(target)
        if csv_path is not None:
            target = csv_path
        elif (target / "summary.json").exists():
            return _frame(load_summary(target)["steps"])
        else:
            raise ReportInputError(f"no run found in {target}: expected a *_llm_steps.csv or a summary.json")
    return _frame(load_run(target).steps)


def _frame(rows: list[Any]) -> pd.DataFrame:
    types = column_types()
    frame = pd.DataFrame.from_records(rows, columns=list(COLUMNS))
    return frame.astype({name: _DTYPES[types[name]] for name in COLUMNS})


def load_summary(path: str | Path) -> dict[str, Any]:
    """A report's ``summary.json`` (the file, or the directory holding it) as a dict; a one-line ``ValueError``
    when it cannot be read."""
    path = Path(path)
    return read_summary(path / "summary.json" if path.is_dir() else path, "the summary")
