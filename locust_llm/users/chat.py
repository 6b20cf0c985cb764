"""``ChatStreamUser``: streams chat completions and reports TTFT, every ITL gap and E2E."""

from __future__ import annotations

import random
import time

import gevent
from geventhttpclient.url import URL
from locust import FastHttpUser, task
from locust.env import Environment

from locust_llm.plugin import LLMRun, llm_run
from locust_llm.users.stream import run_stream
from locust_llm.workload.prompts import BuiltinPrompts

__all__ = ["ChatStreamUser"]


class ChatStreamUser(FastHttpUser):
    """POST ``{host}/chat/completions`` with ``stream: true`` in a closed loop, one request at a time.

    Each request is timed on one ``time.perf_counter_ns()`` clock (see :mod:`locust_llm.metrics`) and fires the
    Locust events ``TTFT``, ``ITL`` (one per gap) and ``E2E`` (name = model). Subclass and override
    :meth:`think_time_s` to pause between requests.
    """

    insecure = False  # verify TLS certificates of real endpoints
    first_request_spread_s = 1.0
    """The first request waits a random fraction of this, so that a step's users do not fire in lock-step."""

    def __init__(self, environment: Environment) -> None:
        self.llm: LLMRun = llm_run(environment)
        self.config = config = self.llm.require_config()
        # No per-read socket timeout: gevent arms a Timeout around every recv of a socket that has one, a cost
        # paid per token. The whole request runs under one deadline instead (users.stream.run_stream).
        self.network_timeout = None  # type: ignore[assignment]
        self.connection_timeout = min(30.0, config.request_timeout_s)
        super().__init__(environment)
        base = (self.host or "").rstrip("/")
        self._url = base + "/chat/completions"
        parsed = URL(self._url)
        self._uri = parsed.request_uri
        self._http = self.client.client.clientpool.get_client(parsed)
        self._headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if config.api_key:
            self._headers["Authorization"] = f"Bearer {config.api_key}"
        self._prompts = BuiltinPrompts(self.llm.model, config.max_tokens, random.Random())
        self._intended_ns = 0

    def think_time_s(self) -> float:
        """Seconds to wait after a request before the next one (closed loop; default 0)."""
        return 0.0

    def wait_time(self) -> float:
        seconds = self.think_time_s()
        self._intended_ns = time.perf_counter_ns() + int(seconds * 1e9)
        return seconds

    def on_start(self) -> None:
        delay = random.random() * self.first_request_spread_s
        self._intended_ns = time.perf_counter_ns() + int(delay * 1e9)
        gevent.sleep(delay)

    @task
    def chat(self) -> None:
        body, prompt_estimate = self._prompts.next_body()
        result = run_stream(
            self._http,
            self._uri,
            body,
            self._headers,
            model=self.llm.model,
            timeout_s=self.config.request_timeout_s,
            intended_ns=self._intended_ns or time.perf_counter_ns(),
            secrets=self.config.secrets,
            prompt_tokens_estimate=prompt_estimate,
        )
        self.llm.record(result)
