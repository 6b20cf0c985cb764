"""Per-step collection across Locust processes: record, ship worker deltas, merge on the master, sample health.

A master stamps step changes and tells its workers (``locust_llm_step``); a worker stamps each with its own clock when
told, and attaches what it filed to every report; the master merges it. Each run is numbered, and what belongs to
another run is dropped. Every process samples its CPU once a second; the master notices a lost worker.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping
from typing import Any

import gevent

from locust_llm.measure.fleet import ServerScrape
from locust_llm.measure.health import StepHealth, Validity, invalid_reasons
from locust_llm.measure.histogram import Histogram
from locust_llm.measure.rows import RouteBook, StepRow, StepWindow, WorkerRow, step_row, step_rows
from locust_llm.measure.sla import Prices
from locust_llm.measure.stats import GENERATOR, STEADY, WARMUP, StatsKey, StatsTable, StepStats
from locust_llm.measure.timeline import Timeline
from locust_llm.protocol.metrics import RequestResult
from locust_llm.runtime.cpu import CpuSampler
from locust_llm.runtime.progress import SETTLE_S
from locust_llm.runtime.stall import LoopWatch
from locust_llm.runtime.workers import WorkerWatch

__all__ = ["PENDING_LIMIT", "PENDING_TOKENS", "Collector"]

PENDING_LIMIT = 128  # results recorded before they are filed together (Collector.record),
PENDING_TOKENS = 8192  # or fewer once they hold this many tokens: a batch takes time in proportion to them

logger = logging.getLogger("locust_llm")

STEP_MESSAGE = "locust_llm_step"
END_MESSAGE = "locust_llm_end"
RESET_MESSAGE = "locust_llm_reset"
REPORT_KEY = "locust_llm"
WORKER_COUNTS = ("requests", "ok", "completion_tokens")  # per worker (_llm_workers.csv); the rest only merged


class Collector:
    def __init__(self, environment: Any, role: str) -> None:
        self.environment = environment
        self.role = role  # "local", "master" or "worker"
        self.name = "master" if role == "master" else ("local" if role == "local" else "worker")
        self.timeline = Timeline()
        self.table = StatsTable()  # this process's samples (on workers: the delta not yet shipped)
        self.merged = StatsTable()  # master: everything the workers shipped
        self.by_worker: dict[str, dict[StatsKey, dict[str, int]]] = defaultdict(dict)
        """Master: per worker, its share of each step's :data:`WORKER_COUNTS` (its histograms are only merged)."""
        self.health: dict[int, StepHealth] = defaultdict(StepHealth)
        self.worker_cpu: dict[int, float] = {}  # worker: this process's max CPU % per step (shipped)
        self.began_ns: int | None = None
        self.ended_ns: int | None = None
        self.closed = False
        self._pending: list[RequestResult] = []  # recorded, not yet filed in the table (see record)
        self._clients: list[tuple[str, int, RequestResult, bool]] = []  # client requests, filed with them
        self._pending_tokens = 0
        self.run = 0  # the number of the run being recorded (see reset)
        self._cpu = CpuSampler()
        self.workers = WorkerWatch(environment)  # master: who is alive, lost, joined, last heard from
        self.worker_steps: dict[str, tuple[int, int, bool]] = {}
        """Master: per worker, from its last report, the step it was in, for how long (ns) and whether it had ended."""
        self.after_sample: Callable[[], None] | None = None  # run once a second after the health sample
        self._greenlet: gevent.Greenlet | None = None
        self.trace_rate_req_s: float | None = None  # a replayed trace's own rate: a step's speed is its rate over it
        self.holds: dict[str, int] = {}
        """Per model (or route): before this (local clock) no user sends its first request there, a Retry-After its
        preflight was given. A master passes the time left with each step message."""
        self.dropped_routes: list[str] = []
        """Routes the preflight found down and ``--routes-allow-down`` dropped; a master passes them on too."""
        self.exact_lengths: dict[str, bool] = {}  # per model (route): --output-length as resolved; passed on too
        self.repeat_of: dict[int, int] = {}  # step -> its pass over the plan (--repeats); 1 when not given
        self._stalls: list[tuple[int, int]] = []  # (at ns, lateness ns) of the loop watchdog, filed with the rest
        self.loop_watch = LoopWatch(lambda at_ns, late_ns: self._stalls.append((at_ns, late_ns)))

    # -- wiring ------------------------------------------------------------------------------------------------

    def attach(self) -> None:
        """Register message handlers and event listeners for this role, and start the health sampler."""
        runner = self.environment.runner
        events = self.environment.events
        if self.role == "worker":
            runner.register_message(STEP_MESSAGE, self._on_step_message)
            runner.register_message(END_MESSAGE, self._on_end_message)
            runner.register_message(RESET_MESSAGE, self._on_reset_message)
            events.report_to_master.add_listener(self._on_report_to_master)
        elif self.role == "master":
            events.worker_report.add_listener(self._on_worker_report)
            events.worker_connect.add_listener(self._on_worker_connect)
            events.heartbeat_sent.add_listener(self.workers.heard)
        if self.role != "master":  # the processes that time tokens
            self.loop_watch.start()
        self._greenlet = gevent.spawn(self._sample_loop)

    def detach(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None

    def reset(self, run: int) -> None:
        """Record run number ``run`` afresh: a new timeline, empty statistics and health, the sampler running; the
        master tells the workers to do the same."""
        self.clear(keep_steps=False)
        self.run = run
        self.began_ns = self.ended_ns = None
        self.holds = {}
        self.dropped_routes = []
        self.exact_lengths = {}
        self.closed = False
        self.workers.reset()
        if self._greenlet is None:
            self._greenlet = gevent.spawn(self._sample_loop)
        if self.role != "master":
            self.loop_watch.start()
        if self.role == "master":
            self._send(RESET_MESSAGE, {"run": run, "keep_steps": False})

    def clear(self, keep_steps: bool = True) -> None:
        """Forget the statistics recorded so far (Locust's *Reset stats*); the steps go on unless ``keep_steps`` is
        false."""
        self.table, self.merged = StatsTable(), StatsTable()
        self._pending, self._pending_tokens, self._clients = [], 0, []  # recorded before the reset: forgotten
        self._stalls = []
        self.by_worker.clear()
        self.health.clear()
        self.worker_cpu.clear()
        if not keep_steps:
            self.timeline = Timeline()
            self.repeat_of = {}
        elif self.role == "master":
            self._send(RESET_MESSAGE, {"run": self.run, "keep_steps": True})

    # -- recording ---------------------------------------------------------------------------------------------

    def record(self, result: RequestResult) -> None:
        """File ``result`` (a finished attempt, not changed afterwards), in batches of :data:`PENDING_LIMIT` (fewer
        once they hold :data:`PENDING_TOKENS` tokens): filing many in a row runs warm. What is pending is filed
        before every read of the table and before a worker is told of a step or the end (which may be dated before
        samples it recorded), and forgotten by a reset; where a sample goes depends only on its observation times
        and the timeline (:mod:`locust_llm.measure.stats`), so every reader sees what filing each at once would have
        given."""
        if not self.closed:
            pending = self._pending
            pending.append(result)
            self._pending_tokens += len(result.token_ns)
            if len(pending) >= PENDING_LIMIT or self._pending_tokens >= PENDING_TOKENS:
                self._file_pending()

    def _file_pending(self) -> None:
        pending, self._pending, self._pending_tokens = self._pending, [], 0
        clients, self._clients = self._clients, []
        self.loop_watch.flush()
        stalls, self._stalls = self._stalls, []
        locate, table = self.timeline.locate, self.table
        table.add_all(pending, locate)
        for model, intended_ns, final, good in clients:
            table.add_client(model, intended_ns, final, locate, good)
        if self.timeline.marks and not self.closed:  # before the first step, and once closed, they belong nowhere
            for at_ns, late_ns in stalls:
                table.add_stall(late_ns, at_ns, locate)

    def count(self, name: str, model: str, n: int, at_ns: int) -> None:
        if not self.closed:
            self.table.bump(name, model, n, at_ns, self.timeline.locate)

    def record_server(self, model: str, scrape: ServerScrape, t_ns: int) -> None:
        """A round of scrapes of the server's metrics (:mod:`locust_llm.runtime.server_scraper`)."""
        if not self.closed:
            self.table.add_server(model, scrape, t_ns, self.timeline.locate)

    def record_arrival(self, model: str, in_flight: int, dropped: bool, t_ns: int) -> None:
        if not self.closed:
            self.table.add_arrival(model, in_flight, dropped, t_ns, self.timeline.locate)

    def record_client(self, model: str, intended_ns: int, final: RequestResult, good: bool = False) -> None:
        """File a client request (``final``, its last attempt, already recorded): with the pending attempts, as
        :meth:`record` files them."""
        if not self.closed:
            self._clients.append((model, intended_ns, final, good))

    # -- steps (master / local) --------------------------------------------------------------------------------

    def begin_step(self, step: int, users: int, warmup_ns: int, rate: float | None = None, processes: int = 1) -> None:
        now = time.perf_counter_ns()
        if self.began_ns is None:
            self.began_ns = now
        mark = self.timeline.begin(step, users, now, warmup_ns, rate, processes)
        if self.role == "master":
            self._send(STEP_MESSAGE, self._step_data(mark, 0, now))

    def stop(self) -> None:
        """The run was stopped before its shape ended: its current step is partial."""
        mark = self.timeline.current
        if self.ended_ns is None and mark is not None:
            self.health[mark.step].partial = True
        self.end()

    def end(self) -> None:
        """The shape has ended (samples from now on are *drain*)."""
        if self.ended_ns is not None:
            return
        self.ended_ns = time.perf_counter_ns()
        self.timeline.end(self.ended_ns)
        if self.role == "master":
            self._send(END_MESSAGE, {"elapsed_ns": 0})

    def _send(self, kind: str, data: dict[str, Any], client_id: str | None = None) -> None:
        try:
            self.environment.runner.send_message(kind, data, client_id)
        except Exception as exc:  # a dying worker must not break the master's shape
            logger.warning("locust-llm: could not tell workers about the step change: %s", exc)

    def _on_worker_connect(self, client_id: str, **_kw: Any) -> None:
        mark = self.timeline.current
        if mark is None:
            return
        now = time.perf_counter_ns()
        if self.ended_ns is None and self.began_ns is not None:  # mid-run: its users come at the next step
            self.workers.defer_join(client_id, mark.step)
        data = self._step_data(mark, now - mark.began_ns, now)
        self._send(STEP_MESSAGE, data, client_id)

    def _step_data(self, mark: Any, elapsed_ns: int, now: int) -> dict[str, Any]:
        """A step message: the step, and this run's holds, dropped routes and resolved output lengths."""
        return {
            "run": self.run,
            "step": mark.step,
            "users": mark.users,
            "warmup_ns": mark.warmup_ns,
            "elapsed_ns": elapsed_ns,
            "rate": mark.rate,
            "processes": mark.processes,
            "holds": self._holds_left(now),
            "dropped": self.dropped_routes,
            "exact": self.exact_lengths,
        }

    def _holds_left(self, now: int) -> dict[str, int]:
        return {name: until - now for name, until in self.holds.items() if until > now}

    # -- worker side -------------------------------------------------------------------------------------------

    def _on_step_message(self, environment: Any, msg: Any, **_kw: Any) -> None:
        self._file_pending()
        data = msg.data
        now = time.perf_counter_ns()
        self.run = int(data.get("run", self.run))  # a worker that joined mid-run learns the run's number here
        rate = data.get("rate")
        for name, left in (data.get("holds") or {}).items():
            self.holds[name] = max(self.holds.get(name, 0), now + int(left))
        self.dropped_routes = list(data.get("dropped") or [])  # the master's list for this run, whole
        self.exact_lengths = dict(data.get("exact") or {})
        self.timeline.begin(
            int(data["step"]),
            int(data["users"]),
            now - int(data["elapsed_ns"]),
            int(data["warmup_ns"]),
            None if rate is None else float(rate),
            int(data.get("processes", 1)),
        )

    def _on_end_message(self, environment: Any, msg: Any, **_kw: Any) -> None:
        self._file_pending()
        self.timeline.end(time.perf_counter_ns())

    def _on_reset_message(self, environment: Any, msg: Any, **_kw: Any) -> None:
        if msg.data.get("keep_steps"):
            self.clear()
        else:
            self.reset(int(msg.data["run"]))

    def _on_report_to_master(self, client_id: str, data: dict[str, Any], **_kw: Any) -> None:
        self._file_pending()
        delta = self.table.drain()
        mark, ended = self.timeline.current, self.timeline.ended_ns is not None
        at = [0, 0, ended] if mark is None else [mark.step, time.perf_counter_ns() - mark.began_ns, ended]
        data[REPORT_KEY] = {
            "run": self.run,
            "at": at,  # where this worker is: what was observed before this report is in it (master: settled)
            "stats": delta.to_wire(),
            "cpu": {str(k): v for k, v in self.worker_cpu.items()},
        }

    # -- master side -------------------------------------------------------------------------------------------

    def _on_worker_report(self, client_id: str, data: dict[str, Any], **_kw: Any) -> None:
        report = data.get(REPORT_KEY)
        if not report or not self.workers.accept(client_id):
            return
        if int(report.get("run", self.run)) != self.run:
            logger.debug(
                "locust-llm: dropped worker %s's report of run %s (now run %d)", client_id, report.get("run"), self.run
            )
            return
        try:
            delta = StatsTable.from_wire(report["stats"])
        except (ValueError, KeyError) as exc:
            logger.error("locust-llm: dropped a malformed report from worker %s: %s", client_id, exc)
            return
        self.merged.merge(delta)
        shares = self.by_worker[client_id]
        for key, stats in delta:
            if key.model == GENERATOR:  # the worker's loop stalls: merged, no share of requests
                continue
            share = shares.setdefault(key, dict.fromkeys(WORKER_COUNTS, 0))
            for name in WORKER_COUNTS:
                share[name] += stats.counts[name]
        at = report.get("at")
        if at:
            self.worker_steps[client_id] = (int(at[0]), int(at[1]), bool(at[2]))
        for step, pct in report.get("cpu", {}).items():
            self.health[int(step)].add_cpu(client_id, float(pct))

    def settled(self, step: int) -> bool:
        """Whether every sample of ``step`` observed elsewhere has arrived: always, but on a master, whose every
        connected worker must have reported after it (:mod:`locust_llm.runtime.progress`)."""
        if self.role != "master":
            return True
        alive = self.workers.alive()
        settle_ns = SETTLE_S * 1e9
        for worker in alive:
            at = self.worker_steps.get(worker)
            if at is None or not (at[2] or (at[0] > step and at[1] >= settle_ns)):
                return False
        return True

    # -- health ------------------------------------------------------------------------------------------------

    def _sample_loop(self) -> None:
        for tick in itertools.count(1):
            gevent.sleep(1.0)
            self._file_pending()  # the watchdog's samples, at least once a second
            if tick % 60 == 0 and self.environment.stats is not None:  # bounded memory over a night
                from locust_llm.runtime.locust_stats import thin_history, trim_per_second  # imports Locust: not here

                trim_per_second(self.environment.stats, time.time())
                thin_history(self.environment.stats)
            self.sample_health()
            if self.after_sample is not None:
                self.after_sample()

    def sample_health(self) -> None:
        pct = self._cpu.sample()
        mark = self.timeline.current
        if mark is None or self.ended_ns is not None:
            return
        if self.role == "worker":
            self.worker_cpu[mark.step] = max(self.worker_cpu.get(mark.step, 0.0), pct)
            return
        health = self.health[mark.step]
        health.add_cpu(self.name, pct)
        if self.role == "master":
            self._check_workers(mark.step, health)

    def _check_workers(self, step: int, health: StepHealth) -> None:
        alive, lost = self.workers.check(step)
        health.add_workers(alive)
        health.lost += lost

    # -- results -----------------------------------------------------------------------------------------------

    def results(self, steps: Collection[int] | None = None) -> StatsTable:
        """Everything recorded: this process's samples plus, on the master, the workers'; only ``steps``' when given
        (a copy costs a merge of every histogram: a search asks for its probe's step alone each second)."""
        self._file_pending()
        return StatsTable().merge(self.table, steps).merge(self.merged, steps)

    def windows(
        self,
        validity: Validity,
        judge_open: bool = False,
        steps: Collection[int] | None = None,
        table: StatsTable | None = None,
    ) -> list[StepWindow]:
        """The steps' steady windows with their validity (only ``steps``' when given; ``table``: :meth:`results`
        already taken); the step in progress is judged by its length too only with ``judge_open`` (a search deciding
        on it now)."""
        marks = self.timeline.marks
        if not marks or self.began_ns is None:
            return []
        end_ns = self.ended_ns or time.perf_counter_ns()
        if table is None:
            table = self.results(steps)
        out = []
        for i, mark in enumerate(marks):
            if mark.rest or (steps is not None and mark.step not in steps):
                continue
            until = marks[i + 1].began_ns if i + 1 < len(marks) else end_ns
            start = mark.began_ns + mark.warmup_ns
            health = self.health.get(mark.step, StepHealth())
            window_s = max(0.0, (until - start) / 1e9)
            done = (
                judge_open or i + 1 < len(marks) or self.ended_ns is not None
            )  # a step in progress is not judged by its length
            reasons = invalid_reasons(
                mark.step,
                health,
                table,
                validity.max_cpu_pct,
                validity.max_lag_ms,
                window_s if done else None,
                validity.min_requests,
                validity.max_e2e_share,
            )
            out.append(
                StepWindow(
                    step=mark.step,
                    users=mark.users,
                    start_s=(start - self.began_ns) / 1e9,
                    duration_s=window_s,
                    warmup_s=mark.warmup_ns / 1e9,
                    cpu_max_pct=health.cpu_max,
                    workers=health.workers_min if self.role == "master" else None,
                    workers_lost=len(health.lost) if self.role == "master" else None,
                    invalid_reasons=tuple(reasons),
                    rate=mark.rate,
                    speed=round(mark.rate / self.trace_rate_req_s, 6) if mark.rate and self.trace_rate_req_s else None,
                    repeat=self.repeat_of.get(mark.step, 1),
                )
            )
        return out

    def rows(
        self,
        validity: Validity,
        prices: Prices | RouteBook | None = None,
        judge_open: bool = False,
        steps: Collection[int] | None = None,
    ) -> list[StepRow]:
        """The per-step rows (only ``steps``' when given)."""
        table = self.results(steps)
        return step_rows(table, self.windows(validity, judge_open, steps, table), prices)

    def merged_row(
        self, steps: tuple[int, ...], model: str, validity: Validity, prices: Prices | RouteBook | None = None
    ) -> StepRow | None:
        """One row of several steps' steady samples together (a search's repeated probe), exact: their histograms
        and counters merged, the window their total length, the reasons theirs."""
        table = self.results(steps)
        windows = self.windows(validity, True, steps, table)
        if not windows:
            return None
        stats = StepStats()
        for key, part in table:
            if key.phase == STEADY and key.model == model:
                stats.merge(part)
        cpu = [w.cpu_max_pct for w in windows if w.cpu_max_pct is not None]
        window = dataclasses.replace(
            windows[-1],
            duration_s=sum(w.duration_s for w in windows),
            cpu_max_pct=max(cpu) if cpu else None,
            invalid_reasons=tuple(r for w in windows for r in w.invalid_reasons),
        )
        return step_row(window, model, stats, prices)

    def open_requests(self) -> int:
        """Open loop: the arrivals sent and not yet ended, as far as the samples received so far tell."""
        total = 0
        for _, stats in self.results():
            c = stats.counts
            total += c["arrivals"] - c["dropped"] - c["client_requests"]
        return total

    def step_e2e(self, step: int) -> tuple[Histogram, int, float]:
        """Step ``step`` so far, all models: its successful requests' E2E histogram (its steady window's: its warm-up
        holds requests sent under the load before it; the warm-up's while nothing steady ended), its completed
        requests, warm-up and steady, and its steady requests per second."""
        e2e, warm, requests, steady = Histogram(), Histogram(), 0, 0
        for key, stats in self.results((step,)):
            if key.phase in (STEADY, WARMUP):
                (e2e if key.phase == STEADY else warm).merge(stats.hist["e2e"])
                requests += stats.counts["requests"]
                steady += stats.counts["requests"] if key.phase == STEADY else 0
        e2e = e2e if e2e.count else warm
        marks = [m for m in self.timeline.marks if m.step == step]
        if not marks:
            return e2e, requests, 0.0
        later = [m.began_ns for m in self.timeline.marks if m.began_ns > marks[0].began_ns]
        until = later[0] if later else (self.ended_ns or time.perf_counter_ns())
        window_s = (until - marks[0].began_ns - marks[0].warmup_ns) / 1e9
        return e2e, requests, steady / window_s if window_s > 0 else 0.0

    def worker_rows(self) -> list[WorkerRow]:
        """Per worker, step and phase: requests, ok, tokens and CPU (the master's breakdown of what it merged), and
        when the worker was last heard from (:meth:`WorkerWatch.rows`)."""
        cpu = {step: health.cpu_max_pct for step, health in self.health.items()}
        return self.workers.rows(self.by_worker, cpu, self.began_ns)

    def lost_workers(self, e2e_s: Mapping[int, float]) -> list[dict[str, Any]]:
        """The workers lost during the run and what of theirs is counted (:meth:`WorkerWatch.lost_workers`)."""
        return self.workers.lost_workers(self.by_worker, self.began_ns, e2e_s)
