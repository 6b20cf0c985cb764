"""Sending one POST over a geventhttpclient connection and reading its head ourselves: :func:`post`.

It does what ``HTTPClient.request`` does for a plain-HTTP POST of bytes, but gives the response's parser exactly the
head, so a chunked body's framing is ours to read (:mod:`locust_llm.http.chunked`). Requests through a proxy, or with
``Expect``, ``Transfer-Encoding`` or ``Content-Length`` headers, go through ``HTTPClient.request``.
docs/architecture.md, "The head is read by us".
"""

from __future__ import annotations

import contextlib
import errno
import socket
import time
import weakref
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import gevent._socket3
from geventhttpclient.response import HTTPConnectionClosed, HTTPSocketPoolResponse

from locust_llm.http.head import StreamResponse, plain_head
from locust_llm.http.loop import LoopTurn, loop_turn
from locust_llm.http.pump import wait_readable
from locust_llm.http.stamps import CMSG_BYTES, kernel_stamps, received_ns

__all__ = ["HEAD_LIMIT", "ResponseStart", "drop_idle_connections", "header", "is_event_stream", "post"]

HEAD_LIMIT = 65536
"""Bytes of a response head read by :func:`post` before it leaves the head to the parser."""

_SENT_BY_REQUEST = frozenset({"expect", "transfer-encoding", "content-length"})
"""Request headers that change how a request is sent: ``HTTPClient.request`` sends those."""


_LENGTH = "LocustLlmContentLength"
"""Where the body's length goes in a request head built once (:func:`_head`)."""


_HEADS: weakref.WeakKeyDictionary[Any, dict[str, list[tuple[dict[str, str], tuple[bytes, bytes] | None]]]] = (
    weakref.WeakKeyDictionary()
)
"""Per client and URI: the headers sent (a copy) and the request head :func:`_head` built for them."""


class ResponseStart(NamedTuple):
    response: Any
    """The ``geventhttpclient`` response; its parser has read the head."""
    body: bytes | None
    """Bytes of a chunked event-stream body read with the head and not given to the parser; ``None`` when the parser
    reads the whole body."""
    body_ns: int | None = None
    """When the kernel received the last bytes read with the head, on ``post``'s ``clock`` (plain HTTP on Linux,
    :mod:`.pump`'s rule); ``None`` where unknown."""


def header(response: Any, name: str) -> str:
    """A response header (the first value of a repeated one), or ``""``."""
    value = response.get(name)
    if isinstance(value, list):
        value = value[0] if value else ""
    return value or ""


def is_event_stream(response: Any) -> bool:
    content_type = header(response, "content-type").lower()
    return not content_type or "event-stream" in content_type


def post(
    http: Any,
    uri: str,
    body: bytes,
    headers: dict[str, str],
    clock: Callable[[], int] = time.perf_counter_ns,
    result: Any = None,
) -> ResponseStart:
    """POST ``body`` to ``uri`` with ``http`` (a ``geventhttpclient`` ``HTTPClient``); see the module docstring.
    ``clock``: the stream's, for ``ResponseStart.body_ns``. ``result`` (the attempt's ``RequestResult``) gets
    ``wrote`` once the request was handed to the kernel (to ``HTTPClient.request``, where that sends it)."""
    around = _head(http, uri, headers)
    if around is None:
        if result is not None:
            result.wrote = True
        return ResponseStart(http.request("POST", uri, body=body, headers=headers), None)
    request = b"%b%d%b%b" % (around[0], len(body), around[1], body)
    pool = http._connection_pool
    if "_is_socket_alive" not in vars(pool):  # once per pool: judged without a yield (docs/architecture.md)
        pool._is_socket_alive = partial(_idle_and_open, pool._is_socket_alive)
    sock = pool.get_socket()
    kwargs = {"block_size": http.block_size, "method": "POST", "headers_type": http.headers_type}
    turn = loop_turn(clock) if type(sock) is gevent._socket3.socket else None  # plain HTTP: the kernel's times,
    if turn is not None and not kernel_stamps(sock._sock):  # asked for before the answer can come
        turn = None
    try:
        _send(sock, request)
        if result is not None:
            result.wrote = True
    except OSError as exc:
        if exc.errno not in (errno.ECONNRESET, errno.EPIPE):
            pool.release_socket(sock)
            raise
        # the server may have answered before it closed: read that answer, as HTTPClient.request does (the response
        # owns the connection from here, and frees it however its reading ends)
        return ResponseStart(HTTPSocketPoolResponse(sock, pool, **kwargs), None)
    except BaseException:
        pool.release_socket(sock)
        raise
    try:
        head, rest, rest_ns = _read_head(sock, http.block_size, turn)
    except BaseException:  # a read error, the deadline, a stop: no response owns the connection yet
        pool.release_socket(sock)
        raise
    if rest is not None:
        plain = plain_head(head)
        if plain is not None:
            return ResponseStart(StreamResponse(sock, pool, head, plain, kwargs), rest, rest_ns)
    response = HTTPSocketPoolResponse(sock, pool, pre_buffered=head, **kwargs)
    if rest is None:
        return ResponseStart(response, None)
    if response.status_code == 200 and _chunked(response) and is_event_stream(response):
        return ResponseStart(response, rest, rest_ns)
    if rest:
        response.feed(rest)
    return ResponseStart(response, None)


def drop_idle_connections(http: Any) -> None:
    """Close ``http``'s pooled idle sockets, so that its next request opens a fresh connection."""
    pool = getattr(http, "_connection_pool", None)
    queue = getattr(pool, "_socket_queue", None)
    while queue is not None and not queue.empty():
        try:
            queue.get(block=False).close()
        except Exception:  # an empty queue or a socket already closed: nothing left to drop
            break


