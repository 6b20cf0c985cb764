"""The Locust plugin: :func:`install` registers locust-llm's flags and listeners on Locust's events.

``init`` makes one :class:`~locust_llm.runtime.run.LLMRun` per environment and, on the master or the single process,
validates the flags (a bad value exits 2 with one line) and starts the embedded simulator when there is no
``--host``; ``test_start`` rebuilds the config and tunes the garbage collector until ``test_stop``; ``quitting``
writes the outputs; ``quit`` prints the per-step table and the capacity summary.
"""

from __future__ import annotations

import atexit
import logging
import sys
from typing import Any

import locust
from locust.env import Environment

from locust_llm.config import gc_settings
from locust_llm.config.flags import add_arguments
from locust_llm.config.parsers import ConfigError
from locust_llm.config.run_config import RunConfig
from locust_llm.runtime import contract, outputs
from locust_llm.runtime.embedded_sim import EmbeddedSim, SimStartError
from locust_llm.runtime.interrupt import route_sigint_to_main
from locust_llm.runtime.lifecycle import begin_run, end_run
from locust_llm.runtime.locust_stats import write_final_csvs
from locust_llm.runtime.run import FATAL_MESSAGE, LLMRun, all_runs, find_run, llm_run, new_run
from locust_llm.runtime.webui import install_web_ui

__all__ = ["install", "llm_run"]

logger = logging.getLogger("locust_llm")

_installed: set[int] = set()


def _fail_startup(run: LLMRun, message: str) -> None:
    if run.sim is not None:
        run.sim.stop()
    sys.stderr.write(f"locust-llm: error: {message}\n")
    sys.exit(2)


def _on_init(environment: Environment, runner: Any = None, **_kwargs: Any) -> None:
    route_sigint_to_main()
    run = new_run(environment, runner)
    run.begin_hook = begin_run
    run.contract_broken = contract.check()
    if run.contract_broken:
        logger.warning(contract.describe(run.contract_broken))
    run.collector.attach()
    if run.is_worker:
        return
    import scipy.stats  # noqa: F401  # the steps' intervals need it: 0.5 s loaded now, not on the loop mid-run

    if run.role == "master":
        runner.register_message(FATAL_MESSAGE, run.on_fatal_message)
    try:
        config = RunConfig.from_options(environment.parsed_options)
        if config.routes is not None:
            if environment.host:
                raise ConfigError(
                    f"--routes gives each route its own base_url, which excludes --host (got both: --routes "
                    f"{config.routes.path} and --host {environment.host})"
                )
            environment.host = config.routes[config.primary_route or ""].base_url  # Locust's users need a host
            logger.info("locust-llm: routes %s from %s", ", ".join(config.routes.names), config.routes.path)
        elif not environment.host:
            _start_embedded_sim(run, config)
        config = run.configure()
        _check_apis(environment, config)
        if run.role == "master":
            problem = config.fleet_error(int(getattr(environment.parsed_options, "expect_workers", 1) or 1))
            if problem:
                raise ConfigError(problem)
        if config.trace is not None:
            speeds = config.trace_speeds or ()
            described = config.trace.describe(speeds, config.step_duration_s, config.trace_offset_s)
            prefixes = (
                "the same bytes in every pass (--trace-cache-across-steps: a prefix cache finds the replay's repeats)"
                if config.trace_cache_across_steps
                else "fresh prefixes in each pass (only the trace's own shared hash_ids share)"
            )
            logger.info("locust-llm: %s; %s", described, prefixes)
        if config.tls.insecure:
            logger.warning(
                "locust-llm: --insecure: TLS certificates and host names are NOT verified; the run's "
                "summary records it (settings.tls.insecure)"
            )
    except (ConfigError, SimStartError, OSError) as exc:
        _fail_startup(run, str(exc))
    _quiet_locust_table(environment.parsed_options)
    outputs.prepare()
    install_web_ui(environment, run)


def _check_apis(environment: Environment, config: RunConfig) -> None:
    """Every user class speaks every API the run uses (a class's ``apis``: all when it names none)."""
    used = {config.api} | {r.api for r in (config.routes.routes if config.routes else ()) if r.api}
    for user in environment.user_classes or ():
        spoken: tuple[str, ...] = getattr(user, "apis", None) or tuple(used)
        missing = sorted(used - set(spoken))
        if missing:
            raise ConfigError(
                f"{user.__name__} speaks --api {', '.join(spoken)}, got --api {', '.join(missing)} (locustfile.py's "
                "ChatStreamUser speaks every API)"
            )


