"""A person's view of a run: a line at each step change, and one with each step's result once every request
observed in it is filed: :data:`SETTLE_S` after its end (on a master, once each worker has reported since), at the
poll after the one that found it so. The figures are the step's CSV row's (``format_done``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from locust_llm.measure.rows import StepRow, format_done

__all__ = ["SETTLE_S", "Progress", "clock_text"]

logger = logging.getLogger("locust_llm")

SETTLE_S = 1.0


def clock_text(seconds: float) -> str:
    """``1:30``, or ``1:02:03`` past an hour."""
    total = max(0, round(seconds))
    hours, rest = divmod(total, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class Progress:
    """The step lines of one run (:meth:`reset` at each new run). ``rows()`` gives the per-step rows now;
    ``settled(step)`` says whether every sample of ``step`` has arrived from elsewhere (a master's workers)."""

    def __init__(
        self,
        rows: Callable[[], Sequence[StepRow]],
        settled: Callable[[int], bool],
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        self.rows = rows
        self.settled = settled
        self.clock = clock
        self.total: int | None = None
        self.waiting: list[tuple[int, int]] = []  # (step, its end on this process's clock) whose result is due
        self.printed: set[int] = set()
        self.settling: set[int] = set()  # the steps a poll found settled: printed at the next poll

    def reset(self) -> None:
        self.total, self.waiting, self.printed, self.settling = None, [], set(), set()

    def step_began(
        self, step: int, total: int | None, load: str, duration_s: float, warmup_s: float, note: str
    ) -> None:
        """Log ``step N/M: LOAD, D s (warm-up W s) — about T left``; the previous step's result is now due."""
        now = self.clock()
        if step == 1:
            self.reset()
        self.total = total
        if step > 1:
            self.waiting.append((step - 1, now))
        of = f"/{total}" if total else ""
        left = f" — about {clock_text((total - step + 1) * duration_s)} left" if total else ""
        logger.info(
            "locust-llm step %d%s: %s, %g s (warm-up %.1f s%s)%s", step, of, load, duration_s, warmup_s, note, left
        )

    def step_rested(self, step: int) -> None:
        """A rest (no row) began: the step before it is due."""
        if step > 1:
            self.waiting.append((step - 1, self.clock()))

    def poll(self) -> None:
        """Print the results that are due and settled (called once a second)."""
        if not self.waiting:
            return
        now = self.clock()
        due = [(step, ended) for step, ended in self.waiting if now - ended >= SETTLE_S * 1e9 and self.settled(step)]
        ready = [(step, ended) for step, ended in due if step in self.settling]
        self.settling |= {step for step, _ in due}
        if ready:
            self.waiting = [w for w in self.waiting if w not in ready]
            self._print({step for step, _ in ready}, self.rows())

    def finish(self, rows: Sequence[StepRow]) -> None:
        """The run's end: every result not printed yet, from the final rows."""
        self.waiting = []
        self._print({int(r["step"]) for r in rows} - self.printed, rows)

    def _print(self, steps: set[int], rows: Sequence[StepRow]) -> None:
        for row in rows:
            step = int(row["step"])
            if step in steps:
                of = f"/{self.total}" if self.total else ""
                logger.info("locust-llm step %d%s done: %s", step, of, format_done(row))
        self.printed |= steps
