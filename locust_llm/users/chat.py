"""``ChatStreamUser``: streams chat completions and reports TTFT, every ITL gap and E2E."""

from __future__ import annotations

import itertools
import os
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

import gevent
from geventhttpclient.url import URL
from locust import FastHttpUser, task
from locust.env import Environment

from locust_llm import __version__
from locust_llm.metrics import RequestResult
from locust_llm.plugin import LLMRun, llm_run
from locust_llm.users.flow import Flow
from locust_llm.users.stream import run_stream
from locust_llm.workload.prompts import estimate_prompt_tokens

__all__ = ["ChatStreamUser", "LLMUserMixin"]

_NUMBERS = itertools.count(1)


class LLMUserMixin:
    """What every locust-llm user shares: config, workload, seeded randomness, the request flow and pacing.

    A subclass provides :meth:`send` (one attempt on one model) and calls :meth:`setup_llm` in ``__init__``.
    """

    first_request_spread_s = 1.0
    """The first request waits a random fraction of this, so that a step's users do not fire in lock-step."""

    llm: LLMRun

    def setup_llm(self, environment: Environment) -> None:
        self.llm = llm_run(environment)
        self.config = config = self.llm.require_config()
        self.user_number = next(_NUMBERS)
        worker = getattr(environment.runner, "worker_index", 0)
        seed = None if config.seed is None else f"{config.seed}:{worker}:{self.user_number}"
        self.rng = random.Random(seed)
        self.workload = config.workload
        self.flow = Flow(self.send, self.llm, config.flow, self.rng)
        self.user_agent = f"locust-llm/{__version__} (user {os.getpid()}-{self.user_number})"
        self._intended_ns = 0

    def send(
        self,
        model: str,
        messages: Sequence[dict[str, Any]],
        max_tokens: int,
        intended_ns: int,
        on_first_token: Callable[[], None] | None,
    ) -> RequestResult:
        raise NotImplementedError

    def think_time_s(self) -> float:
        """Seconds to wait after a request before the next one (closed loop; default 0)."""
        return 0.0

    def wait_time(self) -> float:
        seconds = self.think_time_s()
        self._intended_ns = time.perf_counter_ns() + int(seconds * 1e9)
        return seconds

    def on_start(self) -> None:
        delay = self.rng.random() * self.first_request_spread_s
        self._intended_ns = time.perf_counter_ns() + int(delay * 1e9)
        gevent.sleep(delay)

    def chat_once(self) -> None:
        """One client request (the user classes' task)."""
        messages, max_tokens = self.workload.messages(self.rng)
        self.flow.request(self.llm.model, messages, max_tokens, self._intended_ns or time.perf_counter_ns())


class ChatStreamUser(LLMUserMixin, FastHttpUser):
    """POST ``{host}/chat/completions`` with ``stream: true`` in a closed loop, one request at a time.

    Each request is timed on one ``time.perf_counter_ns()`` clock (see :mod:`locust_llm.metrics`) and fires the
    Locust events ``TTFT``, ``ITL`` (one per gap) and ``E2E`` (name = model). A request that fails on a reused
    keep-alive connection before any byte of the response arrived (the server had closed it) is sent again once on
    a fresh connection and counted as a reconnect, not a failure. Subclass and override :meth:`think_time_s` to
    pause between requests.
    """

    insecure = False  # verify TLS certificates of real endpoints

    def __init__(self, environment: Environment) -> None:
        config = llm_run(environment).require_config()
        # No per-read socket timeout: gevent arms a Timeout around every recv of a socket that has one, a cost
        # paid per token. The whole request runs under one deadline instead (users.stream.run_stream).
        self.network_timeout = None  # type: ignore[assignment]
        self.connection_timeout = min(30.0, config.request_timeout_s)
        super().__init__(environment)
        self.setup_llm(environment)
        url = URL((self.host or "").rstrip("/") + "/chat/completions")
        self._uri = url.request_uri
        self._http = self.client.client.clientpool.get_client(url)
        self._headers = {"Content-Type": "application/json", "Accept": "text/event-stream",
                         "User-Agent": self.user_agent}  # fmt: skip
        if self.config.api_key:
            self._headers["Authorization"] = f"Bearer {self.config.api_key}"
        self._headers.update(self.config.headers)
        self._warm = False  # a previous response left a keep-alive connection in the pool

    @task
    def chat(self) -> None:
        self.chat_once()

    def send(
        self,
        model: str,
        messages: Sequence[dict[str, Any]],
        max_tokens: int,
        intended_ns: int,
        on_first_token: Callable[[], None] | None,
    ) -> RequestResult:
        body = self.workload.body(model, messages, max_tokens)
        estimate = estimate_prompt_tokens(messages)
        started = 0
        for fresh in (False, True):
            result = run_stream(
                self._http,
                self._uri,
                body,
                self._headers,
                model=model,
                timeout_s=self.config.request_timeout_s,
                intended_ns=intended_ns,
                secrets=self.config.secrets,
                prompt_tokens_estimate=estimate,
                on_first_token=on_first_token,
            )
            if fresh or not (result.stale and self._warm):
                break
            self.llm.count("reconnects", model, 1, result.end_ns)
            _drop_idle_connections(self._http)
            intended_ns, started = result.end_ns, result.sent_ns
        self._warm = result.http_status != 0
        result.started_ns = started or result.sent_ns
        return result


def _drop_idle_connections(http: Any) -> None:
    """Close the pooled idle sockets so that the next request opens a fresh connection."""
    pool = getattr(http, "_connection_pool", None)
    queue = getattr(pool, "_socket_queue", None)
    while queue is not None and not queue.empty():
        try:
            queue.get(block=False).close()
        except Exception:  # an empty queue or a socket already closed: nothing left to drop
            break
