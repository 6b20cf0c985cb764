"""The body of a plain-HTTP stream, read in the event loop's own callback: no greenlet switch per token.

A gevent socket read that would block costs, per token, a ``BlockingIOError``, a switch to the hub, libev's wake-up
and a switch back (profiled at 512 streams: about a third of the generator's CPU, DESIGN.md "Hot path"). The pump
instead registers one libev read watcher for the response's socket and does the work in its callback, which the hub
runs in place when the socket is readable, like an asyncio ``Protocol.data_received``:

1. one non-blocking read of what has arrived, stamped with the time the kernel received its last bytes (below);
2. the usual read of a stream whose token shape is learned (:class:`~locust_llm.sse.TokenShape`) is taken in one
   step, with no call into the decoder or ``on_data``: one whole chunk, ``<hex size>\\r\\n``, holding one event of
   one line, ``data: <prefix><literal><suffix>\\n\\n``, then ``\\r\\n``, where the literal is a non-empty JSON string
   (:func:`~locust_llm.sse.is_content_literal`). Its stamp (and the literal, when the reply is kept) is appended to
   :class:`Tokens`, which is what ``on_data`` does with that event. It is tried only in a state where the event
   means that and nothing else (:func:`_usual`): nothing buffered, the decoder between events, the unframing at a
   chunk boundary (:class:`~locust_llm.users.chunked.Unchunker`, so the response's parser has seen only the head),
   ``[DONE]`` not yet seen; and a size in upper case, with leading zeros or of 4096 bytes or more
   (:data:`~locust_llm.users.chunked.SIZE_LINES`) is simply not the usual read;
3. anything else has its chunked framing taken off, by :class:`~locust_llm.users.chunked.Unchunker` when the
   response's parser has seen only the head (:func:`locust_llm.users.wire.post`), else by ``response.feed``
   (geventhttpclient's C parser), into the body buffer, where every complete line is decoded as SSE, each event's
   data to ``on_data`` with that stamp (:func:`decode_events`: the usual one-line event is cut out directly; comments,
   ``event:`` fields, multi-line data or CRLF line ends go line by line through the SSE decoder, which gives the
   same events); a read whose body is one one-line event, with nothing buffered, goes to ``on_data`` directly.

Semantics stay those of the ``readline(b"\\n")`` loop (DESIGN.md "Hot path"): every ``recv`` is handled the moment
it arrives (no block reads that batch tokens, no waiting for more), lines are split on ``\\n`` only, and a partial
line is left in the body buffer. The user's greenlet sleeps in one :class:`gevent.hub.Waiter` for the whole body and
is woken once, when the pump hands back: at the end of the message (after ``[DONE]`` it reads on to the end of the
chunked body, so that the connection goes back to the pool without another wait), at end of file, on any exception
(re-raised in the user's greenlet, where :func:`~locust_llm.users.stream.run_stream` classifies it as before), or
when the attempt failed. Everything the pump leaves (end of file, a trailing partial line) is finished by the
readline loop, so both paths agree byte for byte. The whole-request deadline (a ``gevent.Timeout``)
and a Locust stop still interrupt the wait; the watcher is stopped on every way out.

**Bytes that have arrived are stamped before a user's own work runs.** When the pump hands back at the end of a
body, the user is not switched to from inside the read callback: its wake-up is queued (``loop.run_callback``), so it
runs after the callbacks of every other socket that was ready in the same turn of the loop. A user's work between two
waits (the recording of its request and the sending of the next; the response head and the pump's start) is a few
hundred microseconds per request, which would otherwise be added to the stamps of every token already received for
the streams after it in that turn; at a few hundred streams a turn holds many. :func:`wait_readable`, the wait for a
response head (:mod:`.wire`), wakes its user the same way.

**Bytes are stamped with when they arrived, not when Python got to them**, by one of two rules, chosen for each turn
of the loop by what came before its poll (:func:`turn_cell`). A socket that a poll reports readable became readable
after the previous poll returned (else that one would have reported it): either while the loop worked in between
(users' work: the recording of a request and the sending of the next, a few hundred microseconds each; timers'
greenlets; the read callbacks of the previous turn), or while this poll waited, and then it is what woke the poll, or
came while it woke.

**After more than** :data:`WORK_NS` **(100 µs) of the loop's own work, or a poll that waited more than** :data:`WAIT_NS`
**(1 ms), a read is stamped with the time the kernel received its last bytes** (a core idle that long may have been
given away by the host, and getting it back can take milliseconds), where the kernel says (Linux: the socket asks once
for ``SO_TIMESTAMPNS``, :mod:`.stamps`, by the time the pump starts, and the read is a ``recvmsg`` whose control message
holds that wall-clock time, turned into ``clock()``'s with the offset between the two clocks taken at the turn's start).
That is exactly when they arrived, however long the loop took to get to them: a turn that ran users' work, a timer's
greenlet, the read callbacks of other sockets, or a stall of the generator's process while it worked (the work is timed
by the wall clock) adds nothing to it. Over loopback the kernel receives them inside the server's ``send``, so the
stamps are what the server delivered. Where the kernel gives no time (another system, an option refused, bytes that
carry none: Linux turns receive times on for the whole system a moment after the first socket asks, so a process's very
first reads may take it), the read takes the rule below.

**Otherwise (and over TLS, and where the kernel gives no time) a read is stamped with the moment the loop's poll
returned**, not with the moment its callback ran: its bytes came at most :data:`WORK_NS` plus the poll's wake-up before
that (the loop worked less, then polled: what a short poll reports came while it waited, or is what woke it). The
callbacks of a turn run one after another (at a few hundred streams many sockets are ready at once, each read costing
tens of microseconds), after whatever else the turn holds: a timer's greenlet, such as an open-loop arrival sending its
request. Stamped when its callback ran, the last read of a turn was late by all of that. A check watcher of the highest
priority, which libev runs first in every turn after the poll, stores ``clock()`` (:func:`turn_cell`) and the read
callbacks of that turn use it. Bytes that arrive on a ready socket after the poll returned and are taken by the same
``recv`` get that earlier stamp, early by at most the turn's length (the events of one read share one stamp under either
rule). A stall of the process while a short poll wakes (a host that took the core) is the one delay these stamps include
and the kernel's would not; every client's stamps include it. With a clock other than ``time.perf_counter_ns`` (the
tests' scripted clocks), each read calls the clock instead.

Why two rules: the kernel's time costs a ``recvmsg`` and its control message where the other costs a ``recv``, and at
a few hundred streams the loop neither worked long nor waited long before most turns. Taken for every read, it was 7-9 %
of the generator's CPU (0.914-0.935 of the CPU per token without it; the same with the option set and a plain ``recv``:
the cost is the ``recvmsg``); taken after work alone, 4-6 % of it is saved (0.942-0.964), and adding the turns after a
long wait costs no more than the method's noise (1.002-1.016). All: ``python bench/pair.py``, pairs of generators at 128
streams of 64 tokens run at once on one core against one simulator, 2026-12-03 (README, "Generator cost"). In four
interleaved pairs of ``bench/generator.py`` runs at 512 streams (2026-12-02), the ITL p99 measured minus the one the
simulator measured as its writes returned was -0.06 to +0.22 ms with the kernel's time for every read, against +0.45 to
+1.18 ms with the poll's return for every read: that lateness is mostly the loop's own work, which the first rule takes
out.

Only plain sockets are pumped: a TLS socket's readiness says nothing about decrypted bytes (they may sit in the SSL
object's buffer), so TLS streams take the line loop of :mod:`.stream`, which stamps the reads it waited for by
the same rule.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gevent._socket3
from gevent.hub import Waiter, get_hub

from locust_llm.sse import SSEDecoder, TokenShape, is_content_literal
from locust_llm.users.chunked import SIZE_LINES, SIZES, Unchunker
from locust_llm.users.stamps import CMSG_BYTES, kernel_stamps, received_ns

__all__ = ["RECV_BYTES", "Tokens", "decode_events", "pump", "pumpable", "turn_cell", "wait_readable"]

WORK_NS = 100_000
"""A turn that follows more of the loop's own work than this (ns, wall clock) reads with the kernel's receive times
(module docstring)."""
WAIT_NS = 1_000_000
"""A turn whose poll waited longer than this (ns) reads with the kernel's receive times (module docstring)."""

