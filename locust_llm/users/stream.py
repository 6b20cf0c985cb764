"""One streamed chat completion over a geventhttpclient connection, timed on one clock.

The body is read line by line with ``readline(b"\\n")`` as bytes arrive (Locust's ``iter_lines``/``iter_content``
read 1 KiB blocks and batch tokens; see DESIGN.md "Hot path"). Each SSE event is stamped with
``time.perf_counter_ns()`` when its terminating blank line is read. Failures are classified
(:class:`~locust_llm.metrics.Outcome`) with a readable message from which secrets are removed.
"""

from __future__ import annotations

import errno
import time
from collections.abc import Callable, Sequence
from typing import Any

import gevent
from geventhttpclient.response import HTTPConnectionClosed, HTTPParseError

from locust_llm.metrics import Outcome, RequestResult
from locust_llm.redact import redact
from locust_llm.sse import MalformedChunk, SSEDecoder, SSEEvent, parse_chunk
from locust_llm.users.discipline import retry_after_s

__all__ = ["ERROR_BODY_LIMIT", "run_stream"]

ERROR_BODY_LIMIT = 300
"""Characters of an HTTP error body shown in the failure message."""

Clock = Callable[[], int]

_STALE_ERRNOS = frozenset({errno.ECONNRESET, errno.EPIPE, errno.ECONNABORTED})


def run_stream(
    http: Any,
    uri: str,
    body: bytes,
    headers: dict[str, str],
    *,
    model: str,
    timeout_s: float,
    intended_ns: int,
    secrets: Sequence[str] = (),
    prompt_tokens_estimate: int = 0,
    clock: Clock = time.perf_counter_ns,
    on_first_token: Callable[[], None] | None = None,
) -> RequestResult:
    """POST ``body`` to ``uri`` with ``http`` (a geventhttpclient ``HTTPClient``) and time the streamed answer.

    ``on_first_token`` is called once, the moment the first token arrives (hedging waits for it).
    """
    result = RequestResult(model=model, intended_ns=intended_ns, sent_ns=clock())
    response = None
    deadline = gevent.Timeout(timeout_s)
    deadline.start()
    try:
        response = http.request("POST", uri, body=body, headers=headers)
        result.http_status = response.status_code
        if result.http_status != 200:
            _read_http_error(response, result, secrets)
        elif not _is_event_stream(response):
            _read_not_sse(response, result, secrets)
        else:
            _read_events(response, result, clock, on_first_token)
    except gevent.Timeout as exc:
        if exc is not deadline:
            raise
        result.fail(Outcome.TIMEOUT, f"timeout: no complete answer within {timeout_s:g} s{_progress(result)}")
    except TimeoutError:
        result.fail(Outcome.TIMEOUT, f"timeout: the server sent nothing for too long{_progress(result)}")
    except HTTPConnectionClosed:
        result.stale = not result.http_status
        result.fail(Outcome.CONNECTION, _closed(result))
    except HTTPParseError as exc:
        if "incomplete" in str(exc).lower():  # the peer closed the connection in the middle of the body
            result.fail(Outcome.CONNECTION, _closed(result))
        else:
            result.fail(Outcome.MALFORMED, redact(f"malformed HTTP response: {exc}", secrets))
    except OSError as exc:
        result.stale = not result.http_status and exc.errno in _STALE_ERRNOS
        result.fail(Outcome.CONNECTION, redact(f"connection error: {_os_error(exc)}{_progress(result)}", secrets))
    finally:
        deadline.close()
        if not result.end_ns:
            result.end_ns = clock()
        if response is not None:
            response.release()
    result.settle_tokens(prompt_tokens_estimate)
    return result


def _closed(result: RequestResult) -> str:
    return f"connection error: the server closed the connection{_progress(result)}"


def _progress(result: RequestResult) -> str:
    """Where the request was when it failed; no counts, so Locust's failure table groups alike failures."""
    if not result.http_status:
        return " (before any response)"
    return " (mid-stream)" if result.token_ns else " (before the first token)"


def _os_error(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__


def _read_events(response: Any, result: RequestResult, clock: Clock, on_first_token: Callable[[], None] | None) -> None:
    decoder = SSEDecoder()
    readline = response.readline
    feed_line = decoder.feed_line
    done = False
    while True:
        line = readline(b"\n")
        if not line:
            break
        event = feed_line(line)
        if event is not None and not done:
            done = _on_event(event, clock(), result)
            if on_first_token is not None and result.token_ns:
                on_first_token()
                on_first_token = None
            if result.outcome is not Outcome.OK:
                return
    if not done:
        for event in decoder.finish():
            done = _on_event(event, clock(), result) or done
        if result.outcome is not Outcome.OK:
            return
        result.end_ns = clock()
    if not result.token_ns:
        result.fail(Outcome.EMPTY, "empty stream: HTTP 200 but no generated tokens")
    elif not done:
        result.fail(Outcome.TRUNCATED, f"stream ended without 'data: [DONE]'{_progress(result)}")


def _on_event(event: SSEEvent, now_ns: int, result: RequestResult) -> bool:
    """Apply one event to ``result``; True when it was ``[DONE]``."""
    try:
        chunk = parse_chunk(event.data)
    except MalformedChunk as exc:
        result.fail(Outcome.MALFORMED, f"malformed stream: {exc}{_progress(result)}")
        return False
    if chunk.has_token:
        result.token_ns.append(now_ns)
    if chunk.done:
        result.end_ns = now_ns
        return True
    if chunk.error is not None:
        result.fail(Outcome.STREAM_ERROR, f"error in stream: {chunk.error}{_progress(result)}")
    if chunk.finish_reason is not None:
        result.finish_reason = chunk.finish_reason
    if chunk.completion_tokens is not None:
        result.completion_tokens = chunk.completion_tokens
    if chunk.prompt_tokens is not None:
        result.prompt_tokens = chunk.prompt_tokens
    return False


def _header(response: Any, name: str) -> str:
    value = response.get(name)
    if isinstance(value, list):
        value = value[0] if value else ""
    return value or ""


def _is_event_stream(response: Any) -> bool:
    content_type = _header(response, "content-type").lower()
    return not content_type or "event-stream" in content_type


def _preview(raw: bytes, secrets: Sequence[str]) -> str:
    text = " ".join(raw.decode("utf-8", "replace").split())
    text = redact(text, secrets)
    return text[:ERROR_BODY_LIMIT] + ("..." if len(text) > ERROR_BODY_LIMIT else "")


def _read_http_error(response: Any, result: RequestResult, secrets: Sequence[str]) -> None:
    status = result.http_status
    reason = getattr(response, "status_message", "") or ""
    try:
        raw = response.read(8192)
    except (OSError, HTTPParseError):
        raw = b""
    result.fail(Outcome.for_http_status(status), f"HTTP {status} {reason}: {_preview(raw, secrets)}".strip())
    result.retry_after_s = retry_after_s(
        _header(response, "retry-after-ms"), _header(response, "retry-after"), time.time()
    )


def _read_not_sse(response: Any, result: RequestResult, secrets: Sequence[str]) -> None:
    content_type = _header(response, "content-type")
    raw = response.read(8192)
    result.fail(
        Outcome.NOT_SSE,
        f"not an SSE stream: HTTP 200 with Content-Type {content_type!r}: {_preview(raw, secrets)}",
    )
