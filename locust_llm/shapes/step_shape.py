"""``StepShape``: steps concurrency through ``--steps`` (8 -> 16 -> 32 -> 64 -> 128 by default), or the arrival rate
through ``--rates`` (one user per generator process then sends each step's arrivals)."""

from __future__ import annotations

from locust import LoadTestShape

from locust_llm.lifecycle import begin_run
from locust_llm.run import LLMRun, llm_run
from locust_llm.shapes.plan import MAX_SPAWN_RATE, StepPlan
from locust_llm.shapes.search_driver import SearchDriver

__all__ = ["StepShape"]


class StepShape(LoadTestShape):
    """Holds each of ``--steps`` users for ``--step-duration``, then drains and stops (headless: quits).

    ``tick()`` runs on the master (or the single process) only. The first tick of a run begins it
    (:func:`locust_llm.lifecycle.begin_run`: a fresh recording, and the preflight request, whose systematic failure
    ends the run there, before any load). Each step change is
    stamped there and, in a distributed run, sent to the workers. After the last step the shape asks for 0 users
    once: with ``--stop-timeout`` the users finish the request they are in (filed as *drain*, outside every step)
    and the workers report them before the run quits.
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
            message = begin_run(run)  # ... and its preflight request, before any load
            if message is not None:
                run.fatal(message, stop=False)
                return None
            LoadTestShape.reset_time(self)  # the preflight's time is not step 1's
        config = run.require_config()
        if config.search is not None:
            return self._tick_search(run)
        rates = config.rates
        plan = StepPlan(tuple(range(1, len(rates) + 1)) if rates else config.steps, config.step_duration_s)
        step = plan.step_at(self.get_run_time())
        if step is None:
            run.end()
            if self._drained:
                return None
            self._drained = True
            return 0, plan.drain_rate
        if rates:  # open loop: one user per generator process sends the step's arrivals
            processes = getattr(self.runner, "worker_count", 0) or 1
            if step.index != self._index:
                self._index = step.index
                run.begin_step(step.index + 1, processes, plan.step_duration_s, rates[step.index])
            return processes, float(processes)
        if step.index != self._index:
            self._index = step.index
            run.begin_step(step.index + 1, step.users, plan.step_duration_s)
        return step.users, plan.spawn_rate(step.index)

    def _tick_search(self, run: LLMRun) -> tuple[int, float] | None:
        """``--search``: the probes' loads (:mod:`locust_llm.shapes.search_driver`), then the same drain."""
        assert self.runner is not None
        processes = getattr(self.runner, "worker_count", 0) or 1
        if self._search is None:
            self._search = SearchDriver(run, processes)
        target = self._search.tick(self.get_run_time())
        if target is not None:
            return target
        run.end()
        if self._drained:
            return None
        self._drained = True
        return 0, MAX_SPAWN_RATE
