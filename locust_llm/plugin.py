"""The Locust adapter: flags, start-up validation, the embedded simulator, recording, and the end-of-run outputs.

Call :func:`install` once in the locustfile. It registers listeners on Locust's events:

- ``init_command_line_parser``: the flags of :mod:`locust_llm.options`;
- ``init``: one :class:`LLMRun` per environment with its :class:`~locust_llm.collect.collector.Collector`; on the
  master (or the single process) the flags are validated (a bad value exits with code 2 and a one-line error)
  and, without ``--host``, the embedded simulator starts;
- ``test_start``: the config is (re)built from the options the run was started with (workers receive them here);
- ``quitting``: the per-step CSVs and ``{prefix}_llm_run.json`` are written (the CSVs also every 10 s while
  running); with ``--llm-report DIR`` the report is made, and with ``--baseline`` the exit code follows the gate;
- ``quit``: the per-step table and the capacity summary are printed and the simulator stopped.
"""

from __future__ import annotations

import atexit
import json
import logging
import sys
import time
import urllib.request
import weakref
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import gevent
import locust
from locust.env import Environment
from locust.exception import StopTest
from locust.runners import MasterRunner, WorkerRunner

from locust_llm import __version__
from locust_llm.collect.collector import Collector
from locust_llm.collect.csvfile import steps_csv_path, workers_csv_path, write_csv
from locust_llm.collect.rows import COLUMNS, WORKER_COLUMNS, format_table
from locust_llm.metrics import RequestResult
from locust_llm.options import ConfigError, RunConfig, add_arguments
from locust_llm.sim.launcher import EmbeddedSim, SimStartError
from locust_llm.sla import Sla

__all__ = ["LLMError", "LLMRun", "install", "llm_run"]

logger = logging.getLogger("locust_llm")

_RUNS: weakref.WeakKeyDictionary[Environment, LLMRun] = weakref.WeakKeyDictionary()
_installed: set[int] = set()

CSV_REFRESH_S = 10.0
SUMMARY_LOG_PREFIX = "locust-llm-summary: "


class LLMError(Exception):
    """The exception reported on the ``E2E`` event of a failed request; its text is the classified message."""

    def __repr__(self) -> str:  # Locust's failure table shows repr(): keep it to the message itself
        return str(self)


def _role(runner: Any) -> str:
    if isinstance(runner, WorkerRunner):
        return "worker"
    return "master" if isinstance(runner, MasterRunner) else "local"


