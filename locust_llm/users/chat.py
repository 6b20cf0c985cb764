"""``ChatStreamUser``: streams chat completions over FastHttp and reports TTFT, every ITL gap and E2E."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from geventhttpclient.url import URL
from locust import FastHttpUser
from locust.env import Environment

from locust_llm.config.tls import client_kwargs
from locust_llm.http.attempt import FirstToken
from locust_llm.http.post import drop_idle_connections
from locust_llm.http.stream import run_stream
from locust_llm.protocol.metrics import RequestResult
from locust_llm.protocol.tokens import estimate_prompt_tokens
from locust_llm.runtime.run import llm_run
from locust_llm.users.base import LLMUserMixin

__all__ = ["ChatStreamUser"]


class ChatStreamUser(LLMUserMixin, FastHttpUser):
    """POST ``{host}/chat/completions`` with ``stream: true`` in a closed loop, one request at a time.

    Each request is timed on one ``time.perf_counter_ns()`` clock (see :mod:`locust_llm.protocol.metrics`) and fires the
    Locust events ``TTFT``, ``ITL`` (one per gap) and ``E2E`` (name = model). A request that fails on a reused
    keep-alive connection before any byte of the response arrived (the server had closed it) is sent again once on
    a fresh connection and counted as a reconnect, not a failure. Subclass and override :meth:`think_time_s` to
    pause between requests.
    """

    insecure = False  # verify TLS certificates of real endpoints (--insecure turns it off)

    def __init__(self, environment: Environment) -> None:
        run = llm_run(environment)
        config = run.require_config()
        # No per-read socket timeout: gevent arms a Timeout around every recv of a socket that has one, a cost
        # paid per token. The whole request runs under one deadline instead (users.stream.run_stream).
        self.network_timeout = None  # type: ignore[assignment]
        self.connection_timeout = min(30.0, config.request_timeout_s)
        if config.open_loop:  # one user sends this process's arrivals: as many connections as requests in flight
            self.concurrency = max(self.concurrency, config.max_in_flight)
        super().__init__(environment)
        self.setup_llm(environment)
        url = URL((self.host or "").rstrip("/") + "/chat/completions")
        self._uri = url.request_uri
        # trust and proxy (locust_llm.config.tls): one shared SSL context per process; a CONNECT tunnel for https
        pool = self.client.client.clientpool
        tls = dataclasses.replace(config.tls, insecure=True) if self.insecure else config.tls  # a subclass may say so
        pool.client_args.update(client_kwargs(tls, run.proxy(self.host)))
        self._http = pool.get_client(url)
        self._headers = self.config.request_headers(self.user_agent)
        self._warm = False  # a previous response left a keep-alive connection in the pool

    def send(
        self,
        model: str,
        messages: Sequence[dict[str, Any]],
        max_tokens: int,
        intended_ns: int,
        on_first_token: FirstToken | None,
    ) -> RequestResult:
        body = self.workload.body(model, messages, max_tokens)
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
                on_first_token=on_first_token,
                keep_reply=self.keep_reply,
                on_cut=self.llm.recorder.record_cut,
                fast=self.fast_path,
            )
            if fresh or not (result.stale and self._warm):
                break
            self.llm.recorder.count("reconnects", model, 1, result.end_ns)
            if self.fast_path:  # the library path relies on the pool's own check of an idle connection
                drop_idle_connections(self._http)
            intended_ns, started = result.end_ns, result.sent_ns
        self._warm = result.http_status != 0
        result.started_ns = started or result.sent_ns
        if result.tokens_estimated and not result.prompt_tokens:  # no usage from the server: estimated, only then
            result.prompt_tokens = estimate_prompt_tokens(messages)
        return result
