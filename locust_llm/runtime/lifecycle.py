"""The life of a run in one Locust process: begin, end, and the files of earlier runs.

Each *Start* in the web UI begins a new run, recorded afresh. The latest run's files are ``{prefix}_llm_*``; when a
new run begins, the previous run's become ``{prefix}_run{N}_llm_*`` (``DIR/run{N}/`` for ``--llm-report DIR``). At
``test_stop`` a single process finishes its outputs at once; a master first waits :data:`WORKER_GRACE_S` for its
workers' last reports.
"""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime
from pathlib import Path

import gevent

from locust_llm.config.parsers import ConfigError
from locust_llm.runtime import outputs
from locust_llm.runtime.preflight import preflight
from locust_llm.runtime.run import LLMRun
from locust_llm.runtime.server_scraper import metrics_urls
from locust_llm.runtime.target_probe import read_target

__all__ = ["WORKER_GRACE_S", "begin_run", "end_run"]

logger = logging.getLogger("locust_llm")

WORKER_GRACE_S = 3.5
_FILES = ("steps.csv", "workers.csv", "turns.csv", "server_metrics.csv", "run.json", "summary.json", "report.html")


def begin_run(run: LLMRun) -> str | None:
    """Begin the next run (master or single process): finish and set aside the previous one, rebuild the config from
    the options it was started with, record afresh, and send the preflight request. Returns the message that stops
    the run before any load, or None."""
    if run.number:
        outputs.finish(run)
        _archive(run)
    try:
        run.configure()
    except ConfigError as exc:
        return str(exc)
    run.environment.process_exit_code = None  # the verdict of this run will say
    run.number += 1
    run.recording, run.finished = True, False
    run.fatal_message = run.report_text = run.stopped_for = ""
    run.summary = run.search = run.target = None
    run.started = datetime.now(UTC)
    run.collector.reset(run.number)
    outputs.start_refresh(run)
    run.target = read_target(run)  # before the preflight, which may set a hold the load must start right after
    message = preflight(run)
    if message is None:
        config = run.require_config()
        urls = metrics_urls(config.server_metrics, run.environment.host)
        prefix = outputs.csv_prefix(run)
        path = Path(f"{prefix}_llm_server_metrics.csv") if prefix else None
        run.scraper.start(
            urls, config.server_metrics_interval_s, auto=config.server_metrics == ("auto",), csv_path=path
        )
    return message


def end_run(run: LLMRun) -> None:
    """``test_stop``: the run has ended (its current step is partial when the shape had not ended)."""
    if not run.recording:
        return
    run.collector.stop()
    run.scraper.stop()
    run.recording = False
    if run.role == "master":
        gevent.spawn_later(WORKER_GRACE_S, _finish_if_current, run, run.number)
    else:
        outputs.finish(run)


def _finish_if_current(run: LLMRun, number: int) -> None:
    if run.number == number:
        outputs.finish(run)


def _archive(run: LLMRun) -> None:
    """Rename the finished run's files ``{prefix}_run{N}_llm_*`` (``DIR/run{N}/`` for ``--llm-report DIR``)."""
    prefix = outputs.csv_prefix(run)
    number = run.number
    moves = []
    if prefix:
        moves += [(Path(f"{prefix}_llm_{name}"), Path(f"{prefix}_run{number}_llm_{name}")) for name in _FILES]
    report_dir = run.require_config().report_dir
    if report_dir and report_dir.lower() != "off":
        moves += [
            (Path(report_dir) / name, Path(report_dir) / f"run{number}" / name)
            for name in ("summary.json", "report.html")
        ]
    for source, target in moves:
        if source.exists():
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(source, target)
            except OSError as exc:
                logger.error("locust-llm: could not keep run %d's %s: %s", number, source, exc)
