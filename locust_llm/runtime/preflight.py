"""The preflight request: one request to the endpoint (to each route) before any load, on the master or alone.

A systematic failure (HTTP 400/401/403/404, refused, DNS, TLS) stops the run with one line naming what to fix; any
other failure is reported. A Retry-After it is given holds every user's first request there, under ``honor``.
"""

from __future__ import annotations

import logging
import random
import time

from geventhttpclient import HTTPClient
from geventhttpclient.url import URL

from locust_llm.config.routes import Route
from locust_llm.config.tls import client_kwargs
from locust_llm.http.stream import run_stream
from locust_llm.protocol.metrics import SYSTEMATIC
from locust_llm.protocol.retry import RETRYABLE
from locust_llm.runtime.run import LLMRun

__all__ = ["PREFLIGHT_TIMEOUT_S", "preflight"]

logger = logging.getLogger("locust_llm")

PREFLIGHT_TIMEOUT_S = 30.0


def preflight(run: LLMRun) -> str | None:
    """Send the preflight request (each route's, with ``--routes``); the message that stops the run, or None (module
    docstring). With ``--routes-allow-down`` a route that fails systematically is dropped with a warning instead,
    unless it is the last one."""
    config = run.require_config()
    if config.routes is None:
        return _send(run, (run.environment.host or "").rstrip("/"), run.model, None)
    if run.collector.dropped_routes:  # an earlier run of this process dropped some: each run checks every route
        run.collector.dropped_routes = []
    routes = run.configure().routes
    assert routes is not None
    allow_down = run.require_config().routes_allow_down
    down: list[str] = []
    for route in routes.routes:
        message = _send(run, route.base_url, route.name, route)
        if message is None:
            continue
        if not allow_down or len(down) + 1 == len(routes.routes):
            return f"route '{route.name}': {message}"
        logger.warning("locust-llm: route '%s' dropped (--routes-allow-down): %s", route.name, message)
        down.append(route.name)
    if down:
        run.collector.dropped_routes = down  # the master passes them to its workers with the step message
        run.configure()
    return None


def _send(run: LLMRun, host: str, name: str, route: Route | None) -> str | None:
    """One preflight request to ``host`` (a route's key only to its own); the message that stops the run, or None."""
    config = run.require_config()
    url = URL(host + "/chat/completions")
    timeout_s = min(PREFLIGHT_TIMEOUT_S, config.request_timeout_s)
    messages, max_tokens = config.workload.messages(random.Random(config.seed))
    if route is None:
        body = config.workload.body(run.model, messages, max_tokens)
    else:
        body = config.workload.body(
            route.model, messages, min(max_tokens, route.max_tokens or max_tokens), route.extra_body
        )
    http = HTTPClient.from_url(
        url,
        concurrency=1,
        connection_timeout=timeout_s,
        network_timeout=None,
        **client_kwargs(config.tls if route is None else route.tls, run.proxy(host)),
    )
    try:
        result = run_stream(
            http,
            url.request_uri,
            body,
            config.request_headers("locust-llm preflight", route),
            model=name,
            timeout_s=timeout_s,
            intended_ns=time.perf_counter_ns(),
            secrets=config.secrets,
        )
    finally:
        http.close()
    if result.status in RETRYABLE and result.retry_after_s is not None:
        wait = config.flow.policy.wait(result.retry_after_s, 0, random.Random())
        until = result.end_ns + int(wait.seconds * 1e9)
        run.collector.holds[name] = max(run.collector.holds.get(name, 0), until)
    if result.ok:
        logger.info("locust-llm: preflight request to %s answered (TTFT %.0f ms)", host, (result.ttft_ns or 0) / 1e6)
        return None
    if result.cause in SYSTEMATIC:
        return f"the first request to {host} failed: {SYSTEMATIC[result.cause]}; the server said: {result.error}"
    logger.warning("locust-llm: the preflight request to %s failed (%s); starting the run anyway", host, result.error)
    return None
