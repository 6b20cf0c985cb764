"""Making a report from a run and gating it against a baseline: the glue between files and analysis.

Used at the end of a run (from the rows in memory) and by ``locust-llm report`` and ``compare`` (from the CSVs).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from locust_llm.measure.sla import Prices, Sla
from locust_llm.measure.thresholds import ERROR_BUDGET
from locust_llm.reports.compare import GateInputError, Thresholds, compare, format_comparison
from locust_llm.reports.console import console_summary
from locust_llm.reports.files import ReportInputError, read_json_object
from locust_llm.reports.html import write_html
from locust_llm.reports.load import LoadedRun
from locust_llm.reports.summary import build_summary, write_json
from locust_llm.reports.verdict import EXIT_INPUT, verdict

__all__ = ["ReportOutcome", "gate", "make_report", "read_summary", "report_paths"]


@dataclass
class ReportOutcome:
    """What a report or a gate concluded: the exit code, the text to print, and the summary when one was made."""

    exit_code: int
    text: str
    summary: dict[str, Any] | None = None


def read_summary(path: str | Path, label: str) -> dict[str, Any]:
    """A ``summary.json`` as a dict; :class:`GateInputError` (one line, naming ``label`` and the path) if unreadable."""
    return read_json_object(path, label, GateInputError)


def gate(baseline: dict[str, Any], current: dict[str, Any], thresholds: Thresholds) -> ReportOutcome:
    result = compare(baseline, current, thresholds)
    return ReportOutcome(1 if result.regressed else 0, format_comparison(result), current)


def report_paths(out_dir: str | Path) -> tuple[Path, Path]:
    """``(summary.json, report.html)`` in ``out_dir``."""
    return Path(out_dir) / "summary.json", Path(out_dir) / "report.html"


def make_report(
    run: LoadedRun,
    paths: tuple[Path, Path] | None,
    sla: Sla,
    prices: Prices,
    baseline: str | Path | None = None,
    thresholds: Thresholds | None = None,
    error_budget: float = ERROR_BUDGET,
) -> ReportOutcome:
    """The summary of ``run``, written to ``paths`` (summary.json, report.html) unless None, compared with
    ``baseline`` when given; the outcome's exit code is the verdict (:func:`locust_llm.reports.verdict.verdict`).

    Raises :class:`ReportInputError` when the report cannot be written."""
    summary = build_summary(run, sla, prices, error_budget)
    text = console_summary(summary)
    if paths is not None:
        json_path, html_path = paths
        try:
            write_json(summary, json_path)
            write_html(summary, run.timeline, html_path)
        except OSError as exc:
            raise ReportInputError(f"cannot write the report to {html_path.parent}: {exc.strerror or exc}") from None
        text += f"\n  report: {html_path}\n  summary: {json_path}"
    gate_code = 0
    if baseline is not None and not summary["valid"]:
        text += f"\n\ncomparison with {baseline}: skipped, this run is invalid"
    elif baseline is not None:
        try:
            judged = gate(read_summary(baseline, "the baseline"), summary, thresholds or Thresholds())
        except GateInputError as exc:
            return ReportOutcome(EXIT_INPUT, text + f"\nerror: {exc}", summary)
        gate_code = judged.exit_code
        text += f"\n\ncomparison with {baseline}:\n" + judged.text
    code, why = verdict(summary, gate_code)
    return ReportOutcome(code, text + f"\n  verdict: exit {code}, {why}", summary)
