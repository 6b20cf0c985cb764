"""The body of a plain-HTTP stream, read in the event loop's own read callback: no greenlet switch per token.

:func:`pump` reads what has arrived in a libev read watcher's callback, stamps it, takes a read of exactly one token
event in one step and decodes anything else line by line (:func:`decode_events`), with a ``readline(b"\n")``
loop's semantics. Why and how: docs/architecture.md, "The body is read in the event loop's read callback".
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gevent._socket3
from gevent.hub import Waiter, get_hub

from locust_llm.http.chunked import SIZE_LINES, SIZES, Unchunker
from locust_llm.http.loop import loop_turn
from locust_llm.http.stamps import CMSG_BYTES, kernel_stamps, received_ns
from locust_llm.protocol.sse import SSEDecoder, TokenShape, is_content_literal

__all__ = ["RECV_BYTES", "Tokens", "decode_events", "pump", "pumpable", "wait_readable"]

RECV_BYTES = 65536
"""One ``recv`` takes everything that has arrived (at most this): a token is a few hundred bytes."""

OnData = Callable[[bytes, int], bool]
"""``on_data(data, now_ns)``: apply one SSE event's data; True to stop reading and return to the caller (done, or
the attempt failed)."""


@dataclass(slots=True, eq=False)
class Tokens:
    """A stream's answer tokens, where the pump puts a single-token read itself exactly as
    ``on_data`` would put that event: its stamp, and its content's JSON string literal when the reply is kept."""

    shape: TokenShape
    """Learned by ``on_data`` from the stream's first token chunk."""
    token_ns: list[int]
    slices: list[bytes] | None
    """The content literals, when the reply is kept; else None."""
    done: bool = False
    """The end event (``[DONE]``) was seen: ``on_data`` ignores every later event, so no token is taken any more."""
    event: bytes = b""
    """The ``event:`` line's name before a token event's data, for APIs that name their events (none: chat)."""
    framed: re.Pattern[bytes] | None = None
    """A numbered shape's single-token read (:func:`_token_frame`), made once: the chunk's size in hex (group 1),
    the event's lines with their digits free and the literal (group 2)."""


def pumpable(response: Any) -> bool:
    """True when ``response`` still has body to read from a plain (non-TLS) gevent socket."""
    sock = getattr(response, "_sock", None)
    return type(sock) is gevent._socket3.socket and not response.message_complete


