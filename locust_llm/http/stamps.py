"""The kernel's receive times of a socket's bytes (Linux ``SO_TIMESTAMPNS``). Pure: sockets and bytes.

A socket asks once (:func:`kernel_stamps`); each read is then a ``recvmsg`` with room for :data:`CMSG_BYTES` of
ancillary data, from which :func:`received_ns` takes the time on ``perf_counter_ns``'s clock.
"""

from __future__ import annotations

import socket
import struct
import sys
import weakref
from typing import Any

__all__ = ["CMSG_BYTES", "SO_TIMESTAMPNS", "kernel_stamps", "received_ns"]

_TIMESPEC = struct.Struct("@ll")  # struct timespec: seconds, nanoseconds
_unpack_timespec = _TIMESPEC.unpack
SO_TIMESTAMPNS: int | None = 35 if sys.platform.startswith("linux") and _TIMESPEC.size == 16 else None
"""Linux's option (and its control message's type) for the kernel's receive time of a read's bytes, as a 64-bit
kernel numbers it (Python's ``socket`` does not name it); ``None`` elsewhere."""
CMSG_BYTES = socket.CMSG_SPACE(_TIMESPEC.size) if SO_TIMESTAMPNS is not None else 0
"""Room for a read's receive time in ``recvmsg``'s ancillary data."""


def kernel_stamps(raw: Any) -> bool:
    """Ask the kernel to stamp the bytes that ``raw`` (an OS socket) receives with their time of arrival
    (``SO_TIMESTAMPNS``, Linux); False where it cannot. A socket is asked once: a kept-alive
    connection serves many requests, and both the head's read and the pump's would otherwise ask for each."""
    if SO_TIMESTAMPNS is None:
        return False
    if raw in _ASKED:
        return True
    try:
        raw.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    _ASKED.add(raw)
    return True


_ASKED: weakref.WeakSet[Any] = weakref.WeakSet()
"""The OS sockets that asked for receive times (:func:`kernel_stamps`)."""


def received_ns(ancillary: list[tuple[int, int, bytes]], offset: int) -> int | None:
    """The ``clock()`` time at which the kernel received a read's last bytes, from the read's ancillary data (a
    ``recvmsg`` of a socket :func:`kernel_stamps` set up): their wall-clock time less ``offset`` (a turn's, see
    :func:`~locust_llm.http.loop.loop_turn`); ``None`` when the data holds no such time."""
    if ancillary:
        _level, kind, data = ancillary[0]
        if kind == SO_TIMESTAMPNS and len(data) == _TIMESPEC.size:
            seconds, nanoseconds = _unpack_timespec(data)
            stamp: int = seconds * 1_000_000_000 + nanoseconds - offset
            return stamp
    return None