def _head(http: Any, uri: str, headers: dict[str, str]) -> tuple[bytes, bytes] | None:
    """The request's head around its Content-Length value, built (and validated) by ``http`` once per URI and
    headers and kept on it; ``None`` when ``HTTPClient.request`` sends the request (:func:`_own_path`)."""
    heads = _HEADS.get(http)
    if heads is None:
        heads = _HEADS[http] = {}
    known = heads.setdefault(uri, [])
    for sent, around in known:  # a user sends the same headers each time: one comparison of two small dicts
        if sent == headers:
            return around
    around = None
    if _own_path(http, headers):
        text = http._build_request("POST", uri, body=b"", headers={**headers, "Content-Length": _LENGTH})
        if isinstance(text, str) and text.count(_LENGTH) == 1:  # else another geventhttpclient: its request()
            before, _, after = text.encode("latin-1").partition(_LENGTH.encode())
            around = (before, after)
    known.append((dict(headers), around))
    return around


def _own_path(http: Any, headers: dict[str, str]) -> bool:
    """Whether :func:`post` sends it (a ``geventhttpclient`` client that has the pieces it uses, HTTP/1.1 over TCP
    or TLS, no proxy, none of :data:`_SENT_BY_REQUEST`); else ``HTTPClient.request`` does."""
    if getattr(http, "use_proxy", True) or getattr(http, "version", "") != "HTTP/1.1":
        return False
    if not all(hasattr(http, name) for name in ("_build_request", "_connection_pool", "block_size", "headers_type")):
        return False
    names = {name.lower() for name in (*headers, *http.default_headers)}
    return not names & _SENT_BY_REQUEST


def _idle_and_open(pools_check: Callable[[Any], bool], sock: Any) -> bool:
    """Whether a pooled idle connection may carry the next request: what the pool's own check says (a socket that is
    readable while idle was closed by its peer, or holds bytes nobody asked for, and is not reused), found by one
    non-blocking ``recv(1, MSG_PEEK)`` on the OS socket (nothing to read: alive) instead of a ``select`` that
    yields. A socket that is not a plain gevent one (TLS) is judged by ``pools_check``, the pool's own, as before."""
    if type(sock) is not gevent._socket3.socket:
        return pools_check(sock)
    try:
        if sock.fileno() < 0:
            return False
        sock._sock.recv(1, socket.MSG_PEEK)  # returns: the peer closed (b"") or sent unasked bytes
    except BlockingIOError:
        return True
    except (OSError, ValueError):
        return False
    return False


def _send(sock: Any, data: bytes) -> None:
    """``sock.sendall(data)``, with one ``send`` on the OS socket first: a request fits the socket's buffer, and
    gevent's ``sendall`` asks the kernel for that buffer's size (``getsockopt``) on every call."""
    sent = 0
    if type(sock) is gevent._socket3.socket:
        with contextlib.suppress(BlockingIOError):  # the buffer is full: sendall waits
            sent = sock._sock.send(data)
    if sent < len(data):
        sock.sendall(data[sent:] if sent else data)


def _chunked(response: Any) -> bool:
    return header(response, "transfer-encoding").strip().lower() == "chunked"


def _read_head(sock: Any, block_size: int, turn: LoopTurn | None = None) -> tuple[bytes, bytes | None, int | None]:
    """Read up to the head's blank line: (head, the bytes after it, when the kernel received the last read's bytes
    or ``None``), or (everything read, ``None``, ``None``) when the parser must judge the head itself (no
    ``\\r\\n\\r\\n`` end, an interim ``1xx``, the peer closed mid-head). ``turn``: the loop's
    (:func:`~locust_llm.http.loop.loop_turn`) when the socket was set up for the kernel's receive times. A read error
    raises (``HTTPConnectionClosed`` when the connection closed before any byte); :func:`post` closes the connection
    and frees its pool slot, as it does when the head's wait ends by the deadline or a stop."""
    data = b""
    at_ns = None
    plain = type(sock) is gevent._socket3.socket and sock.timeout is None
    raw = sock._sock if plain else None  # the non-blocking OS socket under the cooperative one
    if raw is not None:  # the answer is almost never in yet: wait first rather than fail a read (a syscall and an
        wait_readable(sock)  # exception per request); an answer already in makes the wait return at the next turn
    while True:
        try:
            if raw is None:
                more = sock.recv(block_size)
            else:
                try:
                    if turn is None:
                        more = raw.recv(block_size)
                    else:
                        more, ancillary, _flags, _address = raw.recvmsg(block_size, CMSG_BYTES)
                        at_ns = received_ns(ancillary, turn.wall_offset_ns)
                except BlockingIOError:
                    wait_readable(sock)  # woken once the bytes already in for other streams are read
                    continue
        except OSError as exc:
            if exc.errno == errno.ECONNRESET and not data:
                raise HTTPConnectionClosed("connection closed.") from None
            raise
        if not more:
            if not data:
                raise HTTPConnectionClosed("connection closed.")
            return data, None, None  # the parser reads on, finds the end of the file and says what is wrong
        data += more
        end = data.find(b"\r\n\r\n")
        if end >= 0:
            if data[9:10] == b"1":  # "HTTP/1.1 1xx": an interim answer before the final one
                return data, None, None
            return data[: end + 4], data[end + 4 :], at_ns
        if b"\n\n" in data or len(data) > HEAD_LIMIT:
            return data, None, None
