"""Ctrl-C ends the run from the main greenlet, whichever greenlet is running when it comes.

Python raises ``KeyboardInterrupt`` in the code that runs when SIGINT arrives. Under gevent that can be any
greenlet, which is then killed halfway through what it was doing (the shape's greenlet in the middle of the
preflight request or a step change, a user in the middle of filing a request) before gevent passes the interrupt
on: a Ctrl-C at the start of a run was seen to exit 2 (the interrupted preflight taken for a failure) instead of
0, in 2 of 10 tries. :func:`route_sigint_to_main` installs a handler that raises it in the main greenlet only
(where Locust waits, ready to shut down): at once when the main greenlet is running, else from the next turn of
gevent's loop; the greenlet that happened to run goes on.
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
