"""One attempt, whichever client sends it: its result, its whole-request deadline, and its failure texts.

Both user classes wrap each attempt in an :class:`Attempt`, so alike failures read alike in Locust's failure table:
``timeout: no complete answer within {T} s{where}``, ``HTTP {status} {reason}: {body}`` (secrets removed, 300
characters), ``connection error``, ``malformed stream`` and ``error in stream: {what}{where}``, and ``empty
stream``; ``{where}`` is `` (before any response)``, `` (before the first token)`` or `` (mid-stream)``.
"""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

import gevent
from gevent import GreenletExit

from locust_llm.config.redact import redact
from locust_llm.protocol.metrics import SYSTEMATIC, Outcome, RequestResult, ratelimit_headers
from locust_llm.protocol.retry import retry_after_s
from locust_llm.protocol.sse import ChatChunk

__all__ = [
    "EMPTY_STREAM",
    "ERROR_BODY_LIMIT",
    "Attempt",
    "FirstToken",
    "end_of_stream",
    "network_cause",
    "os_reason",
    "preview",
    "progress",
    "tool_call",
]

ERROR_BODY_LIMIT = 300
"""Characters of an HTTP error body (or of a server's error text) shown in the failure message."""

EMPTY_STREAM = "empty stream: HTTP 200 but no generated tokens"

FirstToken = Callable[[], None]
"""Called once, the moment an attempt's first token arrives (hedging waits for it)."""


def progress(result: RequestResult) -> str:
    """Where the request was when it failed; no counts, so Locust's failure table groups alike failures."""
    if not result.http_status:
        return " (before any response)"
    return " (mid-stream)" if result.token_ns else " (before the first token)"


def preview(raw: bytes | str, secrets: Sequence[str]) -> str:
    """Server text for a message: whitespace collapsed, secrets removed, at most ``ERROR_BODY_LIMIT`` characters."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    text = redact(" ".join(text.split()), secrets)
    return text[:ERROR_BODY_LIMIT] + ("..." if len(text) > ERROR_BODY_LIMIT else "")


def network_cause(exc: BaseException) -> str:
    """``refused``, ``dns`` or ``tls`` when the exception's chain says so (see
    :data:`~locust_llm.protocol.metrics.SYSTEMATIC`)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError):
            return "refused"
        if isinstance(seen, socket.gaierror):
            return "dns"
        if isinstance(seen, ssl.SSLError | ssl.CertificateError):
            return "tls"
        seen = seen.__cause__ or seen.__context__
    return ""


