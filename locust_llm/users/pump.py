"""The body of a plain-HTTP stream, read in the event loop's own callback: no greenlet switch per token.

A gevent socket read that would block costs, per token, a ``BlockingIOError``, a switch to the hub, libev's wake-up
and a switch back (profiled at 512 streams: about a third of the generator's CPU, DESIGN.md "Hot path"). The pump
instead registers one libev read watcher for the response's socket and does the work in its callback, which the hub
runs in place when the socket is readable, like an asyncio ``Protocol.data_received``:

1. one non-blocking ``recv`` of what has arrived, stamped with ``clock()`` right after it;
2. ``response.feed`` (geventhttpclient's C parser: chunked decoding into the body buffer);
3. every complete line in the body buffer goes through the SSE decoder, each event to ``on_event`` with that stamp.

Semantics stay those of the ``readline(b"\\n")`` loop (DESIGN.md "Hot path"): every ``recv`` is handled the moment
it arrives (no block reads that batch tokens, no waiting for more), lines are split on ``\\n`` only, and a partial
line is left in the body buffer. The user's greenlet sleeps in one :class:`gevent.hub.Waiter` for the whole body and
is woken once, when the pump hands back: at the end of the message, at end of file, on any exception (re-raised in
the user's greenlet, where :func:`~locust_llm.users.stream.run_stream` classifies it as before), or when the
attempt failed. Everything the pump leaves (end of file, a trailing partial line, draining after ``[DONE]``) is
finished by the readline loop, so both paths agree byte for byte. The whole-request deadline (a ``gevent.Timeout``)
and a Locust stop still interrupt the wait; the watcher is stopped on every way out.

Only plain sockets are pumped: a TLS socket's readiness says nothing about decrypted bytes (they may sit in the SSL
object's buffer), so TLS streams take the readline loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gevent._socket3
from gevent.hub import Waiter, get_hub

__all__ = ["RECV_BYTES", "pump", "pumpable"]

RECV_BYTES = 65536
"""One ``recv`` takes everything that has arrived (at most this): a token is a few hundred bytes."""

OnEvent = Callable[[Any, int], bool]
"""``on_event(event, now_ns)``: apply one SSE event; True to hand back to the caller (done, or the attempt failed)."""


def pumpable(response: Any) -> bool:
    """True when ``response`` still has body to read from a plain (non-TLS) gevent socket."""
    sock = getattr(response, "_sock", None)
    return type(sock) is gevent._socket3.socket and not response.message_complete


def pump(response: Any, feed_line: Callable[[bytes], Any], on_event: OnEvent, clock: Callable[[], int]) -> None:
    """Read ``response``'s body in the hub's read callback until it hands back (module docstring).

    Lines already buffered are decoded first, stamped now. Raises in the calling greenlet whatever the socket or the
    parser raised.
    """
    if _lines(response._body_buffer, feed_line, on_event, clock()):
        return
    sock = response._sock
    recv = sock._sock.recv  # the non-blocking OS socket under gevent's cooperative one
    buffer = response._body_buffer
    feed = response.feed
    hub = get_hub()
    waiter = Waiter(hub)
    watcher = hub.loop.io(sock.fileno(), 1)

    def readable() -> None:
        try:
            data = recv(RECV_BYTES)
            now = clock()
            if data:
                feed(data)
                if not _lines(buffer, feed_line, on_event, now) and not response.message_complete:
                    return
            # else end of file: the readline loop reads it again and lets the parser judge
        except BlockingIOError:
            return  # a spurious wake-up
        except BaseException as exc:  # handed to the user's greenlet, never to the hub
            watcher.stop()
            waiter.throw(exc)
            return
        watcher.stop()
        waiter.switch(None)

    watcher.start(readable)
    try:
        waiter.get()
    finally:
        watcher.stop()
        watcher.close()


def _lines(buffer: bytearray, feed_line: Callable[[bytes], Any], on_event: OnEvent, now: int) -> bool:
    """Decode every complete line in ``buffer`` (removing them); True as soon as ``on_event`` says hand back."""
    end = buffer.rfind(b"\n")
    if end < 0:
        return False
    block = bytes(buffer[: end + 1])
    del buffer[: end + 1]
    lines = block.split(b"\n")
    lines.pop()  # the empty string after the last separator
    for i, line in enumerate(lines):
        event = feed_line(line)
        if event is not None and on_event(event, now):
            rest = b"\n".join(lines[i + 1 :])
            if i + 1 < len(lines):
                buffer[:0] = rest + b"\n"  # unread lines go back, for the readline loop
            return True
    return False
