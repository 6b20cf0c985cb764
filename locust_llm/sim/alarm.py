"""A one-shot alarm at an absolute ``time.monotonic_ns()`` instant, precise to tens of microseconds on Linux.

asyncio's and uvloop's timers have millisecond resolution; on Linux the alarm is a ``timerfd`` armed at an absolute
``CLOCK_MONOTONIC`` time and watched by the loop's ``add_reader``. Elsewhere it falls back to ``loop.call_at``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import sys
from collections.abc import Callable

__all__ = ["Alarm"]

_CLOCK_MONOTONIC = 1
_TFD_NONBLOCK = 0o4000
_TFD_CLOEXEC = 0o2000000
_TFD_TIMER_ABSTIME = 1


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.timerfd_create, libc.timerfd_settime  # noqa: B018 - both must exist
    except (OSError, AttributeError):
        return None
    # declared once, so that a call converts nothing it need not (the alarm is re-armed after every step)
    libc.timerfd_settime.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    return libc


_LIBC = _libc()


class Alarm:
    """Calls ``callback`` once at the instant given to :meth:`arm` (re-arming replaces it); :meth:`cancel` disarms."""

    def __init__(self, loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
        self.loop = loop
        self.callback = callback
        self._handle: asyncio.TimerHandle | None = None
        self._fd = -1
        self._spec = _Itimerspec()  # re-armed in place: its it_value is set, its it_interval stays zero
        self._spec_at = ctypes.addressof(self._spec)
        if _LIBC is not None:
            fd = _LIBC.timerfd_create(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC)
            if fd >= 0:
                self._fd = fd
                loop.add_reader(fd, self._ring)

    @property
    def precise(self) -> bool:
        """True when backed by a timerfd."""
        return self._fd >= 0

    def arm(self, at_ns: int) -> None:
        if self._fd >= 0:
            self._settime(max(1, at_ns))
        else:
            if self._handle is not None:
                self._handle.cancel()
            self._handle = self.loop.call_at(at_ns / 1e9, self._timeout)

    def cancel(self) -> None:
        if self._fd >= 0:
            self._settime(0)  # an it_value of zero disarms
        elif self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def close(self) -> None:
        self.cancel()
        if self._fd >= 0:
            with contextlib.suppress(Exception):
                self.loop.remove_reader(self._fd)
            os.close(self._fd)
            self._fd = -1

    def _settime(self, at_ns: int) -> None:
        value = self._spec.it_value
        value.tv_sec, value.tv_nsec = divmod(at_ns, 1_000_000_000)
        assert _LIBC is not None
        if _LIBC.timerfd_settime(self._fd, _TFD_TIMER_ABSTIME, self._spec_at, None) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"timerfd_settime: {os.strerror(err)}")

    def _ring(self) -> None:
        try:
            os.read(self._fd, 8)
        except BlockingIOError:
            return  # re-armed or disarmed after it turned readable
        self.callback()

    def _timeout(self) -> None:
        self._handle = None
        self.callback()
