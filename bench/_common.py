"""Shared pieces of the benchmarks: CPU pinning, per-process CPU time, starting servers, a table printer."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def steal_s(core: int | None, stat: str | None = None) -> float:
    """CPU seconds the hypervisor has taken from ``core`` (every core when ``None``) since boot: the ``steal``
    column of ``/proc/stat`` (``stat``: its text, read when not given), 0 where there is none. A busy core whose
    host runs something else on it stalls for milliseconds at a time, which makes a server on it late whatever
    its design."""
    name = "cpu" if core is None else f"cpu{core}"
    text = Path("/proc/stat").read_text() if stat is None else stat
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == name:
            return int(fields[8]) / TICKS if len(fields) > 8 else 0.0
    return 0.0


def quantile(values: list[int], q: float) -> float:
    """The ``q`` quantile of sorted ``values`` (nanoseconds), in ms."""
    return values[min(len(values) - 1, int(q * len(values)))] / 1e6


def cores() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def pinned(cmd: list[str], core: int | None) -> list[str]:
    return ["taskset", "-c", str(core), *cmd] if core is not None and _has_taskset() else cmd


def _has_taskset() -> bool:
    return subprocess.run(["sh", "-c", "command -v taskset"], capture_output=True).returncode == 0


def start_server(cmd: list[str], core: int | None, timeout_s: float = 30) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(pinned(cmd, core), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
    deadline = time.monotonic() + timeout_s
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        match = re.search(r"listening on (https?://\S+)", line)
        if match:
            return proc, match.group(1)
        if not line:
            break
    proc.kill()
    raise RuntimeError(f"{cmd} did not start")


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def table(rows: list[dict[str, object]]) -> str:
    keys = list(rows[0])
    cells = [[str(r[k]) for k in keys] for r in rows]
    widths = [max(len(k), *(len(c[i]) for c in cells)) for i, k in enumerate(keys)]
    lines = ["  ".join(k.rjust(w) for k, w in zip(keys, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(lines)


PY = sys.executable
