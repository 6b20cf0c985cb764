"""The preflight request: one request to the endpoint (to each route) before any load, on the master or alone.

A systematic failure (HTTP 400/401/403/404, refused, DNS, TLS) stops the run with one line naming what to fix; any
other failure is reported. A Retry-After it is given holds every user's first request there, under ``honor``. With
``--output-length auto`` a second request asks whether it honours ``min_tokens``.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable

from geventhttpclient import HTTPClient
from geventhttpclient.url import URL

from locust_llm.config.routes import Route
from locust_llm.config.tls import client_kwargs
from locust_llm.http.stream import run_stream
from locust_llm.protocol.api import Api
from locust_llm.protocol.metrics import SYSTEMATIC, RequestResult
from locust_llm.protocol.retry import RETRYABLE
from locust_llm.runtime.run import LLMRun
from locust_llm.workload.prompts import Message

__all__ = ["PREFLIGHT_TIMEOUT_S", "preflight"]

logger = logging.getLogger("locust_llm")

PREFLIGHT_TIMEOUT_S = 30.0
PROBE_TOKENS = 48
PROBE_PROMPT = "Answer with one word: is the sky blue?"
"""``--output-length auto``'s question: a one-word answer, asked for :data:`PROBE_TOKENS` tokens at least."""


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


def _wrong_api(result: RequestResult, api: Api, path: str) -> str | None:
    """What to fix when a failure says the server does not speak ``api``: a 404 that does not name a model (the
    path is unknown), or a 400 about ``anthropic-version``."""
    error = (result.error or "").lower()
    if result.http_status == 404 and api.name != "chat" and "model" not in error:
        return f"HTTP 404: this server does not serve {path} (--api {api.name}); try --api chat"
    if result.http_status == 400 and api.name == "messages" and "anthropic-version" in error:
        return "HTTP 400: this server refuses the anthropic-version header the Messages API needs (2023-06-01)"
    return None


def _send(run: LLMRun, host: str, name: str, route: Route | None) -> str | None:
    """One preflight request to ``host`` (a route's key only to its own); the message that stops the run, or None.
    Then ``--output-length`` is resolved for ``name`` (:func:`_exact_lengths`)."""
    config = run.require_config()
    api = config.api_of(route)
    url = URL(host + api.path)
    timeout_s = min(PREFLIGHT_TIMEOUT_S, config.request_timeout_s)
    messages, max_tokens = config.workload.messages(random.Random(config.seed))
    http = HTTPClient.from_url(
        url,
        concurrency=1,
        connection_timeout=timeout_s,
        network_timeout=None,
        **client_kwargs(config.tls if route is None else route.tls, run.proxy(host)),
    )
    headers = config.request_headers("locust-llm preflight", route)

    def send(messages: list[Message], max_tokens: int, exact: bool) -> RequestResult:
        model, extra = (run.model, None) if route is None else (route.model, route.extra_body)
        if route is not None:
            max_tokens = min(max_tokens, route.max_tokens or max_tokens)
        body = config.workload.body(model, messages, max_tokens, extra, exact, api)
        return run_stream(
            http,
            url.request_uri,
            body,
            headers,
            model=name,
            timeout_s=timeout_s,
            intended_ns=time.perf_counter_ns(),
            secrets=config.secrets,
            api=api,
        )

    try:
        mode = config.workload.output_length
        result = send(messages, max_tokens, mode == "exact")
        if result.ok or mode != "auto":
            run.collector.exact_lengths[name] = _exact_lengths(mode, host, send if mode == "auto" else None)
        else:
            if result.cause not in SYSTEMATIC:  # a systematic failure stops the run: nothing to warn of
                logger.warning(
                    "locust-llm: --output-length auto: could not ask %s whether it honours min_tokens (the preflight "
                    "request failed); output lengths are a cap (max_tokens only)",
                    host,
                )
            run.collector.exact_lengths[name] = False
    finally:
        http.close()
    if result.status in RETRYABLE and result.retry_after_s is not None:
        wait = config.flow.policy.wait(result.retry_after_s, 0, random.Random())
        until = result.end_ns + int(wait.seconds * 1e9)
        run.collector.holds[name] = max(run.collector.holds.get(name, 0), until)
    if result.ok:
        logger.info("locust-llm: preflight request to %s answered (TTFT %.0f ms)", host, (result.ttft_ns or 0) / 1e6)
        return None
    wrong_api = _wrong_api(result, api, url.path)
    if wrong_api is not None:
        return f"the first request to {host} failed: {wrong_api}; the server said: {result.error}"
    if result.cause in SYSTEMATIC:
        return f"the first request to {host} failed: {SYSTEMATIC[result.cause]}; the server said: {result.error}"
    logger.warning("locust-llm: the preflight request to %s failed (%s); starting the run anyway", host, result.error)
    return None


def _exact_lengths(mode: str, host: str, send: Callable[[list[Message], int, bool], RequestResult] | None) -> bool:
    """Whether requests to ``host`` ask for ``max_tokens`` exactly: ``exact`` yes, ``cap`` no; ``auto`` (``send``
    given) asks once for a one-word answer of at least :data:`PROBE_TOKENS` tokens, and is exact when the server
    gives them all. A server that refuses the fields or stops early gets ``cap``, with one warning saying why."""
    if send is None:
        return mode == "exact"
    probe = send([{"role": "user", "content": PROBE_PROMPT}], PROBE_TOKENS, True)
    if probe.ok and probe.completion_tokens >= PROBE_TOKENS:
        logger.info("locust-llm: %s honours min_tokens: output lengths are exact (--output-length auto)", host)
        return True
    why = (
        f"it stopped at {probe.completion_tokens} of {PROBE_TOKENS} tokens"
        if probe.ok
        else f"it refused the request ({probe.error})"
    )
    logger.warning(
        "locust-llm: %s does not honour min_tokens/ignore_eos (%s): output lengths are a cap, max_tokens only, and a "
        "model that stops early offers less decode load than asked (see output_tokens_ratio; --output-length cap "
        "skips this check)",
        host,
        why,
    )
    return False
