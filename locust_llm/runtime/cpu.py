"""This process's resources: its CPU share, sampled once a second for a step's health, and the memory it freed,
given back to the system once a minute (glibc keeps freed heap pages, so a night's churn of step rows and histogram
tables would otherwise stay in its RSS)."""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable

import psutil

__all__ = ["CpuSampler", "give_back_memory"]

_MALLOC_TRIM: Callable[[int], int] | None
try:
    _MALLOC_TRIM = ctypes.CDLL("libc.so.6").malloc_trim
except (OSError, AttributeError):  # not glibc: nothing to give back this way
    _MALLOC_TRIM = None


def give_back_memory() -> bool:
    """Return the heap's free pages to the system (glibc's ``malloc_trim(0)``, 10 ms for 200 MB); False without
    glibc."""
    if _MALLOC_TRIM is None:
        return False
    _MALLOC_TRIM(0)
    return True


class CpuSampler:
    """CPU % of this process since the previous sample (100 % = one core)."""

    def __init__(self) -> None:
        self._process = psutil.Process()
        self._last = (time.monotonic(), self._cpu_s())

    def _cpu_s(self) -> float:
        times = self._process.cpu_times()
        return float(times.user + times.system)

    def sample(self) -> float:
        now, cpu = time.monotonic(), self._cpu_s()
        last_t, last_cpu = self._last
        self._last = (now, cpu)
        return 100.0 * (cpu - last_cpu) / max(1e-6, now - last_t)
