"""The preflight request: one request to the endpoint before any load, on the master or the single process.

Built like every other request, with a deadline of at most 30 s. A systematic failure (HTTP 400/401/403/404,
connection refused, DNS, TLS) stops the run before any load with one line naming what to fix; any other failure is
reported and the run goes on; a Retry-After it is given (429, 503) holds every user's first request until it has
passed, under ``honor``. Its measurements are not recorded.
"""

from __future__ import annotations

import logging
import random
import time

from geventhttpclient import HTTPClient
from geventhttpclient.url import URL

from locust_llm.config.tls import client_kwargs
from locust_llm.http.stream import run_stream
from locust_llm.protocol.metrics import SYSTEMATIC
from locust_llm.protocol.retry import RETRYABLE
from locust_llm.runtime.run import LLMRun

__all__ = ["PREFLIGHT_TIMEOUT_S", "preflight"]

logger = logging.getLogger("locust_llm")

PREFLIGHT_TIMEOUT_S = 30.0


def preflight(run: LLMRun) -> str | None:
    """Send the preflight request; the message that stops the run, or None (module docstring)."""
    config = run.require_config()
    host = (run.environment.host or "").rstrip("/")
    url = URL(host + "/chat/completions")
    timeout_s = min(PREFLIGHT_TIMEOUT_S, config.request_timeout_s)
    messages, max_tokens = config.workload.messages(random.Random(config.seed))
    http = HTTPClient.from_url(
        url,
        concurrency=1,
        connection_timeout=timeout_s,
        network_timeout=None,
        **client_kwargs(config.tls, run.proxy(run.environment.host)),
    )
    try:
        result = run_stream(
            http,
            url.request_uri,
            config.workload.body(run.model, messages, max_tokens),
            config.request_headers("locust-llm preflight"),
            model=run.model,
            timeout_s=timeout_s,
            intended_ns=time.perf_counter_ns(),
            secrets=config.secrets,
        )
    finally:
        http.close()
    if result.status in RETRYABLE and result.retry_after_s is not None:
        wait = config.flow.policy.wait(result.retry_after_s, 0, random.Random())
        run.collector.hold_until_ns = result.end_ns + int(wait.seconds * 1e9)
    if result.ok:
        logger.info("locust-llm: preflight request to %s answered (TTFT %.0f ms)", host, (result.ttft_ns or 0) / 1e6)
        return None
    if result.cause in SYSTEMATIC:
        return f"the first request to {host} failed: {SYSTEMATIC[result.cause]}; the server said: {result.error}"
    logger.warning("locust-llm: the preflight request to %s failed (%s); starting the run anyway", host, result.error)
    return None
