"""``StepShape``: steps concurrency through ``--steps`` (8 -> 16 -> 32 -> 64 -> 128 by default)."""

from __future__ import annotations

from locust import LoadTestShape

from locust_llm.preflight import preflight
from locust_llm.run import llm_run
from locust_llm.shapes.plan import StepPlan

__all__ = ["StepShape"]


class StepShape(LoadTestShape):
    """Holds each of ``--steps`` users for ``--step-duration``, then drains and stops (headless: quits).

    ``tick()`` runs on the master (or the single process) only. Its first tick sends the preflight request
    (:mod:`locust_llm.preflight`); a systematic failure ends the run there, before any load. Each step change is
    stamped there and, in a distributed run, sent to the workers. After the last step the shape asks for 0 users
    once: with ``--stop-timeout`` the users finish the request they are in (filed as *drain*, outside every step)
    and the workers report them before the run quits.
    """

    def __init__(self) -> None:
        super().__init__()
        self._runs = -1  # which run of the process the state below belongs to (LLMRun.runs)
        self._index: int | None = None
        self._drained = False
        self._checked = False

    def tick(self) -> tuple[int, float] | None:
        assert self.runner is not None
        run = llm_run(self.runner.environment)
        if run.runs != self._runs:  # a new run: Locust's master resets the time twice per start, so count runs
            self._runs, self._index, self._drained, self._checked = run.runs, None, False, False
        if not self._checked:  # before any load: the preflight request (locust_llm.preflight)
            self._checked = True
            message = preflight(run)
            if message is not None:
                run.fatal(message, stop=False)
                return None
            LoadTestShape.reset_time(self)  # its time is not step 1's
        config = run.require_config()
        plan = StepPlan(config.steps, config.step_duration_s)
        step = plan.step_at(self.get_run_time())
        if step is None:
            run.end()
            if self._drained:
                return None
            self._drained = True
            return 0, plan.drain_rate
        if step.index != self._index:
            self._index = step.index
            run.begin_step(step.index + 1, step.users, plan.step_duration_s)
        return step.users, plan.spawn_rate(step.index)
