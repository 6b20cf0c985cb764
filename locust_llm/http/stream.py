"""One streamed answer (of any API) over a geventhttpclient connection, timed on one clock: :func:`run_stream`.

The body is read as bytes arrive, never in blocks that batch tokens: over plain HTTP in the event loop's read
callback (:mod:`locust_llm.http.pump`), over TLS by :func:`_read_rest`, which decodes the same way. Each SSE event is
stamped when the bytes of its blank line were received (docs/architecture.md, "Stamps"). Failures are classified
(:class:`~locust_llm.protocol.metrics.Outcome`) with a message free of secrets.
"""

from __future__ import annotations

import errno
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from geventhttpclient.response import HTTPConnectionClosed, HTTPParseError

from locust_llm.http.attempt import Attempt, FirstToken, end_of_stream, preview, progress, tool_call
from locust_llm.http.chunked import Unchunker
from locust_llm.http.loop import loop_turn
from locust_llm.http.post import header, is_event_stream, post
from locust_llm.http.pump import Tokens, decode_events, pump, pumpable
from locust_llm.protocol import api_chat
from locust_llm.protocol.api import Api
from locust_llm.protocol.metrics import Outcome, RequestResult
from locust_llm.protocol.sse import TOKEN_CHUNK, MalformedChunk, SSEDecoder, TokenShape, reply_text

__all__ = ["run_stream"]

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
    on_first_token: FirstToken | None = None,
    keep_reply: bool = False,
    on_cut: Callable[[RequestResult], None] | None = None,
    fast: bool = True,
    api: Api = api_chat.API,
) -> RequestResult:
    """POST ``body`` to ``uri`` with ``http`` (a geventhttpclient ``HTTPClient``) and time the streamed answer, read
    as ``api``'s events.

    ``on_first_token`` is called once, the moment the first token arrives (hedging waits for it); it must not block
    (over plain HTTP it runs in the event loop's read callback, :mod:`.pump`). With
    ``keep_reply`` the answer text is kept in ``result.reply`` (a conversation sends it back next turn). ``on_cut``:
    see :class:`~locust_llm.http.attempt.Attempt`. Without ``fast`` (``--fast-path off``) the request is sent and read
    by the library's public API alone (``HTTPClient.request``, ``readline(b"\n")``, ``read``), each event stamped
    with ``clock()`` when its line was read.
    """
    response = None
    with Attempt(model, intended_ns, timeout_s, secrets, clock, on_cut) as attempt:
        result = attempt.result
        if keep_reply:
            attempt.reply_slices = []
        try:
            if fast:
                response, unparsed, unparsed_ns = post(http, uri, body, headers, clock, result)
            else:
                result.wrote = True
                response, unparsed, unparsed_ns = http.request("POST", uri, body=body, headers=headers), None, None
            result.http_status = response.status_code
            attempt.header = partial(header, response)
            if result.http_status != 200:
                _read_http_error(response, attempt)
            elif not is_event_stream(response):
                _read_not_sse(response, attempt)
            else:
                _read_events(response, unparsed, attempt, clock, on_first_token, unparsed_ns, fast, api)
        except TimeoutError:
            attempt.silence()
        except HTTPConnectionClosed:
            result.stale = not result.http_status
            result.fail(Outcome.CONNECTION, _closed(result))
        except HTTPParseError as exc:
            if "incomplete" in str(exc).lower():  # the peer closed the connection in the middle of the body
                result.fail(Outcome.CONNECTION, _closed(result))
            else:
                result.fail(Outcome.MALFORMED, preview(f"malformed HTTP response: {exc}", attempt.secrets))
        except OSError as exc:
            result.stale = not result.http_status and exc.errno in _STALE_ERRNOS
            attempt.connection_error(exc)
        finally:
            if response is not None:
                response.release()
    if attempt.reply_slices:
        result.reply = reply_text(attempt.reply_slices)
    result.fill_token_counts(prompt_tokens_estimate)
    return result


def _closed(result: RequestResult) -> str:
    return f"connection error: the server closed the connection{progress(result)}"


