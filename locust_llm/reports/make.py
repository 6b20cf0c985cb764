"""Making a report from a run's files, and gating it against a baseline: the file-level glue.

Used at the end of a run (``--llm-report DIR``, ``--baseline FILE``) and by ``locust-llm report`` /
``locust-llm compare``. Exit codes: 0 fine, 1 regression, 2 bad input.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from locust_llm.reports.compare import GateInputError, Thresholds, compare, format_comparison
from locust_llm.reports.html import write_html
from locust_llm.reports.load import ReportInputError, load_run
from locust_llm.reports.summary import build_summary, console_summary, write_json
from locust_llm.sla import Prices, Sla

__all__ = ["Outcome", "gate", "load_summary", "make_report"]


@dataclass
class Outcome:
    exit_code: int
    text: str
    summary: dict[str, Any] | None = None


def load_summary(path: str | Path, label: str) -> dict[str, Any]:
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


def gate(baseline: dict[str, Any], current: dict[str, Any], thresholds: Thresholds) -> Outcome:
    result = compare(baseline, current, thresholds)
    return Outcome(1 if result.regressed else 0, format_comparison(result), current)


def make_report(
    prefix: str | Path,
    out_dir: str | Path,
    sla: Sla,
    prices: Prices,
    baseline: str | Path | None = None,
    thresholds: Thresholds | None = None,
) -> Outcome:
    """Write ``summary.json`` and ``report.html`` to ``out_dir``; compare with ``baseline`` when given."""
    try:
        run = load_run(prefix)
        summary = build_summary(run, sla, prices)
        out = Path(out_dir)
        write_json(summary, out / "summary.json")
        write_html(summary, run.timeline, out / "report.html")
    except (ReportInputError, OSError) as exc:
        return Outcome(2, f"error: {exc}")
    text = console_summary(summary) + f"\n  report: {out / 'report.html'}\n  summary: {out / 'summary.json'}"
    if baseline is None:
        return Outcome(0, text, summary)
    try:
        verdict = gate(load_summary(baseline, "the baseline"), summary, thresholds or Thresholds())
    except GateInputError as exc:
        return Outcome(2, text + f"\nerror: {exc}", summary)
    return Outcome(verdict.exit_code, text + f"\n\ncomparison with {baseline}:\n" + verdict.text, summary)
