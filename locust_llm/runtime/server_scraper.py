"""Scrapes the server's Prometheus metrics on the master (or the single process) every interval, through a child
process (``runtime.metrics_fetch``). Each round's replicas are filed on the timeline under the run's model
(``measure.fleet``); the child appends the samples to ``{prefix}_llm_server_metrics.csv``: no disk write on the loop.
A failed scrape is counted, never fatal; with ``auto``, no Prometheus text at the start is said once.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gevent

from locust_llm.config.tls import TlsSettings
from locust_llm.measure.fleet import ServerScrape
from locust_llm.protocol.server_metrics import Sample, gauges
from locust_llm.runtime.metrics_fetch import CSV_COLUMNS, MAX_BYTES

if TYPE_CHECKING:
    from locust_llm.runtime.collector import Collector

__all__ = ["CSV_COLUMNS", "ServerScraper", "metrics_urls"]

logger = logging.getLogger("locust_llm")

MAX_TIMEOUT_S = 2.0
CHILD_GRACE_S = 10.0
"""How long past its deadline a round may take (the child's parse) before the child is taken for stuck and restarted."""


def metrics_urls(setting: tuple[str, ...], host: str | None) -> tuple[str, ...]:
    """The URLs ``--server-metrics`` names: ``auto`` is ``{origin of host}/metrics``."""
    if setting != ("auto",):
        return setting
    if not host:
        return ()
    parts = urllib.parse.urlsplit(host)
    return (f"{parts.scheme}://{parts.netloc}/metrics",)


class ServerScraper:
    """One run's scrapes (:meth:`start`, :meth:`stop`); ``written`` samples, ``failures`` counted."""

    def __init__(self, collector: Collector, model: Callable[[], str], tls: Callable[[], TlsSettings | None]) -> None:
        self.collector, self.model, self.tls = collector, model, tls
        self.written = self.failures = 0
        self._greenlet: gevent.Greenlet | None = None
        self._child: subprocess.Popen[bytes] | None = None
        self._csv_path: Path | None = None
        self._last_preemptions: dict[str, float] = {}
        self._cut_said: set[str] = set()

    def start(self, urls: tuple[str, ...], interval_s: float, auto: bool, csv_path: Path | None = None) -> None:
        """Scrape ``urls`` every ``interval_s``; samples to ``csv_path`` (rewritten, made at the first sample)."""
        self.stop()
        self.written, self.failures, self._last_preemptions, self._cut_said = 0, 0, {}, set()
        self._csv_path = csv_path
        if csv_path is not None:
            csv_path.unlink(missing_ok=True)  # a file of an earlier process: the child appends to this run's
        if urls:
            self._greenlet = gevent.spawn(self._loop, urls, interval_s, auto)

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None
        self._end_child()

    def _end_child(self) -> None:
        child, self._child = self._child, None
        if child is not None:
            child.kill()
            child.wait()
            for pipe in (child.stdin, child.stdout):
                if pipe is not None:
                    pipe.close()

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
                self._end_child()
                return
            first = False
            gevent.sleep(max(0.0, interval_s - (time.monotonic() - started)))

    def scrape_once(self, urls: tuple[str, ...], timeout_s: float, quiet: bool = True) -> bool:
        """One round over ``urls`` and their replicas; whether any answered with Prometheus text."""
        collector, model = self.collector, self.model()
        now_ns = time.perf_counter_ns()
        answers = self._fetch(urls, timeout_s, now_ns)
        replicas: list[dict[str, float]] = []
        preempted = 0
        for answer in answers:
            url, replica = answer["url"], answer["replica"]
            if "csv_error" in answer:  # the disk: said once, the samples no longer written
                logger.warning("locust-llm: %s; the server's samples are not kept", answer["csv_error"])
                self._csv_path = None
                continue
            if "error" in answer:
                self.failures += 1
                collector.count("server_scrape_failures", model, 1, now_ns)
                if not quiet:
                    logger.warning(
                        "locust-llm: could not read the server's metrics at %s: %s", replica, answer["error"]
                    )
                continue
            if answer.get("cut") and url not in self._cut_said:
                self._cut_said.add(url)
                logger.warning(
                    "locust-llm: the metrics at %s are over %d MiB: the first %d MiB read, the rest dropped",
                    url, MAX_BYTES >> 20, MAX_BYTES >> 20,
                )  # fmt: skip
            samples = [Sample(*s) for s in answer["samples"]]
            self.written += len(samples)
            found = gauges(samples, model)
            total = found.pop("preemptions", None)  # a counter per replica: its rise since the last round
            if total is not None:
                last = self._last_preemptions.get(replica)
                self._last_preemptions[replica] = total
                preempted += 0 if last is None else max(0, round(total - last))
            replicas.append(found)
        if replicas:
            collector.record_server(model, ServerScrape(tuple(replicas), preempted), now_ns)  # the round's start
        return bool(replicas)

    def _fetch(self, urls: tuple[str, ...], timeout_s: float, now_ns: int) -> list[dict[str, Any]]:
        """The child's answers for one round (it appends the samples to the CSV, stamped with the round's time, step
        and phase); a child that fails or hangs is restarted, the round failed."""
        tls = self.tls()
        collector = self.collector
        step, phase = collector.timeline.locate(now_ns)
        stamp = [round((now_ns - (collector.began_ns or now_ns)) / 1e9, 3), step, phase]
        csv_path = None if self._csv_path is None else str(self._csv_path)
        request = {
            "urls": list(urls),
            "timeout_s": timeout_s,
            "tls": dataclasses.asdict(tls) if tls else None,
            "csv": csv_path,
            "stamp": stamp,
        }
        try:
            child = self._spawn()
            assert child.stdin is not None and child.stdout is not None
            child.stdin.write(json.dumps(request).encode() + b"\n")
            child.stdin.flush()
            with gevent.Timeout(timeout_s + CHILD_GRACE_S):
                line = child.stdout.readline()
            answers: list[dict[str, Any]] = json.loads(line)
            return answers
        except (OSError, ValueError, gevent.Timeout) as exc:
            self._end_child()
            why = "no answer in time" if isinstance(exc, gevent.Timeout) else str(exc) or type(exc).__name__
            return [{"url": url, "replica": url, "error": f"the metrics reader failed: {why}"} for url in urls]

    def _spawn(self) -> subprocess.Popen[bytes]:
        if self._child is None or self._child.poll() is not None:
            self._child = subprocess.Popen(
                [sys.executable, "-m", "locust_llm.runtime.metrics_fetch"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        return self._child
