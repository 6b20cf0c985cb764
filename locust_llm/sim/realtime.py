"""Real-time scheduling for the simulator's process (``locust-llm sim --realtime``).

``SCHED_FIFO`` priority 1 lets other tasks run on the simulator's core only while it sleeps between steps; children
start normal. A refusal raises :class:`RealtimeRefused` with what is needed: the simulator exits rather than serve
with other timing than asked.
"""

from __future__ import annotations

import os
import subprocess
import sys

__all__ = ["PRIORITY", "RealtimeRefused", "allowed", "policy", "request"]

PRIORITY = 1
"""The real-time priority asked for: the lowest (module docstring)."""

_NAMES = {"SCHED_OTHER": "normal", "SCHED_BATCH": "batch", "SCHED_IDLE": "idle", "SCHED_FIFO": "fifo", "SCHED_RR": "rr"}


class RealtimeRefused(RuntimeError):
    """The kernel (or the platform) refused real-time scheduling; the message is one line for the user."""


def request() -> None:
    """Put this process's thread under ``SCHED_FIFO`` at :data:`PRIORITY`, its children to start normal (module
    docstring). Threads it starts afterwards inherit the policy."""
    setter = getattr(os, "sched_setscheduler", None)
    if setter is None or not hasattr(os, "SCHED_FIFO"):
        raise RealtimeRefused("--realtime: this platform has no SCHED_FIFO scheduling (Linux only)")
    flags = os.SCHED_FIFO | getattr(os, "SCHED_RESET_ON_FORK", 0)
    try:
        setter(0, flags, os.sched_param(PRIORITY))
    except OSError as exc:
        raise RealtimeRefused(
            f"--realtime: the kernel refused SCHED_FIFO priority {PRIORITY} ({exc.strerror or exc}); it needs root, "
            "CAP_SYS_NICE or an RLIMIT_RTPRIO of at least 1 (ulimit -r)"
        ) from None


def allowed() -> bool:
    """Whether this user may put a process under ``SCHED_FIFO`` at :data:`PRIORITY`: a child process tries, so this
    one's policy stays as it is."""
    if not hasattr(os, "SCHED_FIFO"):
        return False
    probe = f"import os; os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param({PRIORITY}))"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0


def policy() -> str:
    """This thread's scheduling policy, as ``/sim/stats`` shows it: ``fifo``, ``rr``, ``normal``, ``batch``,
    ``idle``, or ``unknown`` where the platform cannot say."""
    getter = getattr(os, "sched_getscheduler", None)
    if getter is None:
        return "unknown"
    value = getter(0) & ~getattr(os, "SCHED_RESET_ON_FORK", 0)
    return next((word for name, word in _NAMES.items() if getattr(os, name, None) == value), "unknown")
