"""Making a report from a run, and gating it against a baseline: the file-level glue.

Used at the end of a run (``--llm-report DIR``, ``--baseline FILE``, from the rows in memory) and by
``locust-llm report`` (from the CSVs) / ``locust-llm compare``. Exit codes: 0 fine, 1 regression, 2 bad input.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from locust_llm.reports.compare import GateInputError, Thresholds, compare, format_comparison
from locust_llm.reports.files import ReportInputError
from locust_llm.reports.html import write_html
from locust_llm.reports.load import LoadedRun
from locust_llm.reports.summary import build_summary, console_summary, write_json
from locust_llm.sla import Prices, Sla

__all__ = ["ReportOutcome", "gate", "make_report", "read_summary"]


@dataclass
class ReportOutcome:
    """What a report or a gate concluded: the exit code, the text to print, and the summary when one was made."""

    exit_code: int
    text: str
    summary: dict[str, Any] | None = None


def read_summary(path: str | Path, label: str) -> dict[str, Any]:
    """A ``summary.json`` as a dict; :class:`GateInputError` (one line, naming ``label`` and the path) if unreadable."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise GateInputError(f"{label} {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise GateInputError(f"{label} {path} cannot be read ({exc})") from None
    except json.JSONDecodeError as exc:
        raise GateInputError(f"{label} {path} is not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(data, dict):
        raise GateInputError(f"{label} {path} is not a JSON object")
    return data


def gate(baseline: dict[str, Any], current: dict[str, Any], thresholds: Thresholds) -> ReportOutcome:
    result = compare(baseline, current, thresholds)
    return ReportOutcome(1 if result.regressed else 0, format_comparison(result), current)


def make_report(
    run: LoadedRun,
    out_dir: str | Path,
    sla: Sla,
    prices: Prices,
    baseline: str | Path | None = None,
    thresholds: Thresholds | None = None,
) -> ReportOutcome:
    """Write ``summary.json`` and ``report.html`` of ``run`` to ``out_dir``; compare with ``baseline`` when given.

    Raises :class:`ReportInputError` when the report cannot be written; a baseline that cannot be read gives exit
    code 2 with the report made."""
    summary = build_summary(run, sla, prices)
    out = Path(out_dir)
    try:
        write_json(summary, out / "summary.json")
        write_html(summary, run.timeline, out / "report.html")
    except OSError as exc:
        raise ReportInputError(f"cannot write the report to {out}: {exc.strerror or exc}") from None
    text = console_summary(summary) + f"\n  report: {out / 'report.html'}\n  summary: {out / 'summary.json'}"
    if baseline is None:
        return ReportOutcome(0, text, summary)
    try:
        verdict = gate(read_summary(baseline, "the baseline"), summary, thresholds or Thresholds())
    except GateInputError as exc:
        return ReportOutcome(2, text + f"\nerror: {exc}", summary)
    return ReportOutcome(verdict.exit_code, text + f"\n\ncomparison with {baseline}:\n" + verdict.text, summary)
