"""The CPU share of this process, sampled once a second, for a step's health."""

from __future__ import annotations

import time

import psutil

__all__ = ["CpuSampler"]


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
