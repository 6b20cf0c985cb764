"""How one user turns a request into attempts: retries (client discipline), fallback routes and hedging.

For one *client request* (what the application asked for):

1. Under ``honor``, a model that refused this user (429/503) is *cooling down* until its Retry-After (or the
   backoff) has passed. The user skips cooling models of its route and, when all are cooling, sleeps until the
   first is available again; the wait is counted. So a disciplined user never comes back to a model early.
2. **Route**: the attempt goes to the first available model (the primary unless it cools down); when it is
   refused with a status of ``--fallback-on`` (429, 503) and ``--fallback-models`` are given, the same messages go
   at once to the next available model, and so on.
3. **Hedge** (``--hedge-ttft-ms X``): when an attempt has no first token after X ms, the same request starts on the
   next model of the route (the same model without fallbacks); whichever streams its first token first is kept
   and the other is cancelled. Hedges fired and won are counted.
4. **Retry**: a refused attempt that the :class:`~locust_llm.users.discipline.RetryPolicy` retries starts again at
   step 1 after its delay.

Every attempt is recorded (its model's row, Locust events); the client request is recorded once more with its
client-perceived latency (first send -> end of the final attempt, waits included) and counted per step as
``client_requests``/``client_ok`` with the ``client_e2e`` histogram, next to ``retries``, ``retry_wait_ms``,
``fallbacks``, ``hedges`` and ``hedge_wins``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import gevent
import gevent.event

from locust_llm.metrics import RequestResult
from locust_llm.users.discipline import RETRYABLE, FlowConfig

__all__ = ["Flow", "FlowConfig", "Sender"]

Message = dict[str, Any]


class Sender(Protocol):
    def __call__(
        self,
        model: str,
        messages: Sequence[Message],
        max_tokens: int,
        intended_ns: int,
        on_first_token: Callable[[], None] | None,
    ) -> RequestResult: ...


class Recorder(Protocol):
    def record(self, result: RequestResult) -> None: ...

    def count(self, name: str, model: str, n: int = 1, at_ns: int | None = None) -> None: ...

    def record_client(self, model: str, sent_ns: int, end_ns: int, ok: bool) -> None: ...


class Flow:
    def __init__(
        self,
        send: Sender,
        recorder: Recorder,
        config: FlowConfig,
        rng: random.Random,
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        self.send = send
        self.recorder = recorder
        self.config = config
        self.rng = rng
        self.clock = clock
        self.cooldown_ns: dict[str, int] = {}  # model -> until when this user must not send to it

    def request(self, primary: str, messages: Sequence[Message], max_tokens: int, intended_ns: int) -> RequestResult:
        """Make one client request (module docstring); returns the final attempt."""
        policy = self.config.policy
        route = [primary, *(m for m in self.config.fallbacks if m != primary)]
        first_sent: int | None = None
        retries = 0
        while True:
            intended_ns = self._wait_turn(route, primary, intended_ns)
            result, started = self._route(route, messages, max_tokens, intended_ns, retries)
            first_sent = started if first_sent is None else first_sent
            if result.ok:
                break
            delay = policy.delay_s(result.http_status, result.retry_after_s, retries, self.rng)
            if delay is None:
                break
            retries += 1
            intended_ns = result.end_ns + int(delay * 1e9)
        self.recorder.record_client(primary, first_sent, result.end_ns, result.ok)
        return result

    def _wait_turn(self, route: list[str], primary: str, intended_ns: int) -> int:
        """Sleep until a model of the route is no longer cooling down; the new intended start."""
        now = self.clock()
        ready_at = min(self.cooldown_ns.get(m, 0) for m in route)
        if ready_at <= now:
            return intended_ns
        wait_ns = ready_at - now
        gevent.sleep(wait_ns / 1e9)
        self.recorder.count("retry_wait_ms", primary, wait_ns // 1_000_000)
        return max(intended_ns, ready_at)

    def _cool(self, result: RequestResult, retries: int) -> None:
        """``honor``: the refusing model cools down for its Retry-After, or the backoff without one."""
        policy = self.config.policy
        if policy.name != "honor" or result.http_status not in RETRYABLE:
            return
        wait = policy.wait_s(result.retry_after_s, retries, self.rng)
        until = result.end_ns + int(wait * 1e9)
        self.cooldown_ns[result.model] = max(self.cooldown_ns.get(result.model, 0), until)

    def _route(
        self, route: list[str], messages: Sequence[Message], max_tokens: int, intended_ns: int, retries: int
    ) -> tuple[RequestResult, int]:
        """The last attempt of the route (skipping cooling models), and when its first attempt started."""
        now = self.clock()
        available = [m for m in route if self.cooldown_ns.get(m, 0) <= now] or route[:1]
        started: int | None = None
        for i, model in enumerate(available):
            hedge_to = available[i + 1] if i + 1 < len(available) else model
            result = self._attempt(model, hedge_to, messages, max_tokens, intended_ns)
            self._cool(result, retries)
            if started is None:
                started = result.started_ns or result.sent_ns
            if retries:
                self.recorder.count("retries", model)
            if model != route[0]:
                self.recorder.count("fallbacks", model)
            if result.http_status in self.config.fallback_on and i + 1 < len(available):
                intended_ns = result.end_ns
                continue
            return result, started
        raise AssertionError("unreachable: the route is never empty")

    def _attempt(
        self, model: str, hedge_to: str, messages: Sequence[Message], max_tokens: int, intended_ns: int
    ) -> RequestResult:
        if self.config.hedge_after_s is None:
            result = self.send(model, messages, max_tokens, intended_ns, None)
            self.recorder.record(result)
            return result
        return self._hedged(model, hedge_to, messages, max_tokens, intended_ns)

    def _hedged(
        self, model: str, hedge_to: str, messages: Sequence[Message], max_tokens: int, intended_ns: int
    ) -> RequestResult:
        assert self.config.hedge_after_s is not None
        first: gevent.event.AsyncResult = gevent.event.AsyncResult()

        def start(name: str, which: str) -> gevent.Greenlet:
            def on_first_token() -> None:
                if not first.ready():
                    first.set(which)

            return gevent.spawn(self.send, name, messages, max_tokens, intended_ns, on_first_token)

        primary = start(model, "primary")
        gevent.wait([primary, first], timeout=self.config.hedge_after_s, count=1)
        result: RequestResult
        if primary.ready() or first.ready():
            result = primary.get()
            self.recorder.record(result)
            return result
        self.recorder.count("hedges", model)
        hedge = start(hedge_to, "hedge")
        while not first.ready() and not (primary.ready() and hedge.ready()):
            gevent.wait([primary, hedge, first], count=1)
        if first.ready():
            winner, loser = (hedge, primary) if first.get() == "hedge" else (primary, hedge)
            loser.kill(block=True)
            if winner is hedge:
                self.recorder.count("hedge_wins", model)
            result = winner.get()
            self.recorder.record(result)
            return result
        for greenlet in (hedge, primary):  # both failed before any token: both attempts are recorded
            self.recorder.record(greenlet.get())
        result = primary.get()
        return result