class LLMRun:
    """Per-environment state of a locust-llm run."""

    def __init__(self, environment: Environment, runner: Any) -> None:
        self.environment = environment
        self.role = _role(runner)
        self.config: RunConfig | None = None
        self.model = ""
        self.itl_events = True
        self.sla = Sla()
        self.sim: EmbeddedSim | None = None
        self.collector = Collector(environment, self.role)
        self._writer: gevent.Greenlet | None = None
        self.started = datetime.now(UTC)
        self.report_text = ""

    @property
    def is_worker(self) -> bool:
        return self.role == "worker"

    def require_config(self) -> RunConfig:
        if self.config is None:
            self.configure()
        assert self.config is not None
        return self.config

    def configure(self) -> RunConfig:
        """(Re)build the config from the environment's parsed options; raises :class:`ConfigError`."""
        config = RunConfig.from_options(self.environment.parsed_options)
        host = self.environment.host
        if config.model is None and host and (self.sim is None or host != self.sim.url):
            raise ConfigError(f"--model is required with --host (e.g. --model grok-4), got --host {host}")
        self.config = config
        self.sla = config.sla
        self.itl_events = config.itl_events
        self.model = config.model or self.model
        return config

    # -- recording ---------------------------------------------------------------------------------------------

    def record(self, result: RequestResult) -> None:
        """File ``result`` under its step and fire the Locust events ``TTFT``, ``ITL`` and ``E2E``."""
        if self.collector.closed:
            return
        result.good = self.sla.good(result)
        self.collector.record(result)
        fire = self.environment.events.request.fire
        model = result.model
        ttft = result.ttft_ns
        if ttft is not None:
            fire(
                request_type="TTFT",
                name=model,
                response_time=ttft / 1e6,
                response_length=result.prompt_tokens,
                exception=None,
                context={},
            )
            for gap in result.itl_gaps_ns() if self.itl_events else ():
                fire(request_type="ITL", name=model, response_time=gap / 1e6, response_length=0, exception=None,
                     context={})  # fmt: skip
        fire(
            request_type="E2E",
            name=model,
            response_time=result.e2e_ns / 1e6,
            response_length=result.completion_tokens,
            exception=None if result.ok else LLMError(result.error),
            context={},
        )

    def count(self, name: str, model: str, n: int = 1, at_ns: int | None = None) -> None:
        """Add ``n`` to a per-step counter (retries, fallbacks, reconnects, ...) of ``model``."""
        self.collector.count(name, model, n, time.perf_counter_ns() if at_ns is None else at_ns)

    def record_client(self, model: str, sent_ns: int, end_ns: int, ok: bool) -> None:
        """A client request, its retries and waits included (see :mod:`locust_llm.users.flow`)."""
        self.collector.record_client(model, sent_ns, end_ns, ok)

    # -- steps -------------------------------------------------------------------------------------------------

    def begin_step(self, step: int, users: int, step_duration_s: float | None = None) -> None:
        """Stamp the start of step number ``step`` (from 1) with ``users`` users."""
        warmup_s = self.require_config().warmup_s(step_duration_s)
        self.collector.begin_step(step, users, int(warmup_s * 1e9))
        logger.info("locust-llm step %d: %d users (warm-up %.1f s)", step, users, warmup_s)
        if self._writer is None and self.csv_prefix:
            self._writer = gevent.spawn(self._refresh_csv)

    def end(self) -> None:
        self.collector.end()

    # -- outputs -----------------------------------------------------------------------------------------------

    @property
    def csv_prefix(self) -> str | None:
        """Locust's ``--csv`` prefix; with only ``--llm-report DIR``, ``DIR/locust-llm``."""
        prefix = getattr(self.environment.parsed_options, "csv_prefix", None)
        if not prefix and self.config is not None and self.config.report_dir:
            prefix = str(Path(self.config.report_dir) / "locust-llm")
        return prefix

    def rows(self) -> list[dict[str, Any]]:
        config = self.require_config()
        return self.collector.rows(config.max_generator_cpu_pct, config.max_sched_lag_ms)

    def write_csv(self) -> None:
        prefix = self.csv_prefix
        if not prefix:
            return
        rows = self.rows()
        write_csv(steps_csv_path(prefix), COLUMNS, rows)
        if self.role == "master":
            write_csv(workers_csv_path(prefix), WORKER_COLUMNS, self.collector.worker_rows())

    def run_meta(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        """``{prefix}_llm_run.json``: how the run was made (never the API key)."""
        config = self.require_config()
        meta: dict[str, Any] = {
            "settings": config.settings(),
            "model": self.model,
            "host": _without_credentials(self.environment.host or ""),
            "started": self.started.isoformat(timespec="seconds"),
            "role": self.role,
            "versions": {"locust": locust.__version__, "locust_llm": __version__},
        }
        if self.sim is not None and self.sim.url:
            meta["simulator"] = self._sim_truth(rows)
        return meta

    def _sim_truth(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        ok = sum(r["ok"] for r in rows)
        prompt = round(sum(r["prompt_tokens"] for r in rows) / ok) if ok else 0
        query = f"model={self.model}&prompt_tokens={prompt}&max_tokens={self.require_config().max_tokens.mean}"
        assert self.sim is not None and self.sim.url is not None
        try:
            url = self.sim.url.rsplit("/v1", 1)[0] + "/sim/truth?" + query
            with urllib.request.urlopen(url, timeout=10) as resp:
                return dict(json.load(resp))
        except (OSError, ValueError) as exc:
            return {"error": f"could not read the simulator's truth: {exc}"}

    def report(self) -> None:
        """Write the run's metadata and, with ``--llm-report``, the report; set the exit code for ``--baseline``."""
        prefix, config = self.csv_prefix, self.require_config()
        if not prefix:
            return
        meta = self.run_meta(self.rows())
        Path(f"{prefix}_llm_run.json").write_text(json.dumps(meta, indent=2, default=str) + "\n", encoding="utf-8")
        if not config.report_dir and not config.baseline:
            return
        from locust_llm.reports.make import make_report

        outcome = make_report(prefix, config.report_dir or prefix, config.sla, config.prices, config.baseline,
                              config.gate)  # fmt: skip
        self.report_text = outcome.text
        if config.summary_log and outcome.summary is not None:
            line = json.dumps(outcome.summary, separators=(",", ":"), default=str)
            self.report_text += f"\n{SUMMARY_LOG_PREFIX}{line}"
        if config.baseline or outcome.exit_code == 2:
            self.environment.process_exit_code = outcome.exit_code

    def _refresh_csv(self) -> None:
        while not self.collector.closed:
            gevent.sleep(CSV_REFRESH_S)
            if not self.collector.closed:
                try:
                    self.write_csv()
                except OSError as exc:
                    logger.error("locust-llm: could not write the per-step CSV: %s", exc)

    def finish(self) -> None:
        """End of the run: stop recording and write the outputs (idempotent)."""
        if self.collector.closed:
            return
        self.end()
        self.collector.closed = True
        self.collector.detach()
        if self._writer is not None:
            self._writer.kill(block=False)
        self.write_csv()
        try:
            self.report()
        except OSError as exc:
            logger.error("locust-llm: could not write the report: %s", exc)
            self.environment.process_exit_code = 2

    # -- embedded simulator ------------------------------------------------------------------------------------

    def start_sim(self, extra_args: tuple[str, ...]) -> str:
        self.sim = EmbeddedSim(list(extra_args))
        atexit.register(self.sim.stop)
        url = self.sim.start()
        logger.info(
            "No --host given: started the embedded simulated LLM server at %s. "
            "Pass --host and --model to test a real endpoint.",
            url,
        )
        return url

    def served_models(self) -> list[str]:
        assert self.sim is not None
        return self.sim.models()

    def stop_sim(self) -> None:
        if self.sim is not None:
            self.sim.stop()


def _without_credentials(url: str) -> str:
    parts = urlsplit(url)
    if parts.username or parts.password:
        parts = parts._replace(netloc=(parts.hostname or "") + (f":{parts.port}" if parts.port else ""))
    return urlunsplit(parts)


def llm_run(environment: Environment) -> LLMRun:
    """The :class:`LLMRun` of ``environment``; a clear error if :func:`install` was not called."""
    run = _RUNS.get(environment)
    if run is None:
        raise StopTest(
            "locust-llm is not installed in this locustfile: add 'import locust_llm; locust_llm.install()' to it."
        )
    return run


def _fail_startup(message: str) -> None:
    sys.stderr.write(f"locust-llm: error: {message}\n")
    sys.exit(2)


def _on_init(environment: Environment, runner: Any = None, **_kwargs: Any) -> None:
    run = _RUNS[environment] = LLMRun(environment, runner)
    run.collector.attach()
    if run.is_worker:
        return
    try:
        config = RunConfig.from_options(environment.parsed_options)
    except ConfigError as exc:
        _fail_startup(str(exc))
        return
    if not environment.host:
        _start_embedded_sim(run, config)
    try:
        run.configure()
    except ConfigError as exc:
        run.stop_sim()
        _fail_startup(str(exc))


def _start_embedded_sim(run: LLMRun, config: RunConfig) -> None:
    environment = run.environment
    try:
        environment.host = run.start_sim(config.sim_args)
        served = run.served_models()
    except (SimStartError, OSError) as exc:
        run.stop_sim()
        _fail_startup(f"{exc}; check --sim-args {' '.join(config.sim_args)!r} with 'locust-llm sim --help'")
        return
    if config.model is not None and config.model not in served:
        run.stop_sim()
        _fail_startup(
            f"--model {config.model} was given without --host, and the embedded simulator serves "
            f"{', '.join(served)}. Pass --host URL to test a real endpoint."
        )
    run.model = config.model or served[0]
    if environment.parsed_options is not None:
        environment.parsed_options.model = run.model  # workers learn the model from the spawn message


def _on_test_start(environment: Environment, **_kwargs: Any) -> None:
    run = _RUNS.get(environment)
    if run is None:
        return
    try:
        run.configure()
    except ConfigError as exc:
        logger.error("locust-llm: %s", exc)
        if environment.runner is not None and not run.is_worker:
            environment.runner.quit()


def _on_quitting(environment: Environment, **_kwargs: Any) -> None:
    run = _RUNS.get(environment)
    if run is None or run.is_worker:
        return
    run.finish()


def _on_quit(**_kwargs: Any) -> None:
    for run in list(_RUNS.values()):
        if run.is_worker:
            continue
        rows = run.rows()
        if rows:
            print("\nlocust-llm per-step results (steady state; warm-up after each step change excluded)")
            print(format_table(rows), flush=True)
            invalid = [f"step {r['step']}: {r['invalid_reasons']}" for r in rows if not r["valid"]]
            for line in invalid:
                print(f"  invalid {line}", flush=True)
        if run.report_text:
            print("\n" + run.report_text, flush=True)
        run.stop_sim()


def install(events: Any = None) -> None:
    """Register locust-llm's flags and event listeners (idempotent). Call once from the locustfile."""
    events = events or locust.events
    if id(events) in _installed:
        return
    _installed.add(id(events))
    events.init_command_line_parser.add_listener(add_arguments)
    events.init.add_listener(_on_init)
    events.test_start.add_listener(_on_test_start)
    events.quitting.add_listener(_on_quitting)
    events.quit.add_listener(_on_quit)
