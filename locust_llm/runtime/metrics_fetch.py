"""Reads the servers' ``/metrics`` for the scraper in a child process (nice 10), so no answer or parse shares the
loop that times tokens. Each address: one total deadline (``timeout_s``) and a size cap (:data:`MAX_BYTES`).
``dns+http://NAME:PORT`` is resolved each round, one replica per A record. JSON lines in and out.
"""

from __future__ import annotations

import contextlib
import csv
import http.client
import ipaddress
import json
import os
import socket
import ssl
import sys
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from locust_llm.config.tls import TlsSettings
from locust_llm.protocol.server_metrics import ScrapeError, parse

__all__ = ["CSV_COLUMNS", "MAX_BYTES", "append_rows", "fetch_round", "replicas"]

CSV_COLUMNS = ("t_s", "step", "phase", "url", "replica", "name", "gauge", "labels", "value")
"""``{prefix}_llm_server_metrics.csv``: one row per sample, stamped with its round's time, step and phase."""

MAX_BYTES = 2 << 20
"""The most of one answer read (2 MiB; a vLLM /metrics is some tens of KiB, with every histogram)."""
READ = 64 << 10


class Deadline(OSError):
    """The address did not answer in full within its deadline."""


def replicas(url: str) -> list[tuple[str, str, str]]:
    """``(replica, url to read, Host header)`` for each address ``url`` names (module docstring)."""
    parts = urllib.parse.urlsplit(url)
    if not parts.scheme.startswith("dns+"):
        return [(parts.netloc, url, parts.netloc)]
    scheme = parts.scheme[4:]
    port = parts.port or (443 if scheme == "https" else 80)
    found = socket.getaddrinfo(parts.hostname, port, socket.AF_INET, socket.SOCK_STREAM)
    ips = sorted({str(info[4][0]) for info in found}, key=ipaddress.ip_address)
    path = urllib.parse.urlunsplit(("", "", parts.path or "/metrics", parts.query, ""))
    return [(f"{ip}:{port}", f"{scheme}://{ip}:{port}{path}", parts.netloc) for ip in ips]


def _read(url: str, host: str, timeout_s: float, context: ssl.SSLContext | None) -> tuple[str, bool]:
    """The answer's text (cut at :data:`MAX_BYTES`) and whether it was cut; raises on a failure or the deadline."""
    deadline = time.monotonic() + timeout_s
    parts = urllib.parse.urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    sock = socket.create_connection((parts.hostname, port), timeout=timeout_s)
    try:
        if parts.scheme == "https":
            sock = (context or ssl.create_default_context()).wrap_socket(sock, server_hostname=host.rsplit(":", 1)[0])
        conn = http.client.HTTPConnection(parts.hostname or "", port, timeout=timeout_s)
        conn.sock = sock
        conn.request("GET", urllib.parse.urlunsplit(("", "", parts.path, parts.query, "")), headers={"Host": host})
        response = conn.getresponse()
        if response.status != 200:
            raise ScrapeError(f"HTTP {response.status}")
        body, cut = bytearray(), False
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Deadline(f"no whole answer within {timeout_s:g} s (read {len(body)} bytes)")
            sock.settimeout(left)
            chunk = response.read1(READ)
            if not chunk:
                break
            body += chunk
            if len(body) >= MAX_BYTES:
                cut = True
                del body[body.rfind(b"\n", 0, MAX_BYTES) + 1 :]
                break
        return body.decode("utf-8", "replace"), cut
    except TimeoutError:
        raise Deadline(f"no whole answer within {timeout_s:g} s") from None
    finally:
        sock.close()


def _one(replica: str, url: str, host: str, timeout_s: float, context: ssl.SSLContext | None) -> dict[str, Any]:
    answer: dict[str, Any] = {"replica": replica}
    try:
        text, answer["cut"] = _read(url, host, timeout_s, context)
        samples = parse(text)
        if not samples:
            raise ScrapeError("no metric in the answer")
        answer["samples"] = [[s.name, s.gauge, s.labels, s.value, s.model] for s in samples]
    except (OSError, ValueError, http.client.HTTPException) as exc:
        answer["error"] = str(exc)[:200] or type(exc).__name__
    return answer


def fetch_round(urls: list[str], timeout_s: float, tls: TlsSettings | None) -> list[dict[str, Any]]:
    """One round: per URL, its replicas' answers (``url``, ``replica``, ``samples`` or ``error``, ``cut``)."""
    context = tls.context() if tls is not None else None
    jobs: list[tuple[str, str, str, str]] = []
    out: list[dict[str, Any]] = []
    for url in urls:
        try:
            jobs += [(url, *r) for r in replicas(url)]
        except (OSError, ValueError) as exc:  # a name that does not resolve: the URL's own failure
            out.append({"url": url, "replica": url, "error": f"could not resolve: {exc}"})
    if jobs:
        with ThreadPoolExecutor(max_workers=min(16, len(jobs))) as pool:
            answers = pool.map(lambda j: _one(j[1], j[2], j[3], timeout_s, context), jobs)
            out += [{"url": job[0], **answer} for job, answer in zip(jobs, answers, strict=True)]
    return out


def append_rows(path: str, stamp: list[Any], answers: list[dict[str, Any]]) -> str | None:
    """Append the answered samples to the CSV at ``path`` (its header first when it is new); the error, or None."""
    rows = [[*stamp, a["url"], a["replica"], *s[:4]] for a in answers for s in a.get("samples", ())]  # no model
    if not rows:
        return None
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", newline="") as handle:
            writer = csv.writer(handle)
            if handle.tell() == 0:
                writer.writerow(CSV_COLUMNS)
            writer.writerows(rows)
    except OSError as exc:
        return f"could not write {path}: {exc}"
    return None


def main() -> None:
    with contextlib.suppress(OSError):
        os.nice(10)
    for line in sys.stdin:
        request = json.loads(line)
        tls = TlsSettings(**request["tls"]) if request.get("tls") else None
        answers = fetch_round(request["urls"], request["timeout_s"], tls)
        if request.get("csv"):
            error = append_rows(request["csv"], request["stamp"], answers)
            if error:
                answers.append({"url": request["csv"], "replica": "", "csv_error": error})
        sys.stdout.write(json.dumps(answers) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