def os_reason(exc: BaseException) -> str:
    """What went wrong on the network, as the OS says it (``Connection refused``): the first ``OSError`` with a
    reason in the exception's chain (clients wrap them), else the exception's own text."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.strerror:
            return seen.strerror
        seen = seen.__cause__ or seen.__context__
    return str(exc) or type(exc).__name__


def end_of_stream(result: RequestResult, end: str = "'data: [DONE]'") -> None:
    """A stream with tokens whose body ended cleanly without its ``end`` event (``data: [DONE]``): complete
    (``no_done``) when a ``finish_reason`` came, as older TGI and llama.cpp servers end their streams; else
    truncated."""
    if result.finish_reason is not None and result.ok:
        result.no_done = True
    else:
        result.fail(Outcome.TRUNCATED, f"stream ended without {end} or a finish_reason{progress(result)}")


def tool_call(result: RequestResult, chunk: ChatChunk, keep: bool) -> None:
    """A tool call's start or piece of arguments (any API): counted, and with ``keep`` (a conversation) kept, so
    that the next turn can send its result back (:mod:`locust_llm.workload.conversation`)."""
    if chunk.tool_id is not None or chunk.tool_name is not None or not result.tool_calls:
        result.tool_calls += 1
        if keep:
            call = {"id": chunk.tool_id or f"call_{result.tool_calls}", "name": chunk.tool_name or "", "arguments": ""}
            result.tools = [*(result.tools or ()), call]
    if chunk.arguments:
        result.tool_call_chunks += 1
        if keep and result.tools:
            result.tools[-1]["arguments"] += chunk.arguments


def _no_header(name: str) -> None:
    return None


class Attempt:
    """One attempt on one model: ``with Attempt(...) as a:`` runs it under its deadline and fills ``a.result``.

    The deadline (one ``gevent.Timeout`` for the whole request, never a per-read timeout, whose cost is paid per
    token) fails the result as a timeout; any other exception passes through. The end time is stamped on exit
    when the client did not stamp it."""

    __slots__ = ("_deadline", "clock", "header", "on_cut", "reply_slices", "result", "secrets", "timeout_s")

    def __init__(
        self,
        model: str,
        intended_ns: int,
        timeout_s: float,
        secrets: Sequence[str] = (),
        clock: Callable[[], int] = time.perf_counter_ns,
        on_cut: Callable[[RequestResult], None] | None = None,
    ) -> None:
        self.clock = clock
        self.on_cut = on_cut
        """Called with the result of an attempt whose request was written and whose greenlet was then killed (a
        stop of the run): it is in no statistics, and is counted apart."""
        self.timeout_s = timeout_s
        self.secrets = secrets
        self.result = RequestResult(model=model, intended_ns=intended_ns, sent_ns=clock())
        self.header: Callable[[str], Any] = _no_header
        """Reads a header of the response once it has come (the client sets it)."""
        self.reply_slices: list[bytes] | None = None
        """The answer tokens' content, as JSON string slices, when the reply text is kept (conversations; see
        ``sse.content_json``)."""
        self._deadline = gevent.Timeout(timeout_s)

    def __enter__(self) -> Attempt:
        self._deadline.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> bool:
        self._deadline.close()
        result = self.result
        if not result.end_ns:
            result.end_ns = self.clock()
        if result.http_status in (200, 429):  # the provider's caps, from the head the attempt already has
            result.ratelimit = ratelimit_headers(self.header)
        if exc is not None and exc is self._deadline:
            result.fail(Outcome.TIMEOUT, f"timeout: no complete answer within {self.timeout_s:g} s{progress(result)}")
            return True
        if isinstance(exc, GreenletExit) and result.wrote and self.on_cut is not None:
            self.on_cut(result)
        return False

    # -- failures, worded once for every client ----------------------------------------------------------------

    def http_error(self, status: int, reason: str, body: bytes | str) -> None:
        """An HTTP error answer (Retry-After is read from the response's headers)."""
        result = self.result
        result.http_status = status
        text = f"HTTP {status} {reason}".strip()
        result.fail(Outcome.for_http_status(status), f"{text}: {preview(body, self.secrets)}".strip())
        result.retry_after_s = self._retry_after()
        if f"http_{status}" in SYSTEMATIC:
            result.cause = f"http_{status}"

    def _retry_after(self) -> float | None:
        return retry_after_s(self.header("retry-after-ms"), self.header("retry-after"), time.time())

    def connection_error(self, exc: BaseException) -> None:
        result = self.result
        result.fail(Outcome.CONNECTION, redact(f"connection error: {os_reason(exc)}{progress(result)}", self.secrets))
        if not result.http_status:
            result.cause = network_cause(exc)

    def silence(self) -> None:
        """A read timed out: the server sent nothing for too long."""
        self.result.fail(Outcome.TIMEOUT, f"timeout: the server sent nothing for too long{progress(self.result)}")

    def malformed(self, what: str) -> None:
        self.result.fail(Outcome.MALFORMED, f"malformed stream: {preview(what, self.secrets)}{progress(self.result)}")

    def stream_error(self, chunk: ChatChunk) -> None:
        """An error object sent inside the stream (see :func:`locust_llm.protocol.sse.parse_chunk`)."""
        result = self.result
        text = f"error in stream: {preview(chunk.error or '', self.secrets)}{progress(result)}"
        if chunk.error_status == 429:
            result.fail(Outcome.HTTP_429, text)
            result.retry_after_s = chunk.retry_after_s if chunk.retry_after_s is not None else self._retry_after()
        else:
            result.fail(Outcome.STREAM_ERROR, text)

    def check_not_empty(self) -> None:
        if not self.result.token_ns:
            self.result.fail(Outcome.EMPTY, EMPTY_STREAM)
