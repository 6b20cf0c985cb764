"""Run state: one :class:`LLMRun` per Locust environment (role, config, model, collector, recorder, simulator).

The plugin creates it in ``init``; users and shapes find it with :func:`llm_run`. It holds state and the few
transitions of a run (configure, begin, begin a step, end); recording is the recorder's and files are the outputs'.
"""

from __future__ import annotations

import logging
import sys
import weakref
from collections.abc import Callable
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import gevent
from locust.env import Environment
from locust.exception import StopTest
from locust.runners import MasterRunner, WorkerRunner

from locust_llm.config.parsers import ConfigError
from locust_llm.config.run_config import RunConfig, is_secret_header
from locust_llm.config.tls import Proxy, proxy_for
from locust_llm.measure.health import needed_step_s, warmup_for
from locust_llm.runtime.collector import Collector
from locust_llm.runtime.embedded_sim import EmbeddedSim
from locust_llm.runtime.progress import Progress
from locust_llm.runtime.recorder import Recorder
from locust_llm.runtime.server_scraper import ServerScraper

__all__ = ["FATAL_MESSAGE", "LLMRun", "all_runs", "find_run", "llm_run", "new_run"]

logger = logging.getLogger("locust_llm")

FATAL_MESSAGE = "locust_llm_fatal"

