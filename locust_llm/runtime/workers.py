"""The master's watch over its workers: who is alive, lost, or joined, and when each was last heard from.

A worker Locust marks missing is lost for the run: its step is invalid, and it is told to quit, so that one only
frozen stops its users when it thaws; what it reports afterwards is set aside, never merged. A worker that joins
mid-run takes users from the next step. Below ``--min-workers`` the run stops. docs/methodology.md, "When a step
is invalid".
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from math import ceil
from typing import Any

import gevent

from locust_llm.measure.rows import WorkerRow
from locust_llm.measure.stats import StatsKey

__all__ = ["WorkerWatch"]

logger = logging.getLogger("locust_llm")


class WorkerWatch:
    """One run's view of the workers (master only); :meth:`reset` at each run."""

    def __init__(self, environment: Any) -> None:
        self.environment = environment
        self.min_workers = 0
        self.on_too_few: Callable[[int], None] | None = None  # called once when fewer than min_workers are left
        self.reset()

    def reset(self) -> None:
        self.lost: dict[str, int] = {}  # worker -> the step it was lost in
        self.last_users: dict[str, int] = {}  # worker -> its users at the last check it was alive
        self.silent_ns: dict[str, int | None] = {}  # worker -> from its last report to its loss (None: never heard)
        self.heard_ns: dict[str, int] = {}  # worker -> the last report or heartbeat (perf_counter_ns)
        self.set_aside: Counter[str] = Counter()  # a lost worker's reports that came after: never merged
        self.known: set[str] | None = None  # the workers alive at the last check (None before the first)
        self.too_few = False

    def heard(self, client_id: str, **_kw: Any) -> None:
        """A report or a heartbeat of worker ``client_id`` (Locust's ``heartbeat_sent`` event's keyword)."""
        self.heard_ns[client_id] = time.perf_counter_ns()

    def alive(self) -> set[str]:
        clients = self.environment.runner.clients
        return {c.id for c in clients.all if c.state != "missing"} - set(self.lost)

    def check(self, step: int) -> tuple[int, list[str]]:
        """Once a second during ``step``: ``(workers alive, those lost since the last check)``."""
        alive = self.alive()
        lost = sorted((self.known or set()) - alive)
        for client in self.environment.runner.clients.all:
            if client.id in alive:  # Locust zeroes a missing worker's users: keep what it had while alive
                self.last_users[client.id] = int(getattr(client, "user_count", 0) or 0)
        for worker in lost:
            self.lost[worker] = step
            heard = self.heard_ns.get(worker)
            self.silent_ns[worker] = None if heard is None else time.perf_counter_ns() - heard
            logger.warning(
                "locust-llm: worker %s was lost in step %d; what it reported is counted, what its %d users sent after "
                "its last report is not; this step is marked invalid",
                worker,
                step,
                self.last_users.get(worker, 0),
            )
            self._retire(worker)
        self.known = alive
        if self.min_workers and len(alive) < self.min_workers and not self.too_few:
            self.too_few = True
            if self.on_too_few is not None:
                self.on_too_few(len(alive))
        return len(alive), lost

    def defer_join(self, worker: str, step: int) -> None:
        """A worker connects during ``step`` (a restarted pod): Locust would re-spread the users over it at once, in
        the middle of the step; that one re-spread is skipped, so the worker takes users at the next step's."""
        runner = self.environment.runner
        if self.known is None or runner is None:
            return

        def skip(*_args: Any, **_kwargs: Any) -> None:
            vars(runner).pop("start", None)
            logger.info(
                "locust-llm: worker %s joined during step %d; it takes users from the next step on", worker, step
            )

        runner.start = skip  # Locust's handler calls start() right after this event, in the same turn of the loop
        gevent.spawn(lambda: vars(runner).pop("start", None))  # and no later: the next turn restores it in any case

    def accept(self, worker: str) -> bool:
        """Whether a report of ``worker`` may be merged: never after it was lost."""
        self.heard(worker)
        if worker not in self.lost:
            return True
        if not self.set_aside[worker]:
            logger.warning(
                "locust-llm: worker %s came back after it was lost in step %d: what it reports is set aside, never "
                "merged into a step, and it is told to quit",
                worker,
                self.lost[worker],
            )
        self.set_aside[worker] += 1
        self._retire(worker)
        return False

    def _retire(self, worker: str) -> None:
        """Forget ``worker`` (as Locust does when a worker quits: no users go to it again) and tell it to quit; a dead
        one never reads it."""
        runner = self.environment.runner
        runner.clients.pop(worker, None)
        try:
            runner.send_message("quit", None, client_id=worker)  # Locust's own quit: the worker stops and exits
        except Exception as exc:
            logger.debug("locust-llm: could not tell worker %s to quit: %s", worker, exc)

    def lost_workers(
        self,
        shares: Mapping[str, Mapping[StatsKey, Mapping[str, int]]],
        began_ns: int | None,
        e2e_s: Mapping[int, float],
    ) -> list[dict[str, Any]]:
        """``lost_workers`` of ``{prefix}_llm_run.json``: per lost worker, the step it was lost in, when it was last
        heard from, the requests its reports counted, and what it sent after its last report, named, not counted:
        ``silent_s`` (from its last report to its loss), ``users`` and ``unreported_at_most`` = users x (1 +
        ceil(silent_s / the step's E2E p50)): the one each user had in flight and those it could start after, if
        each took the step's median."""
        out = []
        for worker, step in sorted(self.lost.items()):
            heard, silent_ns, users = (
                self.heard_ns.get(worker),
                self.silent_ns.get(worker),
                self.last_users.get(worker, 0),
            )
            silent_s = None if silent_ns is None else silent_ns / 1e9
            e2e = e2e_s.get(step)
            out.append(
                {
                    "worker": worker,
                    "lost_in_step": step,
                    "last_heard_s": None if heard is None or began_ns is None else round((heard - began_ns) / 1e9, 3),
                    "requests_reported": sum(c["requests"] for c in shares.get(worker, {}).values()),
                    "silent_s": None if silent_s is None else round(silent_s, 3),
                    "users": users,
                    "unreported_at_most": None if silent_s is None or not e2e else users * (1 + ceil(silent_s / e2e)),
                    "reports_set_aside": self.set_aside[worker],
                }
            )
        return out

    def rows(
        self,
        shares: Mapping[str, Mapping[StatsKey, Mapping[str, int]]],
        cpu: Mapping[int, Mapping[str, float]],
        began_ns: int | None,
    ) -> list[WorkerRow]:
        """``{prefix}_llm_workers.csv``: per worker, step and phase, its share (``shares``) and CPU; when it was last
        heard from (seconds into the run) and the step it was lost in."""
        rows: list[WorkerRow] = []
        for worker, by_key in sorted(shares.items()):
            heard = self.heard_ns.get(worker)
            heard_s = None if heard is None or began_ns is None else round((heard - began_ns) / 1e9, 3)
            for key, c in sorted(by_key.items()):
                pct = cpu.get(key.step, {}).get(worker)
                rows.append(
                    {
                        "step": key.step,
                        "phase": key.phase,
                        "model": key.model,
                        "worker": worker,
                        "requests": c["requests"],
                        "ok": c["ok"],
                        "completion_tokens": c["completion_tokens"],
                        "cpu_max_pct": None if pct is None else round(pct, 1),
                        "last_heard_s": heard_s,
                        "lost_in_step": self.lost.get(worker),
                    }
                )
        return rows
