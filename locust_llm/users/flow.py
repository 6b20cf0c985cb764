"""How one user turns a client request into attempts: routes, cool-downs, fallbacks, hedging, retries, backoff.

(0) A route drawn by weight (``--routes``). (1) Under ``honor`` a refusing model (or failing route) cools down until
its wait has passed. (2) A ``fallback_on`` status or cause goes to the next model. (3) A hedge races an attempt with
no first token. (4) A retry starts at (1). (5) A systematic failure pauses the user. (6) A server-side failure backs
off. docs/methodology.md, "Retries, fallback and hedging", states each rule.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import gevent
import gevent.event

from locust_llm.protocol.metrics import SYSTEMATIC, Outcome, RequestResult
from locust_llm.protocol.retry import RETRYABLE, SERVER_ERRORS, FlowConfig, Wait

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
        error_backoff: bool = True,
    ) -> None:
        self.send = send
        self.recorder = recorder
        self.config = config
        self.rng = rng
        self.clock = clock
        self.error_backoff = error_backoff
        """Whether this user backs off after server-side failures (step 6; closed loop: an arrival keeps its time)."""
        self.cooldown_ns: dict[str, int] = {}  # model -> until when this user must not send to it
        self.failures = 0  # client requests in a row that failed on the server's side (step 6)
        self.backoff_until_ns = 0
        self.route_failures: dict[str, int] = {}  # route -> its attempts in a row that failed (step 1, --routes)
        self.primary = ""  # the primary model or route of the client request being made
        names = [name for name, _ in config.primaries]
        self._primaries = (names, list(itertools.accumulate(w for _, w in config.primaries)))
        self._circuit = bool(config.primaries) and config.policy.name == "honor"
        self._circuit_here = False  # the circuit of step 1, for this client request (somewhere else to go)

    def hold(self, model: str, until_ns: int) -> None:
        """Send nothing to ``model`` before ``until_ns``: a Retry-After the run was given before this user's first
        request (the preflight's), kept as a refusal's is under ``honor``."""
        if self.config.policy.name == "honor":
            self.cooldown_ns[model] = max(self.cooldown_ns.get(model, 0), until_ns)

    def request(self, primary: str, messages: Sequence[Message], max_tokens: int, intended_ns: int) -> RequestResult:
        """Make one client request (module docstring); returns the final attempt."""
        client_start = intended_ns
        names, cumulative = self._primaries
        if names:  # step 0
            primary = names[0] if len(names) == 1 else self.rng.choices(names, cum_weights=cumulative)[0]
        self.primary = primary
        route = [primary, *(m for m in self.config.fallbacks if m != primary)]
        self._circuit_here = self._circuit and len(route) > 1
        retries = 0
        if self.backoff_until_ns:
            intended_ns = self._back_off(primary, intended_ns)
        while True:
            intended_ns = self._wait_turn(route, primary, intended_ns)
            result, wait = self._route(route, messages, max_tokens, intended_ns, retries)
            if result.ok:
                break
            delay = self.config.policy.delay_s(result.status, wait, retries)
            if delay is None:
                break
            retries += 1
            intended_ns = result.end_ns + int(delay * 1e9)
        self.recorder.record_client(primary, client_start, result)
        if result.cause in SYSTEMATIC:
            gevent.sleep(SYSTEMATIC_PAUSE_S)
        elif self.error_backoff:
            self._count_failure(result)
        return result

    def _count_failure(self, result: RequestResult) -> None:
        """Step 6: a server-side failure draws the pause before this user's next request; a success resets it."""
        self.failures = self.failures + 1 if result.outcome in SERVER_ERRORS else 0
        wait = self.config.policy.error_backoff(self.failures, self.rng)
        self.backoff_until_ns = 0 if wait is None else result.end_ns + int(wait.seconds * 1e9)

    def _back_off(self, primary: str, intended_ns: int) -> int:
        """Sleep out the error backoff (counted at its start); the attempt's new intended start. The client request
        keeps its own: the pause is part of what the user waited."""
        until, self.backoff_until_ns = self.backoff_until_ns, 0
        now = self.clock()
        if until <= now:
            return intended_ns
        self.recorder.count("error_backoffs", primary, 1, now)
        self.recorder.count("error_backoff_ms", primary, (until - now) // 1_000_000, now)
        gevent.sleep((until - now) / 1e9)
        return max(intended_ns, until)

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

    def _record_attempt(self, result: RequestResult, retries: int) -> Wait | None:
        """Record an attempt that ended; a refusal draws its wait once and, under ``honor``, cools its model."""
        result.secondary = result.model != self.primary
        self.recorder.record(result)
        if self._circuit_here:
            self._trip(result)
        if result.status not in RETRYABLE:
            return None
        wait = self.config.policy.wait(result.retry_after_s, retries, self.rng)
        if wait.capped:
            self.recorder.count("retry_waits_capped", result.model, 1, result.end_ns)
        if self.config.policy.name == "honor":
            until = result.end_ns + int(wait.seconds * 1e9)
            self.cooldown_ns[result.model] = max(self.cooldown_ns.get(result.model, 0), until)
        return wait

    def _trip(self, result: RequestResult) -> None:
        """Step 1 for a route failing on the server's side or timing out: it cools down for this user, by the
        error backoff of its failures in a row; a success resets them."""
        name = result.model
        if result.ok:
            self.route_failures[name] = 0
            return
        if result.outcome not in SERVER_ERRORS and result.outcome is not Outcome.TIMEOUT:
            return
        failures = self.route_failures[name] = self.route_failures.get(name, 0) + 1
        wait = self.config.policy.error_backoff(failures, self.rng)
        if wait is not None:
            self.cooldown_ns[name] = max(self.cooldown_ns.get(name, 0), result.end_ns + int(wait.seconds * 1e9))
            self.recorder.count("route_cooldowns", name, 1, result.end_ns)

    def _falls_back(self, result: RequestResult) -> bool:
        """Step 2: a ``fallback_on`` status, or (``--routes``) a timeout or a failed connection named there."""
        if result.status in self.config.fallback_on:
            return True
        causes = self.config.fallback_causes
        if not causes:
            return False
        return (result.outcome is Outcome.TIMEOUT and "timeout" in causes) or (
            result.outcome is Outcome.CONNECTION and "connect_error" in causes
        )

    def _hedge_target(self, model: str, following: str, now: int) -> str:
        """Where a hedge of an attempt on ``model`` goes: the policy's ``hedge_to`` unless it is that model or
        cooling down, else the next model of the route (``following``)."""
        target = self.config.hedge_to
        if target is None or target == model or self.cooldown_ns.get(target, 0) > now:
            return following
        return target

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
            if self.config.hedge_to is not None:
                hedge_to = self._hedge_target(model, hedge_to, now)
            result, wait = self._attempt(model, hedge_to, messages, max_tokens, intended_ns, retries)
            if retries:
                self.recorder.count("retries", model)
            if model != route[0]:
                self.recorder.count("fallbacks", model)
            # after a hedge, the route goes on after the model that answered
            i = available.index(result.model) + 1 if result.model in available else i + 1
            if self._falls_back(result) and i < len(available):
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
        return result, self._record_attempt(result, retries)

    def _hedged(
        self,
        model: str,
        hedge_to: str,
        messages: Sequence[Message],
        max_tokens: int,
        intended_ns: int,
        retries: int,
    ) -> RequestResult:
        """Step 3 of the module docstring; returns the attempt left to record (the others are recorded here)."""
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
                self._record_attempt(greenlet.get(), retries)  # failed before any token; the other goes on
        kept = first.get() if first.ready() else pending[0]  # the first to stream, or the last one left
        for greenlet in pending:
            if greenlet is kept:
                continue
            if greenlet.ready():
                self._record_attempt(greenlet.get(), retries)  # it failed just as the other streamed
            else:
                greenlet.kill(block=True)  # cancelled before its first token: not a request
        if kept is hedge:
            self.recorder.count("hedge_wins", model)
        result = kept.get()
        return result