_RUNS: weakref.WeakKeyDictionary[Environment, LLMRun] = weakref.WeakKeyDictionary()


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
        self.sim: EmbeddedSim | None = None
        self.collector = Collector(environment, self.role)
        self.recorder = Recorder(
            environment.events, self.collector, self.fatal, lambda: getattr(environment.runner, "stats", None)
        )
        self.started = datetime.now(UTC)
        self.report_text = ""
        self.writer: Any = None  # the greenlet refreshing the CSVs (see locust_llm.runtime.outputs)
        self.fatal_message = ""  # why the run was stopped (see fatal); it then exits with code 2
        self.stopped_for = ""  # why the run was stopped early and is invalid (see too_few_workers): exit 3
        self.number = 0  # the current run of this process: 1, 2, ... (the web UI starts one per Start)
        self.recording = False  # between the first step of a run and its stop
        self.finished = False  # its outputs are written (see locust_llm.runtime.outputs.finish)
        self.summary: dict[str, Any] | None = None  # the capacity summary of the last finished run
        self.search: dict[str, Any] | None = None  # --search: its record so far (see locust_llm.runtime.search_driver)
        self.target: dict[str, Any] | None = None  # the fingerprint read at the preflight (runtime.target_probe)
        self.contract_broken: list[str] = []
        self.progress = Progress(self.rows_now, self.collector.settled)
        self.scraper = ServerScraper(self.collector, lambda: self.model, lambda: self.require_config().tls)
        if self.role != "worker":
            self.collector.after_sample = self.progress.poll
        """What the fast path assumes and no longer holds (:func:`locust_llm.runtime.contract.check`, at init)."""
        self.begin_hook: Callable[[LLMRun], str | None] | None = None
        """Begins the next run (``lifecycle.begin_run``, set by the plugin): see :meth:`begin`."""
        options = environment.parsed_options
        self._own_key = getattr(options, "api_key", None)
        self._own_headers = list(getattr(options, "header", None) or [])
        if self.role == "master" and options is not None:
            self._keep_secrets_home(options)

    def _keep_secrets_home(self, options: Any) -> None:
        """Locust's master sends its options to every worker in plain text: blank the key and secret headers there.
        Workers take theirs from their own environment (OPENAI_API_KEY, LOCUST_LLM_HEADERS)."""
        options.api_key = None
        options.header = [h for h in self._own_headers if not is_secret_header(str(h).partition(":")[0])] or None

    def _options(self) -> Any:
        """The parsed options, with this process's own key and headers put back (what the master never sends)."""
        values = dict(vars(self.environment.parsed_options or SimpleNamespace()))
        values["api_key"] = values.get("api_key") or self._own_key
        received = [h for h in values.get("header") or [] if h not in self._own_headers]
        values["header"] = [*self._own_headers, *received] or None
        return SimpleNamespace(**values)

    @property
    def is_worker(self) -> bool:
        return self.role == "worker"

    @property
    def fast_path(self) -> bool:
        """Whether streams are read, and Locust's rows logged, by locust-llm's own fast path (``--fast-path auto``,
        and every assumption it makes held at start-up)."""
        return self.config is not None and self.config.fast_path and not self.contract_broken

    def require_config(self) -> RunConfig:
        if self.config is None:
            self.configure()
        assert self.config is not None
        return self.config

    def configure(self) -> RunConfig:
        """(Re)build the config from the environment's parsed options; raises :class:`ConfigError`."""
        config = RunConfig.from_options(self._options())
        if self.collector.dropped_routes and config.routes is not None:
            config = config.without_routes(set(self.collector.dropped_routes))
        host = self.environment.host
        if config.routes is not None:
            for route in config.routes.routes:
                self.proxy(route.base_url)  # a malformed *_PROXY variable stops the run here, not in every user
            host = config.routes[config.primary_route or ""].base_url
        elif config.model is None and host and (self.sim is None or host != self.sim.url):
            raise ConfigError(f"--model is required with --host (e.g. --model grok-4), got --host {host}")
        proxy = self.proxy(host)
        self.config = config
        self.model = config.primary_route or config.model or self.model
        self.collector.trace_rate_req_s = config.trace.rate_req_s if config.trace else None
        self.collector.workers.min_workers = config.min_workers if self.role == "master" else 0
        self.collector.workers.on_too_few = self.too_few_workers
        self.recorder.configure(config.sla, config.itl_events, self.fast_path, per_client=config.routes is not None)
        if proxy is not None and self.role != "worker":
            logger.info(
                "locust-llm: requests to %s go through the proxy %s (HTTPS_PROXY/HTTP_PROXY; NO_PROXY to bypass)",
                host,
                proxy.describe(),
            )
        return config

    def proxy(self, host: str | None) -> Proxy | None:
        """The proxy requests to ``host`` go through (:func:`locust_llm.config.tls.proxy_for`); never for the embedded
        simulator."""
        if not host or (self.sim is not None and host == self.sim.url):
            return None
        return proxy_for(host)

    def rows_now(self) -> list[Any]:
        """The per-step rows as they stand (the CSV's, the LLM tab's, each step's result line)."""
        config = self.require_config()
        return self.collector.rows(config.validity, config.row_prices)

    def begin_step(
        self,
        step: int,
        users: int,
        step_duration_s: float | None = None,
        rate: float | None = None,
        total: int | None = None,
        repeat: int = 1,
    ) -> None:
        """Stamp the start of step number ``step`` (from 1, of ``total`` when known; of pass ``repeat`` with
        ``--repeats``) with ``users`` users (open loop: its ``rate``, shared by ``users`` generator processes), and say
        so (:mod:`locust_llm.runtime.progress`).

        With ``--warmup auto``, the warm-up also covers the previous step's E2E p90, so that requests sent under the
        old user count end before the steady window opens; at most half the step. After the first step, a warning
        says how long steps must be when the configured ones are too short for this workload."""
        config = self.require_config()
        duration = config.step_duration_s if step_duration_s is None else step_duration_s
        auto_s = warmup_s = config.warmup_s(duration)
        note, carryover = "", None
        previous = self.collector.timeline.current
        if step > 1 and not (previous is not None and previous.rest):  # after a rest, nothing carries over
            e2e, requests, req_s = self.collector.step_e2e(step - 1)
            p90_s = e2e.quantile(0.9) / 1e9 if e2e.count else None
            if config.warmup.is_auto:
                warmup_s, capped = warmup_for(warmup_s, p90_s, duration)
                if p90_s is not None and auto_s < p90_s <= warmup_s:
                    note = f", covering the previous step's E2E p90 of {p90_s:.1f} s"
                elif capped:
                    note = f", capped at half the step: shorter than the previous step's E2E p90 of {p90_s:.1f} s"
            if p90_s is not None and warmup_s < p90_s:
                carryover = (warmup_s, p90_s)
            if step == 2:
                self._advise_step_length(duration, e2e, requests, req_s)
        self.collector.begin_step(step, users, int(warmup_s * 1e9), rate, users if rate is not None else 1)
        self.collector.health[step].carryover = carryover
        self.collector.repeat_of[step] = repeat
        load = f"{users} users" if rate is None else f"{rate:g} requests/s from {users} generator process(es)"
        if rate is not None and config.trace is not None:
            load = f"speed {rate / config.trace.rate_req_s:g}x of the trace: {load}"
        self.progress.step_began(step, total, load, duration, warmup_s, note)

    def rest(self, step: int, processes: int, reason: str) -> None:
        """Stamp step number ``step`` as a rest: open-loop arrivals pause (rate 0) and its samples are all warm-up
        (no row), so the next step starts from a drained endpoint (see :mod:`locust_llm.runtime.search_driver`)."""
        self.collector.begin_step(step, processes, 2**62, 0.0, processes)
        self.progress.step_rested(step)
        logger.info("locust-llm step %d: rest, no arrivals (%s)", step, reason)

    def _advise_step_length(self, duration_s: float, e2e: Any, requests: int, req_s: float) -> None:
        config = self.require_config()
        if not e2e.count:
            if not requests:
                logger.warning(
                    "locust-llm: no request of step 1 completed within its %.0f s: steps must be longer "
                    "than the requests (lengthen --step-duration)",
                    duration_s,
                )
            return
        p50_s, p90_s = e2e.quantile(0.5) / 1e9, e2e.quantile(0.9) / 1e9
        needed = needed_step_s(p50_s, p90_s, req_s, config.min_step_requests, config.warmup_s(duration_s))
        if needed > duration_s:
            logger.warning(
                "locust-llm: steps of %.0f s are too short for this workload (E2E p50 %.1f s, p90 %.1f s): use "
                "--step-duration %.0fs or more, or its steps will be marked invalid",
                duration_s,
                p50_s,
                p90_s,
                needed,
            )

    def fatal(self, message: str, stop: bool = True) -> None:
        """Stop the run: it cannot measure anything (``message`` says why and what to fix). Exit code 2. ``stop``:
        also stop the runner (a shape stops it itself by ending)."""
        runner = self.environment.runner
        assert runner is not None
        if self.is_worker:
            runner.send_message(FATAL_MESSAGE, {"message": message})
            return
        if self.fatal_message:
            return
        self.fatal_message = message
        sys.stderr.write(f"locust-llm: error: {message}\n")
        self.environment.process_exit_code = 2
        headless = bool(getattr(self.environment.parsed_options, "headless", False))
        if stop:
            gevent.spawn(runner.quit if headless else runner.stop)

    def too_few_workers(self, left: int) -> None:
        """Master: fewer workers are left than ``--min-workers``: stop the run; its files are written as at any end,
        and the run is invalid (exit 3)."""
        config = self.require_config()
        self.stopped_for = f"{left} workers left, fewer than --min-workers {config.min_workers}: the run was stopped"
        logger.error("locust-llm: %s; every file is written for what was measured", self.stopped_for)
        runner = self.environment.runner
        headless = bool(getattr(self.environment.parsed_options, "headless", False))
        if runner is not None:
            gevent.spawn(runner.quit if headless else runner.stop)

    def on_fatal_message(self, environment: Any, msg: Any, **_kw: Any) -> None:
        """Master: a worker's fail-fast fired."""
        self.fatal(str(msg.data.get("message", "a worker stopped the run")))

    def begin(self) -> str | None:
        """The shape's first tick of a run asks for it to begin (a fresh recording, the preflight request); the message
        that stops the run before any load, or None."""
        if self.begin_hook is None:
            raise RuntimeError("locust_llm.install() was not called: the run cannot begin")
        return self.begin_hook(self)

    def end(self) -> None:
        """The shape has ended: samples from now on are filed as *drain*."""
        self.collector.end()

    def close(self) -> None:
        """Stop recording: the end of the run (later samples are dropped) and of the health sampler."""
        self.collector.end()
        self.collector.closed = True
        self.collector.detach()
        self.recording = False

    @property
    def closed(self) -> bool:
        return self.collector.closed


def new_run(environment: Environment, runner: Any) -> LLMRun:
    """Create and register the run of ``environment``."""
    run = _RUNS[environment] = LLMRun(environment, runner)
    return run


def find_run(environment: Environment) -> LLMRun | None:
    return _RUNS.get(environment)


def llm_run(environment: Environment) -> LLMRun:
    """The :class:`LLMRun` of ``environment``; a clear error if :func:`locust_llm.install` was not called."""
    run = _RUNS.get(environment)
    if run is None:
        raise StopTest(
            "locust-llm is not installed in this locustfile: add 'import locust_llm; locust_llm.install()' to it."
        )
    return run


def all_runs() -> list[LLMRun]:
    return list(_RUNS.values())