def pump(
    response: Any,
    decoder: SSEDecoder,
    on_data: OnData,
    clock: Callable[[], int],
    body: bytes | None = None,
    tokens: Tokens | None = None,
    body_ns: int | None = None,
) -> None:
    """Read ``response``'s body in the hub's read callback until it stops (module docstring).

    ``body``: the first bytes of a chunked body that the response's parser has not seen (``ResponseStart.body``);
    the rest of the body is then unframed by :class:`~locust_llm.http.chunked.Unchunker`. Lines already buffered and
    ``body`` are decoded first, stamped now, or ``body`` with ``body_ns`` when given (the kernel's receive time of
    the read that brought it with the head, :func:`~locust_llm.http.post.post`). ``tokens``: where a single-token read
    goes, when given with ``body``. Raises in the calling greenlet whatever the socket or the parser raised.
    """
    sock = response._sock
    raw = sock._sock  # the non-blocking OS socket under gevent's cooperative one
    recv, recvmsg = raw.recv, raw.recvmsg
    buffer = response._body_buffer
    unchunker = None if body is None else Unchunker(response)
    unframe = response.feed if unchunker is None else unchunker.unframe

    def take(data: bytes, now: int) -> bool:
        """Apply one read; True to stop. A read whose body is one event of one ``data:`` line, with
        nothing buffered, goes to ``on_data`` without the body buffer."""
        piece = unframe(data)  # the parser's feed puts it in the buffer itself (and returns None)
        if piece and not buffer and piece.endswith(b"\n\n") and _one_line(piece, len(piece) - 2, decoder):
            return (len(piece) > 8 and on_data(piece[6:-2], now)) or response.message_complete
        if piece:
            buffer.extend(piece)
        return decode_events(buffer, decoder, on_data, now) or response.message_complete

    now = clock()
    if (
        decode_events(buffer, decoder, on_data, now)
        or (body and take(body, body_ns or now))
        or response.message_complete
    ):
        return
    turn = loop_turn(clock)
    cell = turn if turn is not None and kernel_stamps(raw) else None  # the turn, when reads get the kernel's times
    hub = get_hub()
    waiter = Waiter(hub)
    defer = hub.loop.run_callback
    watcher, made = _read_watcher(sock, hub)
    head, tail, framed = _token_frame(tokens, buffer, decoder, unchunker)
    token_ns = None if tokens is None else tokens.token_ns
    slices = None if tokens is None else tokens.slices

    def readable() -> None:
        nonlocal head, tail, framed
        try:
            if cell is not None and cell.kernel_stamps:  # the kernel's receive time (docs/architecture.md, "Stamps")
                data, ancillary, _flags, _address = recvmsg(RECV_BYTES, CMSG_BYTES)
                now = received_ns(ancillary, cell.wall_offset_ns) or cell.start_ns
            else:
                data = recv(RECV_BYTES)
                now = clock() if turn is None else turn.start_ns
            if head:  # a single-token read: <hex>\r\n, head, a non-empty JSON string literal, tail
                i = data.find(b"\r", 1, 18)
                n = len(data)
                if i > 0 and data.startswith(head, i) and data.endswith(tail) and (size := n - i - 4) < SIZES:
                    literal = data[i + len(head) : n - len(tail)]  # size > 0: the head is 8 bytes or more
                    if data.startswith(SIZE_LINES[size]) and is_content_literal(literal):
                        token_ns.append(now)  # type: ignore[union-attr]  # head is set only with tokens
                        if slices is not None:
                            slices.append(literal)
                        return
            elif framed is not None and (match := framed.fullmatch(data)) is not None:  # the same, numbered
                hexa, literal = match.group(1, 2)
                if int(hexa, 16) == len(data) - len(hexa) - 4 and is_content_literal(literal):
                    token_ns.append(now)  # type: ignore[union-attr]  # framed is set only with tokens
                    if slices is not None:
                        slices.append(literal)
                    return
            if not data:  # end of file: the parser gets what it has not seen; the readline loop judges
                if unchunker is not None:
                    unchunker.end_of_file()
            elif not take(data, now):
                head, tail, framed = _token_frame(tokens, buffer, decoder, unchunker)
                return
        except BlockingIOError:
            return  # a spurious wake-up
        except BaseException as exc:  # handed to the user's greenlet, never to the hub
            watcher.stop()
            waiter.throw(exc)
            return
        watcher.stop()
        defer(waiter.switch, None)  # after the other sockets ready now are read (module docstring)

    _sleep(watcher, waiter, readable, made)


def wait_readable(sock: Any) -> None:
    """Sleep until ``sock`` (a plain gevent socket) is readable, woken as the pump wakes its user: after every socket
    ready in the same turn of the loop has been read (module docstring)."""
    hub = get_hub()
    waiter = Waiter(hub)
    defer = hub.loop.run_callback
    watcher, made = _read_watcher(sock, hub)

    def readable() -> None:
        watcher.stop()
        defer(waiter.switch, None)

    _sleep(watcher, waiter, readable, made)


def _read_watcher(sock: Any, hub: Any) -> tuple[Any, bool]:
    """The libev read watcher for ``sock`` (a plain gevent socket) and whether it was made for this wait: gevent's
    own (``sock._read_event``, which its ``recv`` waits on and which stays idle while a request owns the socket),
    else, when it is gone or busy, a new one. A watcher made per wait costs a ``fcntl`` (gevent checks the
    descriptor) and a failed ``epoll_ctl`` (libev registers a descriptor afresh for a new watcher), twice per
    request."""
    watcher = sock._read_event
    if watcher is None or watcher.callback is not None:
        return hub.loop.io(sock.fileno(), 1), True
    return watcher, False


def _sleep(watcher: Any, waiter: Waiter, readable: Callable[[], None], made: bool) -> None:
    """Sleep in ``waiter`` while the hub runs ``readable`` whenever ``watcher``'s socket is readable; the watcher is
    stopped on every way out (a wake-up, an exception, the deadline, a Locust stop), and released unless it is the
    socket's own (:func:`_read_watcher`).

    Stopped only while it is still this wait's: at the end of a body the response returns its socket to the pool
    inside the read callback, which stops the watcher and queues the wake-up, and before this greenlet resumes
    another (an open-loop arrival) may take the socket and wait on its own watcher. Stopping that one would leave
    the new request asleep with its answer in the socket (tests/unit/http/test_handover.py)."""
    watcher.start(readable)
    try:
        waiter.get()
    finally:
        if watcher.callback is readable:
            watcher.stop()
        if made:
            watcher.close()