def _read_events(
    response: Any,
    unparsed: bytes | None,
    attempt: Attempt,
    clock: Clock,
    on_first_token: FirstToken | None,
    unparsed_ns: int | None = None,
    fast: bool = True,
    api: Api = api_chat.API,
) -> None:
    """Read the event stream; ``unparsed``: the body's first bytes, not yet given to the response's parser, and
    ``unparsed_ns`` when the kernel received them (see :mod:`.post`). Without ``fast``, line by line through the
    response's own ``readline`` and ``read``."""
    result = attempt.result
    decoder = SSEDecoder()
    shape = TokenShape(api.token_text, api.numbered)  # learned from the first token (Tokens)
    tokens = Tokens(shape, result.token_ns, attempt.reply_slices, event=api.token_event)
    shape, token_ns, slices = tokens.shape, tokens.token_ns, tokens.slices

    def on_data(data: bytes, now_ns: int) -> bool:
        """Apply one event's data (none after ``[DONE]``: the rest of the body is drained); True when the attempt
        failed."""
        nonlocal on_first_token
        if tokens.done:
            return False
        literal = shape.content(data)  # a token chunk of the learned shape is not parsed whole
        if literal is not None:  # what _on_event does with it (the first token, which set answer_ns, came before)
            token_ns.append(now_ns)
            if slices is not None:
                slices.append(literal)
            return False
        tokens.done = _on_event(data, now_ns, result, attempt, shape, api)
        if on_first_token is not None and result.token_ns:
            on_first_token()
            on_first_token = None
        return result.outcome is not Outcome.OK

    if not fast:
        if _read_lines(response, decoder, on_data, clock):
            return
    else:
        unchunker = None
        if pumpable(response):  # plain HTTP: the body is read in the hub's callback (http/pump.py)
            pump(response, decoder, on_data, clock, unparsed, tokens, unparsed_ns)
            if result.outcome is not Outcome.OK:
                return
        elif unparsed is not None:  # TLS, the head read by post(): the chunked framing is taken off by us too
            unchunker = Unchunker(response)
            if unparsed:
                response._body_buffer.extend(unchunker.unframe(unparsed))
        if not _drained(response) and _read_rest(response, decoder, on_data, clock, unchunker):
            return
    if not tokens.done:  # what readline left: a last line without a newline, or a stream whose lines end with CR alone
        rest = _leftover(response) if fast else response.read()  # read: the library's public way to the same bytes
        for event in decoder.feed(rest) + decoder.finish():
            tokens.done = _on_event(event.data, clock(), result, attempt, shape, api) or tokens.done
        if result.outcome is not Outcome.OK:
            return
        result.end_ns = clock()
    attempt.check_not_empty()
    if result.token_ns and not tokens.done:
        end_of_stream(result, api.end)


def _read_rest(
    response: Any,
    decoder: SSEDecoder,
    on_data: Callable[[bytes, int], bool],
    clock: Clock,
    unchunker: Unchunker | None = None,
) -> bool:
    """Read the rest of the body (over TLS, and whatever the pump left), each event's data to ``on_data``;
    True when it said stop. Each read is unframed by ``unchunker`` (TLS with a head :func:`.post.post` read, so
    that the parser has seen none of the body, :mod:`.chunked`), else fed to the response's parser. After every
    read, every complete line in the body buffer is decoded as the pump decodes
    (:func:`~locust_llm.http.pump.decode_events`: a one-line event cut out whole, anything else line by
    line), so a line without its newline waits for the next read, as ``readline(b"\n")`` would leave it.

    Stamps (docs/architecture.md, "Stamps"): with the real clock, an event is stamped by the read that brought its
    last byte. A read during which the loop turned (the greenlet waited for the socket) is stamped with the start of
    the turn it was woken in: its bytes were readable when that turn's poll returned, and the greenlets woken before
    it in the turn are not added. A read that did not wait, and the lines already buffered, are stamped when it
    returned. A record whose last bytes came after the poll is stamped early by at most that turn's length. With
    another clock (the tests' scripted ones) a read is stamped with ``clock()`` when it returned; and when the
    parser reads the body, the lines are read with ``readline`` and each event is stamped with ``clock()`` when it
    is decoded."""
    turn = loop_turn(clock)
    if turn is None and unchunker is None:
        return _read_lines(response, decoder, on_data, clock)
    buffer = response._body_buffer
    now = clock()
    while not decode_events(buffer, decoder, on_data, now):
        if response.message_complete:
            return False
        sock = response._sock
        if sock is None:
            raise HTTPConnectionClosed("connection closed.")
        turns = -1 if turn is None else turn.count
        data = sock.recv(response.block_size)
        if unchunker is None or unchunker.handed:
            response.feed(data)  # b"": the end of the file, which the parser judges
        elif data:
            buffer.extend(unchunker.unframe(data))
        else:
            unchunker.end_of_file()
        now = turn.start_ns if turn is not None and turn.count != turns else clock()
    return True


