"""The recorder: the one place that files a measured request and logs Locust's ``request`` rows.

Each attempt is filed with the collector and goes through the fail-fast rule; it gives Locust's ``TTFT``, ``ITL``,
``E2E`` (and ``TTFA``) rows, name = model, a success's a moment later with others, each dated with its own end
(docs/architecture.md, "Locust's statistics in batches"). Each client request is judged against the SLA.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from itertools import repeat
from operator import sub, truediv
from typing import Any

import gevent

from locust_llm.measure.failfast import FailFast
from locust_llm.measure.sla import Sla
from locust_llm.protocol.metrics import RequestResult
from locust_llm.runtime.collector import Collector
from locust_llm.runtime.locust_stats import (
    Row,
    Times,
    gaps_ms,
    log_gaps,
    log_one,
    log_rows,
    ship_flushed,
    sole_runner_listener,
)

__all__ = ["DEFER_LIMIT", "DEFER_S", "DEFER_TOKENS", "LLMError", "Recorder"]

DEFER_LIMIT = 128
"""Successful requests whose Locust rows wait before they are logged together (module docstring)."""
DEFER_TOKENS = 8192
"""Fewer wait once they hold this many tokens: logging a batch takes time in proportion to its ITL gaps (about 3 ms
for 8,192, warm), during which the loop reads nothing."""
DEFER_S = 1.0
"""The longest a request's Locust rows wait, in seconds."""


class LLMError(Exception):
    """The exception reported on the ``E2E`` event of a failed request; its text is the classified message."""

    def __repr__(self) -> str:  # Locust's failure table shows repr(): keep it to the message itself
        return str(self)


