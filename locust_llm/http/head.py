"""The response to a streamed request whose head is plain, built without geventhttpclient's parser.

:func:`plain_head` accepts only a head beyond doubt (``HTTP/1.1 200``, printable ASCII, exactly one
``Transfer-Encoding: chunked``, no ``Content-Length``/``Upgrade``/``Proxy-Connection``, kept alive, an event stream
or no content type); :class:`StreamResponse` answers what the stream reads as the library's response would, and
builds that response from the same head the moment anything else is asked. ``tests/unit/http/test_head.py`` compares
the two on random heads.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from geventhttpclient.response import HTTPSocketPoolResponse

__all__ = ["HEADS_KEPT", "StreamResponse", "plain_head"]

_HEAD = re.compile(
    rb"HTTP/1\.1 200 ([\x20-\x7e]*)\r\n((?:[!#$%&'*+\-.^_`|~0-9A-Za-z]+:[\t\x20-\x7e]*\r\n)*)\r\n",
)
"""A plain head (module docstring): its reason phrase and its header lines."""

_REFUSED = frozenset({"content-length", "upgrade", "proxy-connection"})
"""Headers that change how the parser would frame or keep the message: their head is the parser's."""


Fields = dict[str, str | list[str]]
"""A head's headers by lower-case name: the value, or the list of values of a repeated header."""


HEADS_KEPT = 64
"""Heads whose reading :func:`plain_head` keeps: a server sends the same head to every request but for its ``Date``,
which changes once a second."""


@functools.lru_cache(maxsize=HEADS_KEPT)
def plain_head(head: bytes) -> tuple[str, Fields] | None:
    """The reason phrase and headers of ``head`` (a response head up to its blank line) when it is plain (module
    docstring), else ``None``. The readings of the last :data:`HEADS_KEPT` distinct heads used are kept and given
    again for the same bytes (their headers are shared: read, never changed); reading one costs a regular expression
    and a split and a dictionary per header, run cold once per request."""
    m = _HEAD.fullmatch(head)
    if m is None:
        return None
    fields: Fields = {}
    for line in m[2].decode("latin-1").split("\r\n")[:-1]:
        name, _, value = line.partition(":")
        key = name.lower()
        value = value.lstrip(" \t")
        known = fields.get(key)
        if known is None:
            fields[key] = value
        elif isinstance(known, list):
            known.append(value)
        else:
            fields[key] = [known, value]
    if fields.get("transfer-encoding") != "chunked" or not _REFUSED.isdisjoint(fields):
        return None
    connection = fields.get("connection")
    if connection is not None and (not isinstance(connection, str) or connection.lower() != "keep-alive"):
        return None
    content_type = fields.get("content-type", "")
    if not isinstance(content_type, str) or (content_type and "event-stream" not in content_type.lower()):
        return None
    return m[1].decode("latin-1"), fields


class StreamResponse:
    """Stands in for ``geventhttpclient``'s response to a plain head (module docstring)."""

    __slots__ = (
        "_body_buffer",
        "_done",
        "_fields",
        "_head",
        "_kwargs",
        "_own_sock",
        "_parser",
        "_pool",
        "block_size",
        "status_code",
        "status_message",
    )

    def __init__(self, sock: Any, pool: Any, head: bytes, plain: tuple[str, Fields], kwargs: dict[str, Any]) -> None:
        self._own_sock: Any = sock
        self._pool: Any = pool
        self._head = head
        self._kwargs = kwargs
        self._parser: Any = None
        self._done = False
        self._body_buffer = bytearray()
        self.block_size: int = kwargs.get("block_size", HTTPSocketPoolResponse.DEFAULT_BLOCK_SIZE)
        self.status_code = 200
        self.status_message, self._fields = plain

    @property
    def _sock(self) -> Any:
        return self._own_sock if self._parser is None else self._parser._sock

    @property
    def message_complete(self) -> bool:
        return self._done if self._parser is None else bool(self._parser.message_complete)

    def get(self, key: str, default: Any = None) -> Any:
        if self._parser is not None:
            return self._parser.get(key, default)
        value = self._fields.get(key.lower())
        if value is None:
            return default
        return list(value) if isinstance(value, list) else value  # the headers are shared (plain_head): a copy

    def feed(self, data: bytes) -> None:
        self._parsed().feed(data)

    def readline(self, sep: bytes = b"\r\n") -> bytes:
        """As the parser's response's; once the message ended, from the body buffer alone (no parser is built)."""
        if self._parser is not None or not self._done:
            return self._parsed().readline(sep)  # type: ignore[no-any-return]
        buffer = self._body_buffer
        end = buffer.find(sep)
        if end < 0:
            return b""
        line = bytes(buffer[: end + len(sep)])
        del buffer[: end + len(sep)]
        return line

    def finish(self) -> bool:
        """The last chunk came, alone (:class:`~locust_llm.http.chunked.Unchunker`): the message is complete and
        the connection goes back to the pool. False when the parser reads the body (the caller hands it over)."""
        if self._parser is not None:
            return False
        self._done = True
        sock, self._own_sock = self._own_sock, None
        if sock is not None:
            self._pool.return_socket(sock)
        return True

    def release(self) -> None:
        """As the parser's response: an unfinished message's connection is closed, its pool slot freed."""
        if self._parser is not None:
            self._parser.release()
            return
        sock, self._own_sock = self._own_sock, None
        if sock is not None:
            self._pool.release_socket(sock)

    def __del__(self) -> None:
        if self._parser is None and self._own_sock is not None:
            self._pool.release_socket(self._own_sock)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in StreamResponse.__slots__:
            raise AttributeError(name)
        return getattr(self._parsed(), name)

    def _parsed(self) -> Any:
        """``geventhttpclient``'s response, built on first use from the head (and the last chunk, once the message
        ended), sharing this body buffer; it owns the connection from then on (none once released or finished)."""
        parser = self._parser
        if parser is None:
            sock, pool = self._own_sock, self._pool
            end = b"0\r\n\r\n" if self._done else b""
            if sock is None:  # never read: the parser is given the head (and end), and its release is a no-op
                sock, pool = _SPENT, None
            parser = HTTPSocketPoolResponse(sock, pool, pre_buffered=self._head + end, **self._kwargs)
            if sock is _SPENT:
                parser._sock = parser._pool = None
            parser._body_buffer = self._body_buffer
            self._own_sock = None
            self._parser = parser
        return parser

    def __repr__(self) -> str:
        return f"<StreamResponse status=200 headers={dict(self._fields)}>"


_SPENT = object()
"""Stands for the socket of a response built after its connection was released or given back: never read."""
