"""``StepShape``: steps concurrency through ``--steps``, or the arrival rate through ``--rates``.

Runs on the master or the single process: its first tick of a run asks the run to begin, each step change is stamped
and sent to the workers, and steps change on time (a tick that has a boundary due before the next one sleeps until it).
"""

from __future__ import annotations

from typing import cast

import gevent
from locust import LoadTestShape
from locust.runners import STATE_INIT, STATE_RUNNING, STATE_SPAWNING

from locust_llm.runtime.run import LLMRun, llm_run
from locust_llm.runtime.search_driver import SearchDriver
from locust_llm.shapes.plan import MAX_SPAWN_RATE, StepPlan, until_boundary

__all__ = ["StepShape"]


class StepShape(LoadTestShape):
    """Holds each of ``--steps`` users for ``--step-duration``, then drains and stops (headless: quits).

    ``tick()`` runs on the master (or the single process) only. The first tick of a run begins it
    (:meth:`~locust_llm.runtime.run.LLMRun.begin`: a fresh recording, and the preflight request, whose systematic
    failure ends the run there, before any load). Each step change is
    stamped there and, in a distributed run, sent to the workers. After the last step a master asks for 0 users
    once: with ``--stop-timeout`` the users finish the request they are in (filed as *drain*, outside every step)
    and the workers report them before the run quits. A single process stops at once (``None``): Locust's stop does
    the same for its users, ``--stop-timeout`` included, without the tick's second.

    **Steps change on time.** Locust calls ``tick()`` once a second and the plan's clock starts after the preflight,
    so a boundary may fall just after a tick. A tick with a boundary due before the next one sleeps until it
    (:func:`until_boundary`) and answers for the new step; Locust's own sleep is shortened by that time. If the run
    was stopped meanwhile, it answers what it answered last, so that Locust starts nothing.
    """

    def __init__(self) -> None:
        super().__init__()
        self._index: int | None = None
        self._drained = False
        self._search: SearchDriver | None = None

    def tick(self) -> tuple[int, float] | None:
        assert self.runner is not None
        run = llm_run(self.runner.environment)
        if not run.recording:  # a new run (Locust's master resets the shape's time twice per start: not a cue)
            self._index, self._drained, self._search = None, False, None
            message = run.begin()  # ... and its preflight request, before any load
            if message is not None:
                run.fatal(message, stop=False)
                return None
            LoadTestShape.reset_time(self)  # the preflight's time is not step 1's
        config = run.require_config()
        if config.search is not None:
            return self._tick_search(run)
        rates = config.plan_rates
        plan = StepPlan(tuple(range(1, len(rates) + 1)) if rates else config.plan_steps, config.step_duration_s)
        step = plan.step_at(self.get_run_time())
        if step is not None and step.index == self._index:  # a step already begun: its end may be due first
            if not until_boundary(step.end_s, self.get_run_time, gevent.sleep, self._running):
                return cast("tuple[int, float] | None", self.runner.shape_last_tick)  # stopped meanwhile: no change
            step = plan.step_at(self.get_run_time())
        if step is None:
            return self._end(run, plan.drain_rate)
        if rates:  # open loop: one user per generator process sends the step's arrivals
            processes = getattr(self.runner, "worker_count", 0) or 1
            if step.index != self._index:
                self._index = step.index
                repeat = config.repeat_of(step.index)
                run.begin_step(step.index + 1, processes, plan.step_duration_s, rates[step.index], len(rates), repeat)
            return processes, float(processes)
        if step.index != self._index:
            self._index = step.index
            repeat = config.repeat_of(step.index)
            run.begin_step(step.index + 1, step.users, plan.step_duration_s, total=len(plan.steps), repeat=repeat)
        return step.users, plan.spawn_rate(step.index)

    def _running(self) -> bool:
        assert self.runner is not None
        return self.runner.state in _RUNNING

    def _tick_search(self, run: LLMRun) -> tuple[int, float] | None:
        """``--search``: the probes' loads (:mod:`locust_llm.runtime.search_driver`), then the same drain."""
        assert self.runner is not None
        processes = getattr(self.runner, "worker_count", 0) or 1
        if self._search is None:
            self._search = SearchDriver(run, processes)
        target = self._search.tick(self.get_run_time())
        if target is not None:
            return target
        return self._end(run, MAX_SPAWN_RATE)

    def _end(self, run: LLMRun, drain_rate: float) -> tuple[int, float] | None:
        """The plan is over: the run ends; a master asks for 0 users once (at ``drain_rate`` users per second), then
        stops; a single process stops at once (class docstring)."""
        run.end()
        if self._drained or run.role != "master":
            return None
        self._drained = True
        return 0, drain_rate


_RUNNING = (STATE_INIT, STATE_SPAWNING, STATE_RUNNING)  # the states in which Locust's shape worker goes on ticking