def _quiet_locust_table(options: Any) -> None:
    """No flood: a headless run prints Locust's periodic statistics table only when asked (``--locust-stats on``, or
    Locust's own ``--print-stats``), through Locust's own ``--only-summary``; its final table and CSVs are unchanged."""
    wanted = getattr(options, "locust_stats", "auto") or "auto"
    if wanted == "off" or (wanted == "auto" and not getattr(options, "print_stats", False)):
        options.only_summary = True


def _start_embedded_sim(run: LLMRun, config: RunConfig) -> None:
    """No ``--host``: start the simulator, point the run at it and take its model (or check ``--model``)."""
    run.sim = EmbeddedSim(list(config.sim_args))
    atexit.register(run.sim.stop)
    try:
        run.environment.host = run.sim.start()
        served = run.sim.models()
    except (SimStartError, OSError) as exc:
        hint = f"check --sim-args {' '.join(config.sim_args)!r} with 'locust-llm sim --help'"
        raise SimStartError(f"{exc}; {hint}") from None
    logger.info(
        "No --host given: started the embedded simulated LLM server at %s. "
        "Pass --host and --model to test a real endpoint.",
        run.environment.host,
    )
    if config.model is not None and config.model not in served:
        raise ConfigError(
            f"--model {config.model} was given without --host, and the embedded simulator serves "
            f"{', '.join(served)}. Pass --host URL to test a real endpoint."
        )
    run.model = config.model or served[0]
    options = run.environment.parsed_options
    if options is not None:
        options.model = run.model  # workers learn the model from the spawn message
        if run.sim.ca_path and not getattr(options, "ca_bundle", None):
            options.ca_bundle = run.sim.ca_path  # --sim-args --tls: trust the simulator's own CA


def _on_test_start(environment: Environment, **_kwargs: Any) -> None:
    run = find_run(environment)
    if run is None:
        return
    try:
        run.configure()
    except ConfigError as exc:
        logger.error("locust-llm: %s", exc)
        if environment.runner is not None and not run.is_worker:
            environment.runner.quit()
        return


def _freeze_heap(**_kwargs: Any) -> None:
    """The start of a test: the heap alive then is frozen and the youngest generation collected less often, for
    the test (:func:`locust_llm.config.gc_settings.tune_gc`: its rules)."""
    gc_settings.tune_gc()


def _unfreeze_heap(**_kwargs: Any) -> None:
    """The end of a test: the collector runs as before it (:func:`locust_llm.config.gc_settings.restore_gc`)."""
    gc_settings.restore_gc()


def _on_test_stop(environment: Environment, **_kwargs: Any) -> None:
    run = find_run(environment)
    if run is not None and not run.is_worker:
        end_run(run)


def _on_reset_stats(**_kwargs: Any) -> None:
    for run in all_runs():
        if not run.is_worker:
            run.collector.clear()


def _on_quitting(environment: Environment, **_kwargs: Any) -> None:
    run = find_run(environment)
    if run is not None and not run.is_worker:
        outputs.finish(run)


def _on_quit(**_kwargs: Any) -> None:
    _unfreeze_heap()  # a test that never stopped: gc.get_objects() in write_final_csvs sees only unfrozen objects
    for run in all_runs():
        if run.is_worker:
            continue
        outputs.print_results(run)
        if run.sim is not None:
            run.sim.stop()
    write_final_csvs()


def install(events: Any = None) -> None:
    """Register locust-llm's flags and event listeners (idempotent). Call once from the locustfile."""
    events = events or locust.events
    if id(events) in _installed:
        return
    _installed.add(id(events))
    events.init_command_line_parser.add_listener(add_arguments)
    events.init.add_listener(_on_init)
    events.test_start.add_listener(_on_test_start)
    events.test_start.add_listener(_freeze_heap)  # after the config is built: it is frozen too
    events.test_stop.add_listener(_on_test_stop)
    events.test_stop.add_listener(_unfreeze_heap)
    events.reset_stats.add_listener(_on_reset_stats)
    events.quitting.add_listener(_on_quitting)
    events.quit.add_listener(_on_quit)