class Recorder:
    def __init__(
        self,
        events: Any,
        collector: Collector,
        on_fatal: Callable[[str], None],
        runner_stats: Callable[[], Any] = lambda: None,
    ) -> None:
        self.events = events
        self.runner_stats = runner_stats
        """The runner's ``RequestStats`` (None before there is a runner), for :func:`log_gaps`."""
        self.collector = collector
        self.on_fatal = on_fatal
        """Called once with the message that stops the run (see :mod:`locust_llm.measure.failfast`)."""
        self.failfast = FailFast()
        self.sla = Sla()
        self.itl_events = True
        self.fast = True
        """Locust's rows may be logged straight into its stats, in batches (``--fast-path``)."""
        self.failfast_per_client = False
        """With ``--routes`` the fail-fast rule reads client requests: a route that went down is fallen back from."""
        self.reasoning_seen = False
        self._deferred: list[tuple[float, RequestResult]] = []  # (wall-clock end, result), in order
        self._deferred_tokens = 0
        self._timer: Any = None  # the hub's timer that flushes DEFER_S after the first deferred request
        events.report_to_master.add_listener(self._report)
        events.test_stop.add_listener(lambda **_kw: self.flush())
        events.quitting.add_listener(lambda **_kw: self.flush())
        events.reset_stats.add_listener(lambda **_kw: self._take())  # dropped: Locust's reset had them

    def configure(self, sla: Sla, itl_events: bool, fast: bool = True, per_client: bool = False) -> None:
        self.sla = sla
        self.itl_events = itl_events
        self.fast = fast
        self.failfast_per_client = per_client

    def record(self, result: RequestResult) -> None:
        """File ``result`` under its step and log (or defer, module docstring) the Locust events ``TTFT``, ``ITL``
        and ``E2E``."""
        collector = self.collector
        if collector.closed:
            return
        collector.record(result)
        if not self.failfast_per_client:
            self._fail_fast(result)
        stats = self.runner_stats()
        direct = stats if stats is not None and self.fast and sole_runner_listener(self.events) else None
        if direct is None or not result.ok:
            if self._deferred:
                self.flush()
            self._log(direct, result)
            return
        deferred = self._deferred
        deferred.append((time.time(), result))
        self._deferred_tokens += len(result.token_ns)
        if len(deferred) >= DEFER_LIMIT or self._deferred_tokens >= DEFER_TOKENS:
            self.flush()
        elif len(deferred) == 1:
            self._arm()

    def _report(self, data: dict[str, Any], **_kw: Any) -> None:
        """A worker reports to its master: the rows waiting go with this report (:func:`ship_flushed`)."""
        stats = self.runner_stats() if self._deferred else None
        self.flush()
        if stats is not None:
            ship_flushed(stats, data)

    def record_cut(self, result: RequestResult) -> None:
        """An attempt that was sent and then cut by a stop of the run: it is in no statistics, so it is counted apart
        (``interrupted``, filed when it was cut)."""
        if not self.collector.closed:
            self.count("interrupted", result.model, 1, time.perf_counter_ns())

    def flush(self) -> None:
        """Log the deferred requests' Locust rows, each at the time it ended (module docstring)."""
        deferred = self._take()
        stats = self.runner_stats() if deferred else None
        if stats is None:
            return  # nothing waited, or no runner any more to log into
        rows: list[Row] = []
        gaps = gaps_ms([result.token_ns for _, result in deferred]) if self.itl_events else None
        for i, (at, result) in enumerate(deferred):
            events = self._rows(result, None if gaps is None else gaps[i])
            rows.extend((at, method, result.model, values, length) for method, values, length in events)
        log_rows(stats, rows)

    def _take(self) -> list[tuple[float, RequestResult]]:
        """The deferred requests, no longer waiting (their timer stopped)."""
        deferred, self._deferred, self._deferred_tokens = self._deferred, [], 0
        if self._timer is not None:
            self._timer.stop()
        return deferred

    def _arm(self) -> None:
        """Flush in :data:`DEFER_S`: a new one-shot timer each time (a libev timer started again after it fired or
        was stopped keeps its old due time, and would fire at once), counted from now, not from the loop's time
        of its last turn (which a long turn, or work that has not yielded for a while, leaves behind)."""
        if self._timer is not None:
            self._timer.close()
        loop = gevent.get_hub().loop
        loop.update_now()
        self._timer = loop.timer(DEFER_S)
        self._timer.start(self.flush)

    def _log(self, direct: Any, result: RequestResult) -> None:
        """Fire (or, with ``direct``, the runner's stats, its listener the only one, log there as the listener would)
        the Locust events of ``result``, now."""
        model = result.model
        error = None if result.ok else LLMError(result.error)
        for method, values, length in self._rows(result):
            failed = error if method == "E2E" else None  # a failure is reported on its E2E row
            if direct is None:
                fire = self.events.request.fire
                for ms in values:
                    fire(
                        request_type=method,
                        name=model,
                        response_time=ms,
                        response_length=length,
                        exception=failed,
                        context={},
                    )
            elif method == "ITL":
                log_gaps(direct, method, model, values)
            else:
                log_one(direct, method, model, values[0], length, failed)

    def _rows(self, result: RequestResult, itl: Times | None = None) -> list[tuple[str, Times, int]]:
        """The Locust events of ``result``, in order, as ``(method, response times in ms, content length)``: ``TTFT``
        (and ``TTFA``, module docstring) and one ``ITL`` per gap when it streamed a token (``itl``: those gaps, when
        :meth:`flush` took a batch's at once), then ``E2E``."""
        rows: list[tuple[str, Times, int]] = []
        ttft = result.ttft_ns
        if ttft is not None:
            rows.append(("TTFT", [ttft / 1e6], result.prompt_tokens))
            if result.reasoning_chunks or result.reasoning_tokens:
                self.reasoning_seen = True
            answer_ttft = result.answer_ttft_ns
            if self.reasoning_seen and answer_ttft is not None:
                rows.append(("TTFA", [answer_ttft / 1e6], result.reasoning_tokens))
            if self.itl_events:
                token_ns = result.token_ns
                gaps = list(map(truediv, map(sub, token_ns[1:], token_ns), repeat(1e6))) if itl is None else itl
                rows.append(("ITL", gaps, 0))
        rows.append(("E2E", [result.e2e_ns / 1e6], result.completion_tokens))
        return rows

    def count(self, name: str, model: str, n: int = 1, at_ns: int | None = None) -> None:
        """Add ``n`` to a per-step counter (retries, fallbacks, reconnects, ...) of ``model``."""
        self.collector.count(name, model, n, time.perf_counter_ns() if at_ns is None else at_ns)

    def record_arrival(self, model: str, in_flight: int, dropped: bool, t_ns: int) -> None:
        """An open-loop arrival (see :mod:`locust_llm.users.open_loop`)."""
        self.collector.record_arrival(model, in_flight, dropped, t_ns)

    def record_client(self, model: str, intended_ns: int, final: RequestResult) -> None:
        """A client request that began at ``intended_ns``, its retries and waits included, ended with ``final``
        (see :mod:`locust_llm.users.flow`); judged against the SLA from its intended start."""
        self.collector.record_client(model, intended_ns, final, self.sla.good(final, intended_ns))
        if self.failfast_per_client:
            self._fail_fast(final)

    def _fail_fast(self, result: RequestResult) -> None:
        message = self.failfast.feed(result)
        if message is not None:
            self.flush()
            self.on_fatal(message)
