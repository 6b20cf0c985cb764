"""``--search``: the capacity search, run by the load shape as probes, one step each.

A probe ends when its steady window holds ``--search-min-requests`` requests and is at least their E2E p50 long, or
at ``--step-duration``; :mod:`locust_llm.shapes.criteria` judges it and :mod:`locust_llm.shapes.search` or
:mod:`locust_llm.shapes.knee_search` chooses the next load. The record goes to ``run.search``.
"""

from __future__ import annotations

import logging
from typing import Any

from locust_llm.measure.rows import StepRow, series
from locust_llm.runtime.run import LLMRun
from locust_llm.shapes.criteria import Criterion
from locust_llm.shapes.knee_search import KneeSearch
from locust_llm.shapes.plan import MAX_SPAWN_RATE
from locust_llm.shapes.search import Next, Search

__all__ = ["SearchDriver"]

logger = logging.getLogger("locust_llm")

REST_SETTLE_S = 3.5  # Locust workers report every 3 s


class SearchDriver:
    """The search of one run: call :meth:`tick` with the shape's elapsed seconds, each second."""

    def __init__(self, run: LLMRun, processes: int) -> None:
        config = run.require_config()
        settings = config.search
        assert settings is not None
        self.run, self.settings, self.processes = run, settings, processes
        self.rate_mode = config.open_loop
        start = config.rates[0] if config.rates else config.steps[0]
        kind = KneeSearch if settings.criterion == "knee" else Search
        self.search: Search | KneeSearch = kind(
            start, settings.precision, settings.max_load, integer=not self.rate_mode
        )
        self.criterion = Criterion(settings.criterion, config.sla, config.error_budget)
        self.steps_of: dict[float, tuple[int, ...]] = {}
        """The steps each load's latest decided probe was judged on (a repeat: both), for a knee probe's reference."""
        self.step = 0  # the last step begun (a probe or a rest)
        self.probe_step = 0  # the step of the current (or last) probe
        self.users = 0
        self._spawn_rate = 1.0
        self.current: Next | None = None
        self.began_s = 0.0
        self.started_s: float | None = None
        self.previous_step = 0  # the step of the probe a repeat is judged with
        self.resting_since: float | None = None
        self.drained_since: float | None = None
        self.ended = False
        self.publish()

    def tick(self, elapsed_s: float) -> tuple[int, float] | None:
        """The users (and spawn rate) to hold now; ``None`` once the search has ended."""
        if self.ended:
            return None
        if self.started_s is None:
            self.started_s = elapsed_s
        if self.current is not None and self._probe_done(elapsed_s):
            passed = self._decide()
            self.current = None
            if passed is not True and self.rate_mode and self.search.next() is not None:
                self._begin_rest(elapsed_s)
        if self.resting_since is not None and not self._rested(elapsed_s):
            return self.users, self._spawn_rate
        if elapsed_s - self.started_s >= self.settings.max_duration_s and not self.search.reason:
            where = self.search.where()
            self.search.stop(
                f"stopped by --search-max-duration ({self.settings.max_duration_s:g} s)"
                + (f"; {where}" if where else "")
            )
        planned = self.search.next()
        if planned is None:
            self.ended = True
            self.publish()
            logger.info("locust-llm search: %s", self.search.reason)
            return None
        if self.current is None:
            self._begin(planned, elapsed_s)
        return self.users, self._spawn_rate

    # -- probes -----------------------------------------------------------------------------------------------

    def _begin(self, planned: Next, elapsed_s: float) -> None:
        if planned.kind == "repeat":
            self.previous_step = self.probe_step
        self.step += 1
        self.probe_step = self.step
        self.current, self.began_s = planned, elapsed_s
        config = self.run.require_config()
        low, high = self.search.bracket
        left = self.search.probes_left()
        logger.info(
            "locust-llm search probe %d: %s%s — bracket %s .. %s, %s",
            len(self.search.probes) + 1,
            self.search.text(planned.load),
            "" if planned.kind == "probe" else f" ({planned.kind})",
            "-" if low is None else self.search.text(low),
            "-" if high is None else self.search.text(high),
            f"about {max(1, left)} probe(s) left"
            if left is not None
            else ("doubling until a probe fails" if high is None else "halving until a probe passes"),
        )
        previous = self.users
        if self.rate_mode:
            self.users = self.processes
            self.run.begin_step(self.step, self.processes, config.step_duration_s, planned.load)
        else:
            self.users = int(planned.load)
            self.run.begin_step(self.step, self.users, config.step_duration_s)
        self._spawn_rate = min(MAX_SPAWN_RATE, float(max(1, abs(self.users - previous))))

    def _row(self) -> StepRow | None:
        config = self.run.require_config()
        rows = [
            r
            for r in self.run.collector.rows(config.validity, config.row_prices, True, (self.probe_step,))
            if r["step"] == self.probe_step
        ]
        return max(rows, key=lambda r: r["requests"]) if rows else None

    def _probe_done(self, elapsed_s: float) -> bool:
        if elapsed_s - self.began_s >= self.run.require_config().step_duration_s:
            return True
        row = self._row()
        if row is None or row["requests"] < self.settings.min_requests:
            return False
        return row["duration_s"] * 1000 >= (row.get("e2e_p50_ms") or 0.0)

    def _begin_rest(self, elapsed_s: float) -> None:
        self.step += 1
        self.resting_since, self.drained_since = elapsed_s, None
        self.run.rest(self.step, self.processes, "draining the last probe's requests before the next")

    def _rested(self, elapsed_s: float) -> bool:
        """Whether the rest is over: nothing in flight for long enough (module docstring), or its time is up."""
        assert self.resting_since is not None
        settle = REST_SETTLE_S if self.run.role == "master" else 0.0
        if self.run.collector.open_requests() > 0:
            self.drained_since = None
        elif self.drained_since is None:
            self.drained_since = elapsed_s
        over = self.drained_since is not None and elapsed_s - self.drained_since >= settle
        if over or elapsed_s - self.resting_since >= self.run.require_config().step_duration_s:
            self.resting_since = None
            return True
        return False

    def _decide(self) -> bool | None:
        """Judge the probe that has ended (a knee probe against its reference's row) and record it; its verdict (None:
        invalid)."""
        assert self.current is not None
        row = self._row()
        steps: tuple[int, ...] = (self.probe_step,)
        config = self.run.require_config()
        if self.current.kind == "repeat" and row is not None:
            steps = (self.previous_step, self.probe_step)
            row = self.run.collector.merged_row(steps, series(row), config.validity, config.row_prices)
        reference = self._reference_row(self.current.reference, row)
        outcome = self.criterion.judge(row, reference)
        probe = self.search.record(outcome, steps)
        if outcome.passed is not None:
            self.steps_of[probe.load] = steps
        verdict = {None: "invalid", True: "pass", False: "FAIL"}[outcome.passed]
        extra = " (borderline: run again)" if outcome.borderline and probe.kind != "repeat" else ""
        low, high = self.search.bracket
        logger.info(
            "locust-llm search probe %d (step %s, %s%s): %s: %s%s; bracket %s .. %s",
            probe.order,
            "+".join(map(str, steps)),
            self.search.text(probe.load),
            "" if probe.kind == "probe" else f", {probe.kind}",
            verdict,
            outcome.detail,
            extra,
            self.search.text(low),
            "-" if high is None else self.search.text(high),
        )
        self.publish()
        return outcome.passed

    def _reference_row(self, load: float | None, row: StepRow | None) -> StepRow | None:
        """The row a knee probe is judged against: the reference load's decided probe (its steps merged)."""
        steps = self.steps_of.get(load) if load is not None else None
        if steps is None or row is None:
            return None
        config = self.run.require_config()
        return self.run.collector.merged_row(steps, series(row), config.validity, config.row_prices)

    def publish(self) -> None:
        """Keep the search's record on the run, for the outputs and the web UI."""
        self.run.search = self.record()

    def record(self) -> dict[str, Any]:
        return {
            **self.search.as_dict(),
            "criterion": self.settings.criterion,
            "described": self.criterion.describe(),
            "unit": "req/s" if self.rate_mode else "users",
            "running": not self.ended,
            "min_requests": self.settings.min_requests,
            "max_duration_s": self.settings.max_duration_s,
        }
