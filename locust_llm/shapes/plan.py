"""Step plans: the target number of users as a function of elapsed seconds. Pure; no clock.

A :class:`StepPlan` of steps ``(u0, ..., un)`` and step length ``d`` holds ``u_i`` users during ``[i*d, (i+1)*d)``
and ends at ``(n+1)*d``. A step's users are spawned within about a second, never faster than
:data:`MAX_SPAWN_RATE` per second.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["MAX_SPAWN_RATE", "TICK_S", "Step", "StepPlan", "until_boundary"]

MAX_SPAWN_RATE = 100.0

TICK_S = 1.0
"""How often Locust's shape worker asks the shape for its target (``Runner.shape_worker`` calls ``tick()``)."""


@dataclass(frozen=True)
class Step:
    """Step number ``index`` (0-based): ``users`` concurrent users from ``start_s`` for ``duration_s`` seconds."""

    index: int
    users: int
    start_s: float
    duration_s: float

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s


@dataclass(frozen=True)
class StepPlan:
    steps: tuple[int, ...]
    step_duration_s: float

    def __post_init__(self) -> None:
        if not self.steps:
            raise ValueError("a step plan needs at least one step")
        if self.step_duration_s <= 0:
            raise ValueError(f"step duration must be > 0, got {self.step_duration_s}")

    @property
    def total_s(self) -> float:
        return len(self.steps) * self.step_duration_s

    def step(self, index: int) -> Step:
        return Step(index, self.steps[index], index * self.step_duration_s, self.step_duration_s)

    def step_at(self, elapsed_s: float) -> Step | None:
        """The step in force ``elapsed_s`` seconds after the start; ``None`` once the plan is over."""
        if elapsed_s < 0:
            elapsed_s = 0.0
        index = int(elapsed_s // self.step_duration_s)
        if index >= len(self.steps):
            return None
        return self.step(index)

    def users_at(self, elapsed_s: float) -> int | None:
        """Target users at ``elapsed_s``; ``None`` once the plan is over (the run should stop)."""
        step = self.step_at(elapsed_s)
        return None if step is None else step.users

    def spawn_rate(self, index: int) -> float:
        """Users per second that reach step ``index`` within about one second (Locust needs a rate > 0), at most
        ``MAX_SPAWN_RATE``."""
        previous = self.steps[index - 1] if index > 0 else 0
        return min(MAX_SPAWN_RATE, float(max(1, abs(self.steps[index] - previous))))

    @property
    def drain_rate(self) -> float:
        """Users per second that stop after the last step."""
        return min(MAX_SPAWN_RATE, float(max(self.steps)))


def until_boundary(
    end_s: float, run_time: Callable[[], float], sleep: Callable[[float], None], running: Callable[[], bool]
) -> bool:
    """Sleep until the run time ``end_s`` (a step's end) when it comes before the shape's next tick (:data:`TICK_S`
    from now), so that the step changes on time rather than at that tick; False when the run stopped meanwhile
    (``running()`` is false after a sleep). A boundary already past, or not before the next tick, is not waited for.
    A sleep that ends a hair early is slept again (the boundary belongs to the next step), at most three times in all:
    past that, the tick answers for the step in force, as it would have without waiting."""
    left = end_s - run_time()
    if not 0 < left < TICK_S:
        return True
    for _ in range(3):
        sleep(left)
        if not running():
            return False
        left = end_s - run_time()
        if left <= 0:
            break
    return True
