"""What the fast path assumes of geventhttpclient, gevent, Locust and the openai SDK, checked at start-up.

:func:`check` returns every assumption that no longer holds, one line each: private names, signatures, and that the
batched logging still matches ``StatsEntry.log``. A run then takes the library path (``--fast-path off``) and says so
in one line; ``tests/unit/runtime/test_contract.py`` runs the same check. docs/architecture.md, "Private names".
"""

from __future__ import annotations

import inspect
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

__all__ = ["check", "describe"]


def _has(owner: Any, label: str, *names: str) -> list[str]:
    return [f"{label}.{name} is missing" for name in names if not hasattr(owner, name)]


def _parameters(function: Any, label: str, *names: str) -> list[str]:
    try:
        known = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return [f"{label} has no readable signature"]
    return [f"{label} takes no {name!r}" for name in names if name not in known]


def _geventhttpclient() -> list[str]:
    from geventhttpclient import HTTPClient
    from geventhttpclient.response import HTTPSocketPoolResponse

    broken = _has(HTTPClient, "HTTPClient", "_build_request", "request")
    if not broken:
        broken += _parameters(HTTPClient._build_request, "HTTPClient._build_request", "method", "request_uri", "body")
    client = HTTPClient("127.0.0.1", 9)  # no connection is made until a request
    broken += _has(client, "HTTPClient()", "_connection_pool", "block_size", "headers_type", "use_proxy", "version")
    pool = getattr(client, "_connection_pool", None)
    broken += _has(pool, "HTTPClient._connection_pool", "_is_socket_alive", "_socket_queue", "get_socket")
    broken += _has(pool, "HTTPClient._connection_pool", "release_socket", "return_socket")
    client.close()
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/event-stream\r\n\r\n"
    try:
        response = HTTPSocketPoolResponse(object(), None, pre_buffered=head, block_size=4096, method="POST")  # type: ignore[arg-type]
    except Exception as exc:  # the constructor itself changed
        return [*broken, f"HTTPSocketPoolResponse(pre_buffered=...) fails: {type(exc).__name__}: {exc}"]
    broken += _has(response, "HTTPSocketPoolResponse", "_body_buffer", "_sock", "_pool", "feed", "message_complete")
    broken += _has(response, "HTTPSocketPoolResponse", "readline", "release", "DEFAULT_BLOCK_SIZE")
    if not isinstance(getattr(response, "_body_buffer", None), bytearray):
        broken.append("HTTPSocketPoolResponse._body_buffer is not a bytearray")
    response._sock = response._pool = None  # never read: its release is a no-op
    return broken


def _gevent() -> list[str]:
    import gevent
    import gevent.socket

    socket_type = getattr(getattr(gevent, "_socket3", None), "socket", None)
    if socket_type is None:
        return ["gevent._socket3.socket is missing"]
    sock = gevent.socket.socket()
    try:
        broken = [] if type(sock) is socket_type else ["gevent.socket.socket() is not a gevent._socket3.socket"]
        broken += _has(sock, "gevent socket", "_sock", "_read_event")
    finally:
        sock.close()
    loop = gevent.get_hub().loop
    broken += _has(loop, "the libev loop", "check", "prepare", "io", "timer", "run_callback", "update_now")
    return broken + _has(loop, "the libev loop", "iteration", "MAXPRI", "MINPRI")


def _locust() -> list[str]:
    from locust.event import EventHook
    from locust.stats import RequestStats, StatsCSVFileWriter, StatsEntry

    from locust_llm.runtime.locust_stats import log_gaps

    broken = _has(EventHook(), "EventHook", "_handlers")
    broken += _has(StatsEntry, "StatsEntry", "_cache_response_times", "log")
    broken += _csv_writer(StatsCSVFileWriter)
    if broken:
        return broken
    for _ in range(3):  # the events of each way must be logged within one second to compare
        second = int(time.time())
        batched, one_by_one = RequestStats(), RequestStats()
        times = [12.3, 0.4, 250.0, 7.0]
        log_gaps(batched, "ITL", "m", times)
        for ms in times:
            one_by_one.log_request("ITL", "m", ms, 0)  # type: ignore[arg-type]  # floats, as Locust users report
        if int(time.time()) == second:
            pairs = (
                (batched.total, one_by_one.total),
                (batched.entries[("m", "ITL")], one_by_one.entries[("m", "ITL")]),
            )
            if any(_logged(a) != _logged(b) for a, b in pairs):
                return ["StatsEntry.log changed: logging a request's gaps at once no longer matches it"]
            return []
    return []


def _csv_writer(writer_type: Any) -> list[str]:
    """What the final CSV write uses of a ``StatsCSVFileWriter`` (its methods, and the files it opens when made: one
    is made in a directory of its own, then closed)."""
    from locust.stats import PERCENTILES_TO_REPORT

    from locust_llm.runtime.locust_stats import FINAL_WRITE_NAMES

    broken = _has(writer_type, "StatsCSVFileWriter", "stats_writer", "close_files")
    with tempfile.TemporaryDirectory(prefix="locust-llm-contract-") as folder:
        writer = writer_type(None, PERCENTILES_TO_REPORT, os.path.join(folder, "check"))
        try:
            broken += _has(writer, "StatsCSVFileWriter()", *FINAL_WRITE_NAMES)
        finally:
            writer.close_files()
    return broken


def _logged(entry: Any) -> dict[str, Any]:
    """What logging changed in ``entry``, but the moments it was logged at (two logs are microseconds apart)."""
    return {k: v for k, v in entry.serialize().items() if k not in ("last_request_timestamp", "start_time")}


def _openai() -> list[str]:
    """Only when the SDK user is loaded (``locustfile_sdk.py``): importing the SDK costs a process 0.4 s."""
    if "locust_llm.users.sdk" not in sys.modules:
        return []
    import openai

    return _has(openai.OpenAI, "openai.OpenAI", "_make_sse_decoder")


CHECKS: dict[str, Callable[[], list[str]]] = {
    "geventhttpclient": _geventhttpclient,
    "gevent": _gevent,
    "locust": _locust,
    "openai": _openai,
}


def check() -> list[str]:
    """Every assumption of the fast path that no longer holds (empty when all hold)."""
    broken = []
    for library, run in CHECKS.items():
        try:
            broken += [f"{library}: {line}" for line in run()]
        except Exception as exc:  # an import or a call that changed shape: say which, never crash the run
            broken.append(f"{library}: the check itself failed ({type(exc).__name__}: {exc})")
    return broken


def describe(broken: list[str]) -> str:
    """The one line a run prints when it takes the library path because of ``broken``."""
    return (
        "locust-llm: the fast path's assumptions changed (" + "; ".join(broken) + "): streams are read and Locust's "
        "statistics logged through the libraries' public API (as with --fast-path off)"
    )
