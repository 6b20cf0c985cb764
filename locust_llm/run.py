"""Run state: one :class:`LLMRun` per Locust environment (role, config, model, collector, recorder, simulator).

The plugin (:mod:`locust_llm.plugin`) creates it in ``init``; users and shapes find it with :func:`llm_run`. It holds
state and the few transitions of a run (configure, begin a step, end); recording is the
:class:`~locust_llm.recorder.Recorder`'s job and the files are :mod:`locust_llm.outputs`'.
"""

from __future__ import annotations

import logging
import weakref
from datetime import UTC, datetime
from typing import Any

from locust.env import Environment
from locust.exception import StopTest
from locust.runners import MasterRunner, WorkerRunner

from locust_llm.collect.collector import Collector
from locust_llm.config import RunConfig
from locust_llm.parsers import ConfigError
from locust_llm.recorder import Recorder
from locust_llm.sim.launcher import EmbeddedSim

__all__ = ["LLMRun", "all_runs", "find_run", "llm_run", "new_run"]

logger = logging.getLogger("locust_llm")

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
        self.recorder = Recorder(environment.events, self.collector)
        self.started = datetime.now(UTC)
        self.report_text = ""
        self.writer: Any = None  # the greenlet refreshing the CSVs (see locust_llm.outputs)

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
        self.model = config.model or self.model
        self.recorder.configure(config.sla, config.itl_events)
        return config

    def begin_step(self, step: int, users: int, step_duration_s: float | None = None) -> None:
        """Stamp the start of step number ``step`` (from 1) with ``users`` users."""
        warmup_s = self.require_config().warmup_s(step_duration_s)
        self.collector.begin_step(step, users, int(warmup_s * 1e9))
        logger.info("locust-llm step %d: %d users (warm-up %.1f s)", step, users, warmup_s)

    def end(self) -> None:
        """The shape has ended: samples from now on are filed as *drain*."""
        self.collector.end()

    def close(self) -> None:
        """Stop recording: the end of the run (later samples are dropped) and of the health sampler."""
        self.collector.end()
        self.collector.closed = True
        self.collector.detach()

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
