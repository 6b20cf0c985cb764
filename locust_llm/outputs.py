"""What a run leaves behind: the per-step CSVs (refreshed while it runs), ``{prefix}_llm_run.json``, the report
and the exit code, and the table printed at the end. Runs on the master or the single process.

Files, with ``--csv PREFIX`` (or, with only ``--llm-report DIR``, ``PREFIX = DIR/locust-llm``):

- ``{prefix}_llm_steps.csv`` and, on a master, ``{prefix}_llm_workers.csv``: every ``CSV_REFRESH_S`` seconds and
  at the end (atomically replaced);
- ``{prefix}_llm_run.json``: how the run was made (settings without secrets, model, host without credentials,
  start time, versions, and the embedded simulator's analytic truth);
- with ``--llm-report DIR`` or ``--baseline FILE``: ``summary.json`` and ``report.html``, made from the rows in
  memory; with ``--baseline`` the exit code follows the gate (0 / 1), and bad input exits 2.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import gevent
import locust

from locust_llm import __version__
from locust_llm.collect.csvfile import steps_csv_path, workers_csv_path, write_csv
from locust_llm.collect.rows import COLUMNS, WORKER_COLUMNS, StepRow, format_table
from locust_llm.reports.files import ReportInputError, write_text_atomic
from locust_llm.run import LLMRun

__all__ = ["CSV_REFRESH_S", "SUMMARY_LOG_PREFIX", "csv_prefix", "finish", "print_results", "rows", "start_refresh"]

logger = logging.getLogger("locust_llm")

CSV_REFRESH_S = 10.0
SUMMARY_LOG_PREFIX = "locust-llm-summary: "


def csv_prefix(run: LLMRun) -> str | None:
    """Locust's ``--csv`` prefix; with only ``--llm-report DIR``, ``DIR/locust-llm``."""
    prefix = getattr(run.environment.parsed_options, "csv_prefix", None)
    if not prefix and run.config is not None and run.config.report_dir:
        prefix = str(Path(run.config.report_dir) / "locust-llm")
    return prefix


def rows(run: LLMRun) -> list[StepRow]:
    config = run.require_config()
    return run.collector.rows(config.max_generator_cpu_pct, config.max_sched_lag_ms)


def write_csvs(run: LLMRun) -> None:
    prefix = csv_prefix(run)
    if not prefix:
        return
    write_csv(steps_csv_path(prefix), COLUMNS, rows(run))
    if run.role == "master":
        write_csv(workers_csv_path(prefix), WORKER_COLUMNS, run.collector.worker_rows())


def start_refresh(run: LLMRun) -> None:
    """Rewrite the per-step CSVs every ``CSV_REFRESH_S`` seconds until the run is finished."""
    if run.writer is None and csv_prefix(run):
        run.writer = gevent.spawn(_refresh, run)


def _refresh(run: LLMRun) -> None:
    while not run.closed:
        gevent.sleep(CSV_REFRESH_S)
        if not run.closed:
            try:
                write_csvs(run)
            except OSError as exc:
                logger.error("locust-llm: could not write the per-step CSV: %s", exc)


def run_meta(run: LLMRun, step_rows: list[StepRow]) -> dict[str, Any]:
    """``{prefix}_llm_run.json``: how the run was made (never the API key)."""
    config = run.require_config()
    meta: dict[str, Any] = {
        "settings": config.settings(),
        "model": run.model,
        "host": without_credentials(run.environment.host or ""),
        "started": run.started.isoformat(timespec="seconds"),
        "role": run.role,
        "versions": {"locust": locust.__version__, "locust_llm": __version__},
    }
    if run.sim is not None and run.sim.url:
        ok = sum(r["ok"] for r in step_rows)
        prompt = round(sum(r["prompt_tokens"] for r in step_rows) / ok) if ok else 0
        meta["simulator"] = run.sim.truth(run.model, prompt, config.max_tokens.mean)
    return meta


def without_credentials(url: str) -> str:
    parts = urlsplit(url)
    if parts.username or parts.password:
        parts = parts._replace(netloc=(parts.hostname or "") + (f":{parts.port}" if parts.port else ""))
    return urlunsplit(parts)


def _report(run: LLMRun, prefix: str, step_rows: list[StepRow], meta: dict[str, Any]) -> None:
    """With ``--llm-report`` or ``--baseline``: the report from the rows in memory, and the gate's exit code."""
    from locust_llm.reports.history import locust_timeline
    from locust_llm.reports.load import LoadedRun
    from locust_llm.reports.make import make_report

    config = run.require_config()
    loaded = LoadedRun(step_rows, "llm_steps", steps_csv_path(prefix), run_meta=meta, timeline=locust_timeline(prefix))
    outcome = make_report(loaded, config.report_dir or prefix, config.sla, config.prices, config.baseline,
                          config.gate)  # fmt: skip
    run.report_text = outcome.text
    if config.summary_log and outcome.summary is not None:
        line = json.dumps(outcome.summary, separators=(",", ":"), default=str)
        run.report_text += f"\n{SUMMARY_LOG_PREFIX}{line}"
    if config.baseline or outcome.exit_code == 2:
        run.environment.process_exit_code = outcome.exit_code


def finish(run: LLMRun) -> None:
    """End of the run: stop recording, write the CSVs, the run's metadata and the report (idempotent)."""
    if run.closed:
        return
    run.close()
    if run.writer is not None:
        run.writer.kill(block=False)
    prefix = csv_prefix(run)
    if not prefix:
        return
    step_rows = rows(run)
    try:
        write_csvs(run)
        meta = run_meta(run, step_rows)
        write_text_atomic(Path(f"{prefix}_llm_run.json"), json.dumps(meta, indent=2, default=str) + "\n")
        if run.require_config().report_dir or run.require_config().baseline:
            _report(run, prefix, step_rows, meta)
    except (OSError, ReportInputError) as exc:
        logger.error("locust-llm: could not write the report: %s", exc)
        run.report_text = f"error: {exc}"
        run.environment.process_exit_code = 2


def print_results(run: LLMRun) -> None:
    """The per-step table, the invalid steps with their reasons, and the report's text."""
    step_rows = rows(run)
    if step_rows:
        print("\nlocust-llm per-step results (steady state; warm-up after each step change excluded)")
        print(format_table(step_rows), flush=True)
        for row in step_rows:
            if not row["valid"]:
                print(f"  invalid step {row['step']}: {row['invalid_reasons']}", flush=True)
    if run.report_text:
        print("\n" + run.report_text, flush=True)
