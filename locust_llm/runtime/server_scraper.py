"""Scrapes the server's Prometheus metrics on the master (or the single process), every interval, outside the
users' connections, with its own timeout. Each round's gauges are filed on the run's timeline under its model; every
sample is kept for ``{prefix}_llm_server_metrics.csv``. A failed scrape is counted, never fatal; with ``auto`` a first
scrape with no Prometheus text is said once and not repeated.
"""

from __future__ import annotations

import logging
import ssl
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import gevent

from locust_llm.protocol.server_metrics import Sample, ScrapeError, gauges, parse

if TYPE_CHECKING:
    from locust_llm.runtime.collector import Collector

__all__ = ["CSV_COLUMNS", "ServerScraper", "metrics_urls"]

logger = logging.getLogger("locust_llm")

CSV_COLUMNS = ("t_s", "step", "phase", "url", "name", "gauge", "labels", "value")
MAX_TIMEOUT_S = 2.0


def metrics_urls(setting: tuple[str, ...], host: str | None) -> tuple[str, ...]:
    """The URLs ``--server-metrics`` names: ``auto`` is ``{origin of host}/metrics``."""
    if setting != ("auto",):
        return setting
    if not host:
        return ()
    parts = urllib.parse.urlsplit(host)
    return (f"{parts.scheme}://{parts.netloc}/metrics",)


class ServerScraper:
    """One run's scrapes (:meth:`start`, :meth:`stop`); ``rows`` for the CSV, ``failures`` counted."""

    def __init__(
        self, collector: Collector, model: Callable[[], str], tls: Callable[[], ssl.SSLContext | None]
    ) -> None:
        self.collector, self.model, self.tls = collector, model, tls
        self.rows: list[tuple[Any, ...]] = []
        self.failures = 0
        self._greenlet: gevent.Greenlet | None = None
        self._last_preemptions: dict[str, float] = {}

    def start(self, urls: tuple[str, ...], interval_s: float, auto: bool) -> None:
        self.stop()
        self.rows, self.failures, self._last_preemptions = [], 0, {}
        if urls:
            self._greenlet = gevent.spawn(self._loop, urls, interval_s, auto)

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None

    def _loop(self, urls: tuple[str, ...], interval_s: float, auto: bool) -> None:
        timeout_s = min(interval_s, MAX_TIMEOUT_S)
        first = True
        while True:
            started = time.monotonic()
            ok = self.scrape_once(urls, timeout_s, quiet=not first)
            if first and not ok and auto:
                logger.info(
                    "locust-llm: no server metrics: %s gave no Prometheus text (--server-metrics URL names another)",
                    urls[0],
                )
                return
            first = False
            gevent.sleep(max(0.0, interval_s - (time.monotonic() - started)))

    def scrape_once(self, urls: tuple[str, ...], timeout_s: float, quiet: bool = True) -> bool:
        """One round over ``urls``; whether any answered with Prometheus text."""
        collector = self.collector
        model = self.model()
        answered: list[Sample] = []
        preempted = 0
        for url in urls:
            now_ns = time.perf_counter_ns()
            try:
                samples = self._read(url, timeout_s)
            except (OSError, ScrapeError, ValueError) as exc:
                self.failures += 1
                collector.count("server_scrape_failures", model, 1, now_ns)
                if not quiet:
                    logger.warning("locust-llm: could not read the server's metrics at %s: %s", url, exc)
                continue
            answered += samples
            self._keep(url, samples, now_ns)
            total = gauges(samples, model).get("preemptions")  # a counter per server: its rise since the last round
            if total is not None:
                last = self._last_preemptions.get(url)
                self._last_preemptions[url] = total
                preempted += 0 if last is None else max(0, round(total - last))
        if answered:  # several servers together by the same rule as one's engines: KV the fullest, the rest summed
            combined = {k: v for k, v in gauges(answered, model).items() if k != "preemptions"}
            collector.record_server(model, combined, preempted, time.perf_counter_ns())
        return bool(answered)

    def _read(self, url: str, timeout_s: float) -> list[Sample]:
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=self.tls())
        )
        with opener.open(url, timeout=timeout_s) as response:
            samples = parse(response.read(4 << 20).decode("utf-8", "replace"))
        if not samples:
            raise ScrapeError("no metric in the answer")
        return samples

    def _keep(self, url: str, samples: list[Sample], now_ns: int) -> None:
        collector = self.collector
        began = collector.began_ns or now_ns
        step, phase = collector.timeline.locate(now_ns)
        t_s = round((now_ns - began) / 1e9, 3)
        self.rows += [(t_s, step, phase, url, s.name, s.gauge, s.labels, s.value) for s in samples]
