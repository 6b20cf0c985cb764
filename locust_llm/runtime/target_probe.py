"""Reads the target's fingerprint (``reports.target``) at the preflight and at the end, on the master or alone.

One after another on one connection, within ``PROBE_TIMEOUT_S`` in all and ``MAX_JSON_BYTES`` each, to the run's own
host only: ``{host}/models``, ``/props``, ``/info``, ``/get_server_info``; beside them one round of
``--server-metrics``. A failure leaves its fields absent and never stops a run. Not read with ``--routes``.
"""

from __future__ import annotations

import json
import logging
import urllib.parse
from typing import TYPE_CHECKING, Any

import gevent
from geventhttpclient import HTTPClient
from geventhttpclient.url import URL

from locust_llm.config.redact import redact
from locust_llm.config.tls import Proxy, TlsSettings, client_kwargs
from locust_llm.reports.target import fingerprint
from locust_llm.runtime.metrics_fetch import fetch_round
from locust_llm.runtime.server_scraper import metrics_urls

if TYPE_CHECKING:
    from locust_llm.runtime.run import LLMRun

__all__ = ["MAX_JSON_BYTES", "PROBE_TIMEOUT_S", "read_target"]

logger = logging.getLogger("locust_llm")

PROBE_TIMEOUT_S = 2.0
MAX_JSON_BYTES = 256 << 10
PATHS = {"props": "/props", "info": "/info", "server_info": "/get_server_info"}
"""The engines' own info endpoints, at the host's origin (``models`` is ``{host}/models``)."""


def read_target(run: LLMRun) -> dict[str, Any]:
    """The fingerprint of the run's target now (module docstring); ``{}`` with routes or without a host."""
    config = run.require_config()
    host = (run.environment.host or "").rstrip("/")
    if config.routes is not None or not host:
        return {}
    parts = urllib.parse.urlsplit(host)
    origin = f"{parts.scheme}://{parts.netloc}"
    headers = {k: v for k, v in config.request_headers("locust-llm target").items() if k != "Content-Type"}
    headers["Accept"] = "application/json"
    paths = {"models": parts.path.rstrip("/") + "/models", **PATHS}
    scrape = gevent.spawn(_metrics, metrics_urls(config.server_metrics, host), config.tls, run.model)
    gets = gevent.spawn(_get_all, origin, paths, headers, config.tls, run.proxy(host))
    gevent.joinall([gets, scrape], timeout=PROBE_TIMEOUT_S + 2)
    answers: dict[str, Any] = dict(gets.value) if gets.successful() and gets.value else {}
    for job in (gets, scrape):
        job.kill(block=False)
    if scrape.successful() and scrape.value:
        answers["cache_config"], answers["replicas"] = scrape.value
    found = fingerprint(answers, run.model)
    safe: dict[str, Any] = json.loads(redact(json.dumps(found), config.secrets))  # an echoed key is shown to no one
    return safe


def _get_all(
    origin: str, paths: dict[str, str], headers: dict[str, str], tls: TlsSettings, proxy: Proxy | None
) -> dict[str, Any]:
    """The JSON answers of ``paths`` (by name) at ``origin``, one after the other on one kept-alive connection (one
    tunnel through a proxy), and ``server``: the first Server header, /models first. Within ``PROBE_TIMEOUT_S`` in all:
    what has not answered by then is absent."""
    http = HTTPClient.from_url(
        URL(origin + "/"),
        concurrency=1,
        connection_timeout=PROBE_TIMEOUT_S,
        network_timeout=PROBE_TIMEOUT_S,
        **client_kwargs(tls, proxy),
    )
    answers: dict[str, Any] = {}
    try:
        with gevent.Timeout(PROBE_TIMEOUT_S, False):
            for name, path in paths.items():
                response = http.get(path, headers=headers)
                server = response.get("server")
                if isinstance(server, str) and "server" not in answers:
                    answers["server"] = server
                body = response.read(MAX_JSON_BYTES + 1)
                if response.status_code == 200 and len(body) <= MAX_JSON_BYTES:
                    try:
                        answers[name] = json.loads(body)
                    except ValueError:
                        continue
    except OSError:
        pass
    finally:
        http.close()
    return answers


def _metrics(urls: tuple[str, ...], tls: TlsSettings, model: str) -> tuple[dict[str, str], int] | None:
    """``(the cache_config_info labels, the replicas that answered)`` of one round of ``urls``."""
    if not urls:
        return None
    answers = [a for a in fetch_round(list(urls), PROBE_TIMEOUT_S, tls) if "samples" in a]
    labels: dict[str, str] = {}
    for answer in answers:
        for name, _gauge, text, _value, sample_model in answer["samples"]:
            if name.endswith("cache_config_info") and sample_model in ("", model) and not labels:
                labels = dict(pair.split("=", 1) for pair in text.split(";") if "=" in pair)
    return labels, len(answers)
