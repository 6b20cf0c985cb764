"""What a run leaves behind, on the master or the single process: files, the exit code, the printed table.

``{prefix}_llm_steps.csv`` (and ``_llm_workers.csv``, ``_llm_turns.csv``, ``_llm_histograms.json``) refreshed every
:data:`CSV_REFRESH_S` and at the end; ``{prefix}_llm_run.json`` (settings without secrets, versions, the simulator's
truth); ``summary.json`` and ``report.html`` from the rows in memory. The exit code is the summary's verdict
(:mod:`locust_llm.reports.verdict`).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from math import inf
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import gevent
import locust

from locust_llm import __version__
from locust_llm.measure import shards
from locust_llm.measure.rows import COLUMNS, WORKER_COLUMNS, StepRow, format_table, step_rows
from locust_llm.measure.turns import TURN_COLUMNS, TurnRow, turn_rows, turns_csv_path
from locust_llm.protocol.tokens import message_tokens
from locust_llm.reports.files import (
    ReportInputError,
    histograms_path,
    steps_csv_path,
    workers_csv_path,
    write_csv,
    write_text_atomic,
)
from locust_llm.reports.target import changes
from locust_llm.reports.verdict import EXIT_INPUT
from locust_llm.runtime.run import LLMRun
from locust_llm.runtime.target_probe import read_target

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
    return run.rows_now()


def conversation_rows(run: LLMRun) -> list[TurnRow]:
    """The per-turn rows of a run with conversations (``--turns``); none otherwise."""
    config = run.require_config()
    if not config.conversations:
        return []
    collector = run.collector
    return turn_rows(collector.results(), collector.windows(config.validity))


def write_csvs(run: LLMRun) -> None:
    prefix = csv_prefix(run)
    if not prefix:
        return
    config, collector = run.require_config(), run.collector
    table = collector.results()  # one copy of the statistics for every file below
    windows = collector.windows(config.validity, table=table)
    write_csv(steps_csv_path(prefix), COLUMNS, step_rows(table, windows, config.row_prices))
    hists = shards.dump(table, windows)
    write_text_atomic(histograms_path(prefix), json.dumps(hists, separators=(",", ":")))
    if config.conversations:
        write_csv(turns_csv_path(prefix), TURN_COLUMNS, turn_rows(table, windows))
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
        "run": run.number,
        "settings": config.settings(),
        "model": run.model,
        "host": without_credentials(run.environment.host or ""),
        "started": run.started.isoformat(timespec="seconds"),
        "role": run.role,
        "versions": {"locust": locust.__version__, "locust_llm": __version__},
        "totals": totals(run),
        "output_length": {"mode": config.workload.output_length, "exact": dict(run.collector.exact_lengths)},
    }
    if run.target is not None:
        meta["target"] = run.target
    if run.stopped_for:
        meta["invalid_reasons"] = [run.stopped_for]
    if run.role == "master" and run.collector.workers.lost:
        e2e_s: dict[int, float] = {}  # each step's E2E p50: the fastest model's, for the bound on a lost worker
        for row in step_rows:
            if row["e2e_p50_ms"]:
                e2e_s[row["step"]] = min(e2e_s.get(row["step"], inf), row["e2e_p50_ms"] / 1000)
        meta["lost_workers"] = run.collector.lost_workers(e2e_s)
    if run.search is not None:
        meta["search"] = run.search
    if run.sim is not None and run.sim.url:
        ok = sum(r["ok"] for r in step_rows)
        prompt = round(sum(r["prompt_tokens"] for r in step_rows) / ok) if ok else 0
        exact = {"min_tokens": config.max_tokens.mean} if run.collector.exact_lengths.get(run.model) else {}
        meta["simulator"] = run.sim.truth(run.model, prompt, config.max_tokens.mean, **shared_prefix(config), **exact)
        if config.rates and config.trace is None:  # a search's truth at each rate it probed (not a trace's arrivals)
            probed = sorted({p["load"] for p in run.search["probes"]}) if run.search else config.rates
            meta["simulator"]["open_loop"] = [
                run.sim.truth(
                    run.model,
                    prompt,
                    config.max_tokens.mean,
                    rate=rate,
                    arrivals=config.arrivals.describe(),
                    seed=str(config.seed or 0),
                    **exact,
                )
                for rate in probed
            ]
    return meta


def shared_prefix(config: Any) -> dict[str, int]:
    """The truth's shared prefix: ``--system-prompt``'s tokens (whether the simulator caches it depends on its
    ``--prefix-cache`` mode and ``--cache-control``)."""
    system = config.workload.system_messages()
    if not system:
        return {}
    return {"prefix_tokens": sum(map(message_tokens, system)), "prefix_marked": int(config.workload.cache_control)}


def totals(run: LLMRun) -> dict[str, Any]:
    """Every request the run recorded, all steps and phases (warm-up, steady, drain) together and by phase; with
    open-loop arrivals, ``open_loop``: the arrivals, those dropped at the in-flight cap, those sent, the client
    requests that ended (retries and fallbacks included, each counted once) and ``unended``, sent but never ended
    (cancelled when the run stopped: 0 when the drain let every request finish); ``no_done``: the streams that ended
    without ``data: [DONE]`` after a ``finish_reason`` (complete); ``interrupted``: the attempts sent and then cut by
    the stop of the run, which are in no statistics, Locust's included."""
    by_phase: dict[str, dict[str, int]] = {}
    arrivals = dropped = ended = no_done = interrupted = 0
    for key, stats in run.collector.results():
        phase = by_phase.setdefault(key.phase, {"requests": 0, "ok": 0})
        phase["requests"] += stats.counts["requests"]
        phase["ok"] += stats.counts["ok"]
        arrivals += stats.counts["arrivals"]
        dropped += stats.counts["dropped"]
        ended += stats.counts["client_requests"]
        no_done += stats.counts["no_done"]
        interrupted += stats.counts["interrupted"]
    out: dict[str, Any] = {
        "requests": sum(p["requests"] for p in by_phase.values()),
        "ok": sum(p["ok"] for p in by_phase.values()),
        "by_phase": by_phase,
        "no_done": no_done,
        "interrupted": interrupted,
    }
    if arrivals:
        sent = arrivals - dropped
        out["open_loop"] = {
            "arrivals": arrivals,
            "dropped": dropped,
            "sent": sent,
            "ended": ended,
            "unended": sent - ended,
        }
    return out


