"""The chunked body of a plain-HTTP stream, unframed by us instead of by geventhttpclient's parser.

:class:`Unchunker` takes the usual framing (``<hex size>\\r\\n<data>\\r\\n``, any split across reads) and hands
everything else to the parser from the current chunk's size line, taking out what it already delivered: every byte
sequence, in any split, leaves the body buffer, the parser and any ``HTTPParseError`` as the parser alone would. This
holds because the parser has seen exactly the head (:func:`locust_llm.http.post.post`).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["CHUNK_LIMIT", "SIZES", "SIZE_LINES", "Unchunker"]

CHUNK_LIMIT = 1 << 20
"""A chunk larger than this is left to the parser (its bytes would otherwise be held until it is complete)."""

SIZES = 4096
SIZE_LINES = tuple(b"%x\r" % size for size in range(SIZES))
"""``SIZE_LINES[n]``: how a chunk of ``n`` bytes (fewer than :data:`SIZES`) starts, its size in lower-case hex
without leading zeros, up to the ``\r`` of its line: the pump's single-token read (:mod:`.pump`) looks its size line up
here instead of formatting one per token."""

_SIZE = re.compile(rb"([0-9a-fA-F]{1,16})\r\n")
_PARTIAL_SIZE = re.compile(rb"[0-9a-fA-F]{0,16}\r?")


class Unchunker:
    """Unframe a chunked body for ``response`` (a ``geventhttpclient`` response whose parser has read the head)."""

    __slots__ = ("_feed", "_finish", "buffer", "chunk_raw", "delivered", "handed", "left", "tail")

    def __init__(self, response: Any) -> None:
        self._feed = response.feed
        self._finish = getattr(response, "finish", None)
        """Ends the message at a last chunk that came alone (:class:`~locust_llm.http.head.StreamResponse`)."""
        self.buffer: bytearray = response._body_buffer
        self.handed = False
        """The parser reads the rest of the body."""
        self.chunk_raw = b""
        """The bytes of the current chunk so far, from its size line (empty at a chunk boundary)."""
        self.left = 0
        """Data bytes of the current chunk still to come."""
        self.tail = b""
        """What is still to come of the ``\\r\\n`` after the current chunk's data (empty: none expected)."""
        self.delivered = 0
        """Data bytes of the current chunk already delivered."""

    @property
    def at_boundary(self) -> bool:
        """The next byte the parser has not seen starts a chunk's size line, and the parser reads nothing yet."""
        return not self.chunk_raw and not self.handed

    def unframe(self, data: bytes) -> bytes:
        """The body bytes in ``data``, to be appended to the body buffer (anything handed over is in the buffer
        already, in order). Raises what the parser raises when it is handed invalid framing."""
        if self.handed:
            self._feed(data)
            return b""
        piece = self.whole(data)
        return self._slow(data) if piece is None else piece

    def whole(self, data: bytes) -> bytes | None:
        """A single-token read: when ``data`` is exactly one whole chunk (not the last) and a chunk boundary comes
        before it, its body; else ``None``, and nothing was consumed (:meth:`unframe` it)."""
        if not self.at_boundary:
            return None
        m = _SIZE.match(data)
        if m is None:
            return None
        start = m.end()
        end = start + int(m[1], 16)
        if end + 2 != len(data) or end == start or data[end:] != b"\r\n":
            return None
        return data[start:end]

    def end_of_file(self) -> None:
        """The peer closed the connection: the parser gets what it has not seen (and judges it)."""
        if not self.handed:
            self._hand_over(b"")

    def _slow(self, data: bytes) -> bytes:
        parts: list[bytes] = []
        pos, n = 0, len(data)
        while pos < n:
            if self.tail:  # the CRLF after a chunk's data
                want = self.tail[: n - pos]
                if data[pos : pos + len(want)] != want:
                    return self._hand_over_within(parts, data[pos:])
                self.chunk_raw += want
                self.tail = self.tail[len(want) :]
                pos += len(want)
                if not self.tail:
                    self.chunk_raw, self.delivered = b"", 0
            elif self.left:  # the current chunk's data
                piece = data[pos : pos + self.left]
                parts.append(piece)
                self.chunk_raw += piece
                self.left -= len(piece)
                self.delivered += len(piece)
                pos += len(piece)
                if not self.left:
                    self.tail = b"\r\n"
            else:  # a size line, perhaps continued from the last read
                line = self.chunk_raw + data[pos:]
                m = _SIZE.match(line)
                if m is None:
                    if len(line) <= 17 and _PARTIAL_SIZE.fullmatch(line):
                        self.chunk_raw = line  # wait for the rest of the line
                        break
                    return self._hand_over_within(parts, data[pos:])
                size = int(m[1], 16)
                if size == 0 and line[m.end() :] == b"\r\n" and self._finish is not None and self._finish():
                    self.handed = True  # the message ended: nothing more is read
                    break
                if size == 0 or size > CHUNK_LIMIT:
                    return self._hand_over_within(parts, data[pos:])
                pos += m.end() - len(self.chunk_raw)
                self.chunk_raw, self.left, self.delivered = line[: m.end()], size, 0
        return b"".join(parts)

    def _hand_over_within(self, parts: list[bytes], rest: bytes) -> bytes:
        """Deliver ``parts`` (read before this point), then hand over from the current chunk's size line."""
        self.buffer += b"".join(parts)
        self._hand_over(rest)
        return b""

    def _hand_over(self, rest: bytes) -> None:
        """Feed the parser the current chunk from its size line, then ``rest``; drop the data bytes it delivers a
        second time."""
        self.handed = True
        buffer = self.buffer
        mark, again = len(buffer), self.delivered
        replay, self.chunk_raw = self.chunk_raw, b""
        if not replay and not rest:
            return  # nothing unseen (b"" would tell the parser the file ended; the reader that reads on says so)
        try:
            self._feed(replay + rest)
        finally:  # also when it raised: the replayed part was accepted before, so it was delivered whole again
            if again:
                del buffer[mark : mark + again]
