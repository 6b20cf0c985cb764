"""Real-time scheduling for the simulator's process (``locust-llm sim --realtime``).

Under the kernel's normal scheduling, any task woken on the simulator's core runs at once, for as long as its work
takes, even while a step's writes wait: a step's timing is then that task's. On this project's 2-core VM the tasks
were the kernel's own (2026-12-03, ``perf sched`` on the simulator's core at 512 streams: DAMON's ``kdamond`` ran
1.0-2.7 ms at a time about twice a second, a memory-management ``kworker`` once for 5.9 ms), and the simulator's
traced steps waited up to 4.6 ms for the core (``/proc/self/schedstat``), the writes of the steps that waited
setting its lateness p99 and max. Under ``SCHED_FIFO`` a normal task runs on that core only while the simulator
sleeps in its event loop, between steps; in the same traces no step waited more than 0.06 ms.

Rules:

- **Priority 1**, the lowest real-time one: the kernel's own real-time threads (migration, watchdogs) still come
  first, and the kernel's real-time throttling (``/proc/sys/kernel/sched_rt_runtime_us``, 95 % of each second by
  default) leaves the rest to other tasks should the simulator ever stay busy. Give it a core of its own anyway:
  a busy real-time process starves the normal ones that share its core.
- **Children start normal** (``SCHED_RESET_ON_FORK``): nothing the simulator starts inherits the policy.
- **Asked for, never assumed.** A refusal (no root, no ``CAP_SYS_NICE``, an ``RLIMIT_RTPRIO`` of 0, or a platform
  without ``SCHED_FIFO``) raises :class:`RealtimeRefused` with one line saying what was refused and what is needed;
  the simulator then exits rather than serve with timing other than asked for.
"""

from __future__ import annotations

import os
import subprocess
import sys

__all__ = ["PRIORITY", "RealtimeRefused", "allowed", "policy", "request"]

PRIORITY = 1
"""The real-time priority asked for: the lowest (module docstring)."""

_NAMES = {"SCHED_OTHER": "normal", "SCHED_BATCH": "batch", "SCHED_IDLE": "idle", "SCHED_FIFO": "fifo",
          "SCHED_RR": "rr"}  # fmt: skip


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