def without_credentials(url: str) -> str:
    parts = urlsplit(url)
    if parts.username or parts.password:
        parts = parts._replace(netloc=(parts.hostname or "") + (f":{parts.port}" if parts.port else ""))
    return urlunsplit(parts)


def prepare() -> None:
    """Import the report's modules now (plotly takes a while), so that the end of the run is quick: Locust's own
    CSV writer fails on its closed files if the shutdown takes long (seen with --processes)."""
    import locust_llm.reports.make  # noqa: F401


def report_paths(run: LLMRun, prefix: str | None) -> tuple[Path, Path] | None:
    """Where the report goes: ``--llm-report DIR``; by default next to the CSVs; nowhere with ``off`` or no CSVs."""
    report_dir = run.require_config().report_dir
    if report_dir and report_dir.lower() == "off":
        return None
    if report_dir:
        return Path(report_dir) / "summary.json", Path(report_dir) / "report.html"
    if prefix:
        return Path(f"{prefix}_llm_summary.json"), Path(f"{prefix}_llm_report.html")
    return None


def _report(run: LLMRun, prefix: str | None, step_rows: list[StepRow], meta: dict[str, Any]) -> int | None:
    """The capacity summary from the rows in memory (and the report files); the verdict's exit code."""
    from locust_llm.reports.history import locust_timeline
    from locust_llm.reports.load import LoadedRun
    from locust_llm.reports.make import make_report

    config = run.require_config()
    timeline = locust_timeline(prefix) if prefix else []
    path = steps_csv_path(prefix) if prefix else Path("-")
    loaded = LoadedRun(
        step_rows,
        "llm_steps",
        path,
        run_meta=meta,
        timeline=timeline,
        turns=conversation_rows(run),
        table=run.collector.results(),
    )
    outcome = make_report(
        loaded, report_paths(run, prefix), config.sla, config.prices, config.baseline, config.gate, config.error_budget
    )
    run.report_text = outcome.text
    run.summary = outcome.summary
    if config.summary_log and outcome.summary is not None:
        line = json.dumps(outcome.summary, separators=(",", ":"), default=str)
        run.report_text += f"\n{SUMMARY_LOG_PREFIX}{line}"
    return outcome.exit_code


def _exit_code_on_error_given() -> bool:
    """Whether Locust's ``--exit-code-on-error`` was given explicitly (it then replaces the verdict)."""
    given = any(a == "--exit-code-on-error" or a.startswith("--exit-code-on-error=") for a in sys.argv)
    return given or bool(os.environ.get("LOCUST_EXIT_CODE_ON_ERROR"))


def finish(run: LLMRun) -> None:
    """End of the run: stop recording, write the CSVs and the run's metadata, make the capacity summary (and its
    report files) and set the exit code to its verdict (:mod:`locust_llm.reports.verdict`). Idempotent."""
    if run.closed:
        return
    run.scraper.stop()
    run.close()
    if run.writer is not None:
        run.writer.kill(block=False)
        run.writer = None
    prefix = csv_prefix(run)
    step_rows = rows(run)
    run.progress.finish(step_rows)
    if run.target is not None and "changed_during_run" not in run.target:  # read again: did it change under the load?
        run.target = {**run.target, "changed_during_run": changes(run.target, read_target(run))}
    code: int | None = None
    try:
        meta = run_meta(run, step_rows)
        if meta["totals"]["no_done"]:
            logger.warning(
                "locust-llm: the server ends streams without [DONE] (%d requests); counted as complete because "
                "each had a finish_reason",
                meta["totals"]["no_done"],
            )
        for lost in meta.get("lost_workers", ()):
            logger.warning(
                "locust-llm: worker %s, lost in step %d: its reports counted %d requests; what it sent in the %s s "
                "before it was found lost is counted nowhere (at most %s requests, lost_workers in _llm_run.json)",
                lost["worker"],
                lost["lost_in_step"],
                lost["requests_reported"],
                lost["silent_s"],
                lost["unreported_at_most"],
            )
        if prefix:
            write_csvs(run)
            write_text_atomic(Path(f"{prefix}_llm_run.json"), json.dumps(meta, indent=2, default=str) + "\n")
        if step_rows:
            code = _report(run, prefix, step_rows, meta)
    except (OSError, ReportInputError) as exc:
        logger.error("locust-llm: could not write the report: %s", exc)
        run.report_text = f"error: {exc}"
        code = EXIT_INPUT
    if run.fatal_message:
        code = EXIT_INPUT
    if code is not None and (code == EXIT_INPUT or not _exit_code_on_error_given()):
        run.environment.process_exit_code = code
    run.finished = True


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