def _read_lines(response: Any, decoder: SSEDecoder, on_data: Callable[[bytes, int], bool], clock: Clock) -> bool:
    """Read the body with the response's own ``readline(b"\\n")``, each event's data to ``on_data`` stamped with
    ``clock()`` when its last line was read; True when it said stop."""
    feed_line, readline = decoder.feed_line, response.readline
    while line := readline(b"\n"):
        event = feed_line(line)
        if event is not None and on_data(event.data, clock()):
            return True
    return False


def _drained(response: Any) -> bool:
    """The whole message was read and nothing is left in the body buffer (the pump's usual end): :func:`_read_rest`
    would find nothing to do."""
    return bool(response.message_complete) and not getattr(response, "_body_buffer", None)


def _leftover(response: Any) -> bytes:
    """Bytes the client's ``readline`` left unread at the end of the body (it returns no line without a separator)."""
    buffer = getattr(response, "_body_buffer", None)
    if not buffer:
        return b""
    data = bytes(buffer)
    del buffer[:]
    return data


def _on_event(
    data: bytes, now_ns: int, result: RequestResult, attempt: Attempt, shape: TokenShape, api: Api = api_chat.API
) -> bool:
    """Apply one event's data to ``result`` (the attempt's); True when it was the API's end (``[DONE]``, ...). The
    first answer token teaches ``shape``."""
    try:
        chunk = api.parse(data)
    except MalformedChunk as exc:
        attempt.malformed(str(exc))
        return False
    if chunk is TOKEN_CHUNK:  # the usual chunk: an answer token and nothing else
        result.token_ns.append(now_ns)
        if not result.answer_ns:
            result.answer_ns = now_ns
        if shape.prefix is None:
            shape.learn(data)
        if attempt.reply_slices is not None:
            attempt.reply_slices.append(api.text_json(data))
        return False
    if chunk.has_token:
        result.token_ns.append(now_ns)
        if chunk.reasoning:
            result.reasoning_chunks += 1
        else:
            if not result.answer_ns:
                result.answer_ns = now_ns
            if attempt.reply_slices is not None:
                attempt.reply_slices.append(api.text_json(data))
    if chunk.error is not None:
        attempt.stream_error(chunk)
    if chunk.finish_reason is not None:
        result.finish_reason = chunk.finish_reason
    if chunk.completion_tokens is not None:
        result.completion_tokens = chunk.completion_tokens
    if chunk.prompt_tokens is not None:
        result.prompt_tokens = chunk.prompt_tokens
    if chunk.cached_tokens is not None:
        result.cached_tokens = chunk.cached_tokens
    if chunk.reasoning_tokens is not None:
        result.reasoning_tokens = chunk.reasoning_tokens
    if chunk.response_id is not None:
        result.response_id = chunk.response_id
    if chunk.tool_call:
        tool_call(result, chunk, attempt.reply_slices is not None)
    if chunk.done:  # the end event (Responses and Messages carry the usage in or before it)
        result.end_ns = now_ns
        return True
    return False


def _read_http_error(response: Any, attempt: Attempt) -> None:
    try:
        raw = response.read(8192)
    except (OSError, HTTPParseError):
        raw = b""
    attempt.http_error(response.status_code, getattr(response, "status_message", "") or "", raw)


def _read_not_sse(response: Any, attempt: Attempt) -> None:
    content_type = header(response, "content-type")
    raw = response.read(8192)
    attempt.result.fail(
        Outcome.NOT_SSE,
        f"not an SSE stream: HTTP 200 with Content-Type {content_type!r}: {preview(raw, attempt.secrets)}",
    )
