"""Open loop (``--rates``, ``--trace``): one user per generator process sends its share of each step's arrivals on
schedule, each in a greenlet of its own.

An arrival that finds this process's share of ``--max-in-flight`` in flight is dropped and counted, never delayed.
A trace's session runs turn after turn in its arrival's greenlet (later turns are never dropped) until its step
ends or a turn fails. When the shape ends, the requests in flight finish (the drain).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from math import ceil
from typing import TYPE_CHECKING, Any

import gevent
from gevent.local import local
from gevent.pool import Group

from locust_llm.shapes.arrivals import share

if TYPE_CHECKING:
    from locust_llm.config.run_config import RunConfig
    from locust_llm.measure.timeline import StepMark
    from locust_llm.protocol.metrics import RequestResult
    from locust_llm.runtime.run import LLMRun
    from locust_llm.users.flow import Flow
    from locust_llm.workload.prompts import Message, Workload

__all__ = ["OpenLoop"]


class OpenLoop:
    """This process's arrivals (module docstring); :meth:`run` is the user's task."""

    def __init__(
        self, llm: LLMRun, config: RunConfig, workload: Workload, rng: random.Random, flow: Flow, index: int
    ) -> None:
        self.llm, self.config, self.workload, self.rng, self.flow = llm, config, workload, rng, flow
        self.index = index  # this generator process among the processes sharing each step's rate
        self.in_flight = 0
        self.group = Group()
        self.turn = local()  # the session turn each greenlet sends (``turn.number``; 0: none), read by the user

    def run(self) -> None:
        """Send the arrivals of each step in turn; return once the shape has ended and the drain is over."""
        collector = self.llm.collector
        while True:
            if collector.timeline.ended_ns is not None or self.llm.fatal_message:  # a worker's end: its timeline's
                self.group.join(timeout=self.config.request_timeout_s)
                gevent.sleep(1.0)
                return
            mark = collector.timeline.current
            if mark is None or mark.rate is None or mark.rest or self.index >= mark.processes:
                gevent.sleep(0.05)
                continue
            self._run_step(mark)

    def stop(self) -> None:
        """The user stops: cancel what is in flight."""
        self.group.kill(block=False)

    def _run_step(self, mark: StepMark) -> None:
        assert mark.rate is not None
        config, timeline = self.config, self.llm.collector.timeline
        rate, offset = share(mark.rate, mark.processes, self.index)
        cap = ceil(config.max_in_flight / mark.processes)
        trace = config.trace
        arrivals: Iterator[tuple[float, tuple[int, str] | None]]
        if trace is not None:  # the trace's own times at the step's speed; this process's share of its entries
            speed = mark.rate / trace.rate_req_s
            fresh = not config.trace_cache_across_steps  # each pass salted: its own prefixes (workload/trace.py)
            arrivals = (
                (t, (i, f"{mark.step}.{wrap}" if fresh else ""))
                for t, i, wrap in trace.schedule(speed, self.index, mark.processes, config.trace_offset_s)
            )
        else:
            rng = random.Random(f"{config.seed}:{self.index}:{mark.step}" if config.seed is not None else None)
            arrivals = ((t, None) for t in config.arrivals.times_s(rate, rng, offset))
        for t_s, entry in arrivals:
            at = mark.began_ns + int(t_s * 1e9)
            wait = at - time.perf_counter_ns()
            if wait > 0:
                gevent.sleep(wait / 1e9)
            if timeline.current is not mark or timeline.ended_ns is not None:
                return  # the step changed (or the shape ended) while waiting: this arrival was not its
            self._arrive(at, cap, entry, mark)

    def _arrive(self, at_ns: int, cap: int, entry: tuple[int, str] | None, mark: StepMark) -> None:
        llm = self.llm
        dropped = self.in_flight >= cap
        llm.recorder.record_arrival(llm.model, self.in_flight, dropped, at_ns)
        if not dropped:
            self.in_flight += 1
            self.group.spawn(self._request, at_ns, entry, mark)

    def _request(self, at_ns: int, entry: tuple[int, str] | None, mark: StepMark) -> Any:
        """The request of an arrival: the workload's next, or the trace's entry ``(index, its pass's salt)``, with
        the later turns of its session."""
        try:
            trace = self.config.trace
            if trace is None or entry is None:
                messages, max_tokens = self.workload.messages(self.rng)
                return self.flow.request(self.llm.model, messages, max_tokens, at_ns)
            index, salt = entry
            later = trace.turns.get(index)
            if later is None:
                return self._send_entry(index, salt, [], at_ns)
            return self._session(index, later, salt, at_ns, mark)
        finally:
            self.in_flight -= 1

    def _send_entry(self, index: int, salt: str, history: list[Message], at_ns: int) -> RequestResult:
        trace = self.config.trace
        assert trace is not None
        spec = trace.entries[index]
        max_tokens = spec.output_length or self.workload.max_tokens.draw(self.rng)
        messages = history + trace.messages(index, salt if not history else "")
        return self.flow.request(spec.model or self.llm.model, messages, max_tokens, at_ns)

    def _session(self, first: int, later: tuple[int, ...], salt: str, at_ns: int, mark: StepMark) -> Any:
        """Session ``first``'s turns in order (module docstring); each turn's history is the turns before it and
        their answers. A salt on the first turn makes every later prompt, which starts with it, the pass's own."""
        trace, llm, timeline = self.config.trace, self.llm, self.llm.collector.timeline
        assert trace is not None
        llm.recorder.count("sessions", llm.model, 1, at_ns)
        history: list[Message] = []
        result = None
        for number, index in enumerate((first, *later), 1):
            if number > 1:
                assert result is not None
                at_ns = result.end_ns + int(trace.entries[index].delay_s * 1e9)
                self.in_flight -= 1  # thinking: no request in flight
                try:
                    gevent.sleep(max(0, at_ns - time.perf_counter_ns()) / 1e9)
                finally:
                    self.in_flight += 1
                if timeline.current is not mark or timeline.ended_ns is not None:
                    return result  # the step ended: its sessions end with it
                llm.recorder.record_arrival(llm.model, self.in_flight - 1, False, at_ns)
            self.turn.number = number
            result = self._send_entry(first if number == 1 else index, salt, history, at_ns)
            llm.recorder.count("turns", llm.model, 1, result.end_ns)
            if not result.ok:
                return result  # a failed turn ends its session, as a user gives up
            sent = history + trace.messages(index, salt if number == 1 else "")
            history = [*sent, {"role": "assistant", "content": result.reply}]
        return result