RECV_BYTES = 65536
"""One ``recv`` takes everything that has arrived (at most this): a token is a few hundred bytes."""

OnData = Callable[[bytes, int], bool]
"""``on_data(data, now_ns)``: apply one SSE event's data; True to hand back to the caller (done, or the attempt
failed)."""


@dataclass(slots=True, eq=False)
class Tokens:
    """A stream's answer tokens, where the pump puts the usual read itself (module docstring, step 2) exactly as
    ``on_data`` would put that event: its stamp, and its content's JSON string literal when the reply is kept."""

    shape: TokenShape
    """Learned by ``on_data`` from the stream's first token chunk."""
    token_ns: list[int]
    slices: list[bytes] | None
    """The content literals, when the reply is kept; else None."""
    done: bool = False
    """``[DONE]`` was seen: ``on_data`` ignores every later event, so no token is taken any more."""


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
    """Read ``response``'s body in the hub's read callback until it hands back (module docstring).

    ``body``: the first bytes of a chunked body that the response's parser has not seen (``wire.Opened.body``); the
    rest of the body is then unframed by :class:`~locust_llm.users.chunked.Unchunker`. Lines already buffered and
    ``body`` are decoded first, stamped now, or ``body`` with ``body_ns`` when given (the kernel's receive time of
    the read that brought it with the head, :func:`~locust_llm.users.wire.post`). ``tokens``: where the usual read
    goes (step 2), when given with ``body``. Raises in the calling greenlet whatever the socket or the parser raised.
    """
    sock = response._sock
    raw = sock._sock  # the non-blocking OS socket under gevent's cooperative one
    recv, recvmsg = raw.recv, raw.recvmsg
    buffer = response._body_buffer
    unchunker = None if body is None else Unchunker(response)
    unframe = response.feed if unchunker is None else unchunker.unframe

    def take(data: bytes, now: int) -> bool:
        """Apply one read (step 3); True to hand back. A read whose body is one event of one ``data:`` line, with
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
    turn = turn_cell(clock)
    cell = turn if turn is not None and kernel_stamps(raw) else None  # the turn, when reads get the kernel's times
    hub = get_hub()
    waiter = Waiter(hub)
    defer = hub.loop.run_callback
    watcher, made = _read_watcher(sock, hub)
    head, tail = _usual(tokens, buffer, decoder, unchunker)
    token_ns = None if tokens is None else tokens.token_ns
    slices = None if tokens is None else tokens.slices

    def readable() -> None:
        nonlocal head, tail
        try:
            if cell is not None and cell[3]:  # after the loop's work: the kernel's receive time (module docstring)
                data, ancillary, _flags, _address = recvmsg(RECV_BYTES, CMSG_BYTES)
                now = received_ns(ancillary, cell[2]) or cell[0]
            else:
                data = recv(RECV_BYTES)
                now = clock() if turn is None else turn[0]
            if head:  # the usual read (step 2): <hex>\r\n, head, a non-empty JSON string literal, tail
                i = data.find(b"\r", 1, 18)
                n = len(data)
                if i > 0 and data.startswith(head, i) and data.endswith(tail) and (size := n - i - 4) < SIZES:
                    literal = data[i + len(head) : n - len(tail)]  # size > 0: the head is 8 bytes or more
                    if data.startswith(SIZE_LINES[size]) and is_content_literal(literal):
                        token_ns.append(now)  # type: ignore[union-attr]  # head is set only with tokens
                        if slices is not None:
                            slices.append(literal)
                        return
            if not data:  # end of file: the parser gets what it has not seen; the readline loop judges
                if unchunker is not None:
                    unchunker.end_of_file()
            elif not take(data, now):
                head, tail = _usual(tokens, buffer, decoder, unchunker)
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
    """Sleep until ``sock`` (a plain gevent socket) is readable, woken as the pump hands back: after every socket
    ready in the same turn of the loop has been read (module docstring)."""
    hub = get_hub()
    waiter = Waiter(hub)
    defer = hub.loop.run_callback
    watcher, made = _read_watcher(sock, hub)

    def readable() -> None:
        watcher.stop()
        defer(waiter.switch, None)

    _sleep(watcher, waiter, readable, made)


def turn_cell(clock: Callable[[], int]) -> list[Any] | None:
    """``[start, count, offset, after_work, prepared]`` of this thread's loop: ``clock()`` taken at the start of the
    current turn (when its poll returned, module docstring), how many turns it has begun, the wall clock
    (``time.time_ns()``) minus ``clock()`` then (what turns the kernel's receive times into ``clock()``'s time,
    :mod:`.stamps`), whether the pump reads with the kernel's receive times in this turn (more than :data:`WORK_NS` of
    the loop's work came before its poll, from the previous turn's start to when the loop was about to poll, or the poll
    waited more than :data:`WAIT_NS`), and ``clock()`` when it was about to poll. Kept by a check watcher of the highest
    priority (it runs first after the poll) and a prepare watcher of the lowest (it runs last before the poll, after
    gevent's callbacks, where users' greenlets are switched to), started on first use and kept for the loop's life (they
    do not keep the loop running); ``None`` when ``clock`` is not ``time.perf_counter_ns``. A greenlet that reads
    ``count`` before and after a call knows whether the loop turned (it yielded) in between."""
    if clock is not time.perf_counter_ns:
        return None
    hub = get_hub()
    loop = hub.loop
    kept = getattr(hub, "_locust_llm_turn", None)
    if kept is not None and kept[0] is loop:
        return kept[1]  # type: ignore[no-any-return]
    start = clock()
    cell: list[Any] = [start, 0, time.time_ns() - start, True, start]
    wall = time.time_ns

    def tick() -> None:
        now = clock()
        cell[3] = cell[4] - cell[0] > WORK_NS or now - cell[4] > WAIT_NS  # the loop's work; the poll's wait
        cell[0] = now
        cell[1] += 1
        cell[2] = wall() - now

    def prepared() -> None:
        cell[4] = clock()

    watcher = loop.check(ref=False, priority=loop.MAXPRI)
    watcher.start(tick)
    before = loop.prepare(ref=False, priority=loop.MINPRI)
    before.start(prepared)
    hub._locust_llm_turn = (loop, cell, watcher, before)
    return cell


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
    the new request asleep with its answer in the socket (tests/unit/users/test_handover.py)."""
    watcher.start(readable)
    try:
        waiter.get()
    finally:
        if watcher.callback is readable:
            watcher.stop()
        if made:
            watcher.close()


_NOT_USUAL = (b"", b"")


def _usual(
    tokens: Tokens | None, buffer: bytearray, decoder: SSEDecoder, unchunker: Unchunker | None
) -> tuple[bytes, bytes]:
    """The bytes of the usual read (step 2) before and after its literal, in the chunk's framing, when the next read
    may be taken in one step; else two empty strings. A shape learned from an event of several data lines (an LF in
    its data; the decoder never gives a CR) is never one line."""
    if tokens is None or unchunker is None:
        return _NOT_USUAL
    prefix, suffix = tokens.shape.prefix, tokens.shape.suffix
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
    return b"\r\ndata: " + prefix, suffix + b"\n\n\r\n"


def decode_events(buffer: bytearray, decoder: SSEDecoder, on_data: OnData, now: int) -> bool:
    """Decode every complete line in ``buffer`` (removing them), each event's data to ``on_data``; True as soon as
    it says hand back, with the lines not yet decoded put back at the front of ``buffer``. The pump's, and the TLS
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
    """Decode ``lines`` one by one; the index of the first line left undecoded when ``on_data`` said hand back."""
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
