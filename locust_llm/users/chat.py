"""``ChatStreamUser``: streams answers of any ``--api`` over FastHttp and reports TTFT, every ITL gap and E2E."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from geventhttpclient import HTTPClient
from geventhttpclient.url import URL
from locust import FastHttpUser
from locust.env import Environment

from locust_llm.config.routes import Route
from locust_llm.config.tls import client_kwargs
from locust_llm.http.attempt import FirstToken
from locust_llm.http.post import drop_idle_connections
from locust_llm.http.stream import run_stream
from locust_llm.protocol.api import Api
from locust_llm.protocol.metrics import RequestResult
from locust_llm.protocol.tokens import estimate_prompt_tokens
from locust_llm.runtime.run import llm_run
from locust_llm.users.base import LLMUserMixin

__all__ = ["ChatStreamUser"]


class _Target:
    """Where one user's attempts on a model or route go: its client, URI and headers (the route's key only)."""

    __slots__ = ("api", "headers", "http", "route", "uri", "warm")

    def __init__(self, http: Any, uri: str, headers: dict[str, str], route: Route | None, api: Api) -> None:
        self.api = api
        self.http = http
        self.uri = uri
        self.headers = headers
        self.route = route
        self.warm = False  # a previous response left a keep-alive connection in the pool


class ChatStreamUser(LLMUserMixin, FastHttpUser):
    """POST ``{host}/chat/completions`` (or ``--api``'s path) with ``stream: true`` in a closed loop, one at a time.

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
        # trust and proxy (locust_llm.config.tls): one shared SSL context per process; a CONNECT tunnel for https
        pool = self.client.client.clientpool
        args = dict(pool.client_args)
        tls = dataclasses.replace(config.tls, insecure=True) if self.insecure else config.tls  # a subclass may say so
        routes = config.routes
        if routes is None:
            self._target = self._make_target(run, None, (self.host or "").rstrip("/"), tls, args, pool)
            self._targets: dict[str, _Target] = {}
        else:  # one client per route: its own host, trust and proxy; its key in its own headers only
            self._targets = {
                r.name: self._make_target(
                    run, r, r.base_url, dataclasses.replace(r.tls, insecure=True) if self.insecure else r.tls, args
                )
                for r in routes.routes
            }
            self._target = next(iter(self._targets.values()))

    def _make_target(
        self, run: Any, route: Route | None, base: str, tls: Any, args: dict[str, Any], pool: Any = None
    ) -> _Target:
        """The client, URI and headers of one model's or route's requests; through Locust's pool (one host) or,
        for a route, a client of its own."""
        api = self.config.api_of(route)
        url = URL(base + api.path)
        kwargs = {**args, **client_kwargs(tls, run.proxy(base))}
        if pool is not None:
            pool.client_args.update(kwargs)
            http = pool.get_client(url)
        else:
            http = HTTPClient.from_url(url, **kwargs)
        headers = self.config.request_headers(self.user_agent, route)
        return _Target(http, url.request_uri, headers, route, api)

    def on_stop(self) -> None:
        super().on_stop()
        for target in self._targets.values():
            target.http.close()

    def send(
        self,
        model: str,
        messages: Sequence[dict[str, Any]],
        max_tokens: int,
        intended_ns: int,
        on_first_token: FirstToken | None,
    ) -> RequestResult:
        target = self._targets[model] if self._targets else self._target
        route = target.route
        exact = self.exact_lengths(model if route is not None else self.llm.model)
        sent, chain = self.chained(model, messages) if self.keep_reply else (messages, None)
        tools = self.tool_fields(target.api)
        fields = {**(chain or {}), **tools} if tools else chain
        if route is None:
            body = self.workload.body(model, sent, max_tokens, fields, exact, target.api)
        else:
            max_tokens = min(max_tokens, route.max_tokens or max_tokens)
            extra = {**(route.extra_body or {}), **fields} if fields else route.extra_body
            body = self.workload.body(route.model, sent, max_tokens, extra, exact, target.api)
        started = 0
        for fresh in (False, True):
            result = run_stream(
                target.http,
                target.uri,
                body,
                target.headers,
                model=model,
                timeout_s=self.config.request_timeout_s,
                intended_ns=intended_ns,
                secrets=self.config.secrets,
                on_first_token=on_first_token,
                keep_reply=self.keep_reply,
                on_cut=self.llm.recorder.record_cut,
                fast=self.fast_path,
                api=target.api,
            )
            if fresh or not (result.stale and target.warm):
                break
            self.llm.recorder.count("reconnects", model, 1, result.end_ns)
            if self.fast_path:  # the library path relies on the pool's own check of an idle connection
                drop_idle_connections(target.http)
            intended_ns, started = result.end_ns, result.sent_ns
        target.warm = result.http_status != 0
        result.started_ns = started or result.sent_ns
        result.max_tokens = max_tokens
        if result.tokens_estimated and not result.prompt_tokens:  # no usage from the server: estimated, only then
            result.prompt_tokens = estimate_prompt_tokens(messages)
        return result
