"""How one user turns a request into attempts: retries (client discipline), fallback routes and hedging.

A *client request* (what the application asked for) has an *intended start*: the moment the user was ready to
send it. For one client request:

1. Under ``honor``, a model that refused this user (429/503) is *cooling down* until its Retry-After (or the
   backoff; one draw per refusal, capped by ``--max-retry-wait``) has passed. The user skips cooling models of its
   route and, when all are cooling, sleeps until the first is available again; the wait is counted. So a
   disciplined user never comes back to a model early.
2. **Route**: the attempt goes to the first available model (the primary unless it cools down); when it is
   refused with a status of ``--fallback-on`` (429, 503) and ``--fallback-models`` are given, the same messages go
   at once to the next available model, and so on.
3. **Hedge** (``--hedge-ttft-ms X``): when an attempt has no first token after X ms, the same request starts on
   the next model of the route (the same model without fallbacks); the hedge's intended start is the moment it
   fires. Whichever streams its first token first is kept and the other is cancelled. An attempt that fails before
   the other has streamed is recorded (and its model cools down) while the other goes on.
4. **Retry**: a refused attempt that the :class:`~locust_llm.users.discipline.RetryPolicy` retries starts again at
   step 1 after its delay.
5. **No spinning**: after a client request that failed systematically (HTTP 400/401/403/404, connection refused,
   DNS or TLS failure: :data:`~locust_llm.metrics.SYSTEMATIC`) the user pauses ``SYSTEMATIC_PAUSE_S`` before its
   next request, so a misconfigured run does not flood the endpoint before the run stops.

Recording: every attempt that ends, successful or not, is recorded exactly once, with its own intended start (its
scheduling lag is its own). An attempt cancelled before its first token because the other one of a hedge won is
not a request: ``hedges`` and ``hedge_wins`` count those. The client request is recorded once more
(:meth:`Recorder.record_client`), from its intended start: client-perceived TTFT (to the first token of the final
attempt) and E2E, every wait, retry and fallback included.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import gevent
import gevent.event

from locust_llm.metrics import SYSTEMATIC, RequestResult
from locust_llm.users.discipline import RETRYABLE, FlowConfig, Wait

__all__ = ["SYSTEMATIC_PAUSE_S", "Flow", "FlowConfig", "Recorder", "Sender"]

Message = dict[str, Any]

SYSTEMATIC_PAUSE_S = 1.0


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

    def record_client(self, model: str, intended_ns: int, result: RequestResult) -> None: ...


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
        client_start = intended_ns
        route = [primary, *(m for m in self.config.fallbacks if m != primary)]
        retries = 0
        while True:
            intended_ns = self._wait_turn(route, primary, intended_ns)
            result, wait = self._route(route, messages, max_tokens, intended_ns, retries)
            if result.ok:
                break
            delay = self._retry_delay(result, wait, retries)
            if delay is None:
                break
            retries += 1
            intended_ns = result.end_ns + int(delay * 1e9)
        self.recorder.record_client(primary, client_start, result)
        if result.cause in SYSTEMATIC:
            gevent.sleep(SYSTEMATIC_PAUSE_S)
        return result

    def _retry_delay(self, result: RequestResult, wait: Wait | None, retries: int) -> float | None:
        policy = self.config.policy
        if not policy.retries(result.status, retries):
            return None
        if policy.name == "naive":
            return 0.0
        return wait.seconds if wait is not None else 0.0

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

    def _settle(self, result: RequestResult, retries: int) -> Wait | None:
        """Record an attempt that ended; a refusal draws its wait once and, under ``honor``, cools its model."""
        self.recorder.record(result)
        if result.status not in RETRYABLE:
            return None
        wait = self.config.policy.wait(result.retry_after_s, retries, self.rng)
        if wait.capped:
            self.recorder.count("retry_waits_capped", result.model, 1, result.end_ns)
        if self.config.policy.name == "honor":
            until = result.end_ns + int(wait.seconds * 1e9)
            self.cooldown_ns[result.model] = max(self.cooldown_ns.get(result.model, 0), until)
        return wait

    def _route(
        self, route: list[str], messages: Sequence[Message], max_tokens: int, intended_ns: int, retries: int
    ) -> tuple[RequestResult, Wait | None]:
        """The last attempt of the route (skipping cooling models), and the wait its refusal asks for."""
        now = self.clock()
        available = [m for m in route if self.cooldown_ns.get(m, 0) <= now] or route[:1]
        i = 0
        while i < len(available):
            model = available[i]
            hedge_to = available[i + 1] if i + 1 < len(available) else model
            result, wait = self._attempt(model, hedge_to, messages, max_tokens, intended_ns, retries)
            if retries:
                self.recorder.count("retries", model)
            if model != route[0]:
                self.recorder.count("fallbacks", model)
            i = available.index(result.model) + 1  # after a hedge, the route goes on after the model that answered
            if result.status in self.config.fallback_on and i < len(available):
                intended_ns = result.end_ns
                continue
            return result, wait
        raise AssertionError("unreachable: the route is never empty")

    def _attempt(
        self, model: str, hedge_to: str, messages: Sequence[Message], max_tokens: int, intended_ns: int, retries: int
    ) -> tuple[RequestResult, Wait | None]:
        if self.config.hedge_after_s is None:
            result = self.send(model, messages, max_tokens, intended_ns, None)
        else:
            result = self._hedged(model, hedge_to, messages, max_tokens, intended_ns, retries)
        return result, self._settle(result, retries)

    def _hedged(
        self,
        model: str,
        hedge_to: str,
        messages: Sequence[Message],
        max_tokens: int,
        intended_ns: int,
        retries: int,
    ) -> RequestResult:
        """Step 3 of the module docstring; returns the attempt to settle (the others are settled here)."""
        assert self.config.hedge_after_s is not None
        first: gevent.event.AsyncResult = gevent.event.AsyncResult()

        def start(name: str, intended: int) -> gevent.Greenlet:
            def on_first_token() -> None:
                if not first.ready():
                    first.set(greenlet)

            greenlet = gevent.spawn(self.send, name, messages, max_tokens, intended, on_first_token)
            return greenlet

        primary = start(model, intended_ns)
        # against the clock, not the loop's cached time: a wait's timeout counts from the loop's last turn, which
        # may be milliseconds before now (gevent.sleep updates that time first, gevent.wait does not)
        deadline = self.clock() + int(self.config.hedge_after_s * 1e9)
        while not (primary.ready() or first.ready()) and (left := deadline - self.clock()) > 0:
            gevent.wait([primary, first], timeout=left / 1e9, count=1)
        if primary.ready() or first.ready():
            result: RequestResult = primary.get()
            return result
        self.recorder.count("hedges", model)
        hedge = start(hedge_to, self.clock())
        pending = [primary, hedge]
        while not first.ready() and len(pending) > 1:
            gevent.wait([*pending, first], count=1)
            for greenlet in [g for g in pending if g.ready() and not first.ready()]:
                pending.remove(greenlet)
                self._settle(greenlet.get(), retries)  # failed before any token; the other goes on
        kept = first.get() if first.ready() else pending[0]  # the first to stream, or the last one left
        for greenlet in pending:
            if greenlet is kept:
                continue
            if greenlet.ready():
                self._settle(greenlet.get(), retries)  # it failed just as the other streamed
            else:
                greenlet.kill(block=True)  # cancelled before its first token: not a request
        if kept is hedge:
            self.recorder.count("hedge_wins", model)
        result = kept.get()
        return result
