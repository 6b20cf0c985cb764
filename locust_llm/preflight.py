"""The preflight request: one request to the endpoint before any load, on the master (or the single process).

It is the run's first request, built like every other one (the workload's first prompt, ``max_tokens``, headers,
key), sent with a deadline of at most 30 s. A systematic failure (:data:`~locust_llm.metrics.SYSTEMATIC`: HTTP
400/401/403/404, connection refused, DNS, TLS) stops the run before any load with one line naming the error and
what to fix; any other failure (a 429, a 5xx, a timeout) is only reported, and the run goes on. Its measurements
are not recorded.
"""

from __future__ import annotations

import logging
import random
import time

from geventhttpclient import HTTPClient
from geventhttpclient.url import URL

from locust_llm.metrics import SYSTEMATIC
from locust_llm.run import LLMRun
from locust_llm.tls import client_kwargs
from locust_llm.users.chat import request_headers
from locust_llm.users.stream import run_stream

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
    http = HTTPClient.from_url(url, concurrency=1, connection_timeout=timeout_s, network_timeout=None,
                               **client_kwargs(config.tls, run.proxy(run.environment.host)))  # fmt: skip
    try:
        result = run_stream(http, url.request_uri, config.workload.body(run.model, messages, max_tokens),
                            request_headers(config, "locust-llm preflight"), model=run.model, timeout_s=timeout_s,
                            intended_ns=time.perf_counter_ns(), secrets=config.secrets)  # fmt: skip
    finally:
        http.close()
    if result.ok:
        logger.info("locust-llm: preflight request to %s answered (TTFT %.0f ms)", host, (result.ttft_ns or 0) / 1e6)
        return None
    if result.cause in SYSTEMATIC:
        return f"the first request to {host} failed: {SYSTEMATIC[result.cause]}; the server said: {result.error}"
    logger.warning("locust-llm: the preflight request to %s failed (%s); starting the run anyway", host, result.error)
    return None