_NOT_USUAL: tuple[bytes, bytes, None] = (b"", b"", None)


def _token_frame(
    tokens: Tokens | None, buffer: bytearray, decoder: SSEDecoder, unchunker: Unchunker | None
) -> tuple[bytes, bytes, re.Pattern[bytes] | None]:
    """The bytes of a single-token read before and after its literal, in the chunk's framing, when the next read
    may be taken in one step (for a numbered shape, the read's regular expression instead, :attr:`Tokens.framed`);
    else two empty strings and None. A shape learned from an event of several data lines (an LF in its data; the
    decoder never gives a CR) is never one line."""
    if tokens is None or unchunker is None:
        return _NOT_USUAL
    shape = tokens.shape
    prefix, suffix = shape.prefix, shape.suffix
    if (
        prefix is None
        or tokens.done
        or buffer
        or not unchunker.at_boundary
        or not decoder.idle
        or b"\n" in prefix
        or b"\n" in suffix
    ):
        return _NOT_USUAL
    event = b"\r\nevent: " + tokens.event + b"\ndata: " if tokens.event else b"\r\ndata: "
    if shape.regex is None:
        return event + prefix, suffix + b"\n\n\r\n", None
    if tokens.framed is None:
        tokens.framed = _framed(event, shape.regex)
    return b"", b"", tokens.framed


@functools.lru_cache(maxsize=64)
def _framed(event: bytes, regex: re.Pattern[bytes]) -> re.Pattern[bytes]:
    """A numbered shape's single-token read, chunk framing and all (made once per shape, as the shape's own)."""
    lines = re.escape(event) + regex.pattern + re.escape(b"\n\n\r\n")
    return re.compile(b"([0-9a-f]{1,3})" + lines)  # under 4096 bytes, as SIZES


def decode_events(buffer: bytearray, decoder: SSEDecoder, on_data: OnData, now: int) -> bool:
    """Decode every complete line in ``buffer`` (removing them), each event's data to ``on_data``; True as soon as
    it says stop, with the lines not yet decoded put back at the front of ``buffer``. The pump's, and the TLS
    read loop's (:mod:`.stream`)."""
    end = buffer.rfind(b"\n")
    if end < 0:
        return False
    block = bytes(buffer[: end + 1])
    del buffer[: end + 1]
    parts = block.split(b"\n\n")  # complete events (their blank line cut) and, last, lines of one not yet ended
    tail = parts.pop()
    feed_line = decoder.feed_line
    for i, part in enumerate(parts):
        if _one_line(part, len(part), decoder):
            if len(part) > 6 and on_data(part[6:], now):
                _put_back(buffer, [], parts[i + 1 :], tail)
                return True
            continue
        lines = part.split(b"\n")
        lines.append(b"")  # the blank line that ended it
        rest = _lines(lines, feed_line, on_data, now)
        if rest is not None:
            _put_back(buffer, lines[rest:], parts[i + 1 :], tail)
            return True
    if tail:
        lines = tail.split(b"\n")
        lines.pop()  # the empty string after its last separator
        rest = _lines(lines, feed_line, on_data, now)
        if rest is not None:
            _put_back(buffer, lines[rest:], [], b"")
            return True
    return False


def _one_line(event: bytes, end: int, decoder: SSEDecoder) -> bool:
    """Whether ``event[:end]``, an event without its blank line, is one ``data: ...`` line the decoder would dispatch
    alone (it is between events), so that its data is ``event[6:end]``."""
    return event[:6] == b"data: " and event.find(b"\n", 0, end) < 0 and event.find(b"\r", 0, end) < 0 and decoder.idle


def _lines(lines: list[bytes], feed_line: Callable[[bytes], Any], on_data: OnData, now: int) -> int | None:
    """Decode ``lines`` one by one; the index of the first line left undecoded when ``on_data`` said stop."""
    for j, line in enumerate(lines):
        event = feed_line(line)
        if event is not None and on_data(event.data, now):
            return j + 1
    return None


def _put_back(buffer: bytearray, lines: list[bytes], parts: list[bytes], tail: bytes) -> None:
    """Return undecoded ``lines``, then whole events ``parts``, then ``tail`` to the front of ``buffer``, as they
    were in the bytes."""
    rest = b"".join(line + b"\n" for line in lines) + b"".join(part + b"\n\n" for part in parts) + tail
    if rest:
        buffer[:0] = rest
