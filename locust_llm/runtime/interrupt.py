"""Ctrl-C ends the run from the main greenlet, whichever greenlet is running when it comes.

Under gevent ``KeyboardInterrupt`` is raised in whatever greenlet runs at SIGINT, killing it halfway (a preflight
taken for a failure, a request half filed). :func:`route_sigint_to_main` raises it in the main greenlet only, where
Locust waits ready to shut down; the greenlet that happened to run goes on.
"""

from __future__ import annotations

import signal
from types import FrameType

import gevent
import greenlet

__all__ = ["route_sigint_to_main"]


def route_sigint_to_main() -> bool:
    """Install the handler (module docstring), from the main greenlet, unless SIGINT already has a handler other
    than Python's default. Returns whether it was installed."""
    main = greenlet.getcurrent()
    if main.parent is not None or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return False

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        if greenlet.getcurrent() is main:
            raise KeyboardInterrupt
        gevent.get_hub().loop.run_callback(main.throw, KeyboardInterrupt)

    signal.signal(signal.SIGINT, on_sigint)
    return True
