"""Shared pieces of the benchmarks: CPU pinning, per-process CPU time, starting servers, a table printer."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from locust_llm.sim.realtime import PRIORITY
from locust_llm.sim.realtime import allowed as realtime_allowed

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
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


def wait_s(pid: int) -> float:
    """Seconds process ``pid``'s main thread has been ready to run while another task had its core, since it
    started (the second field of ``/proc/PID/schedstat``; 0 where there is none). Under normal scheduling the
    kernel's own threads take a busy core for milliseconds at a time (``locust_llm/sim/realtime.py``)."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


SCHED_CHOICES = ("auto", "fifo", "normal")
SCHED_HELP = (
    "How the server runs: fifo (real-time, its --realtime; the ideal writer too), normal, or auto (fifo "
    "when this user may and the server has a core of its own, else normal; default). Under normal "
    "scheduling the kernel's threads take the server's core for milliseconds at a time "
    "(server_wait_pct)."
)


def realtime_wanted(choice: str, own_core: bool = True) -> bool:
    """``--sched``: whether the servers run real-time. Only on a core of their own (``own_core``: a real-time server
    sharing a core with its client would starve it); ``fifo`` where that or this user's rights forbid is an error."""
    if choice == "normal":
        return False
    if not own_core:
        if choice == "fifo":
            raise SystemExit(
                "error: --sched fifo: the server needs a core of its own (this process may use one "
                "core); use --sched normal or auto"
            )
        return False
    allowed = realtime_allowed()
    if choice == "fifo" and not allowed:
        raise SystemExit(
            "error: --sched fifo: this user may not use SCHED_FIFO (needs root, CAP_SYS_NICE or "
            "ulimit -r >= 1); use --sched normal or auto"
        )
    return allowed


@contextmanager
def realtime_here(on: bool) -> Iterator[None]:
    """This thread under SCHED_FIFO at the simulator's ``--realtime`` priority while inside, when ``on``."""
    if not on:
        yield
        return
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(PRIORITY))
    try:
        yield
    finally:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


def quantile(values: list[int], q: float) -> float:
    """The ``q`` quantile of sorted ``values`` (nanoseconds), in ms."""
    return values[min(len(values) - 1, int(q * len(values)))] / 1e6


def chat_user_cmd(
    locustfile: Path, url: str, model: str, streams: int, seconds: float, warmup_s: float, max_tokens: int, csv: str
) -> list[str]:
    """A headless locust-llm run of ``locustfile``'s users: ``streams`` users for one step of ``seconds`` against
    ``url``'s ``model``, its CSVs at ``csv``."""
    return [
        PY,
        "-m",
        "locust",
        "-f",
        str(locustfile),
        "--headless",
        "--host",
        url,
        "--model",
        model,
        "--steps",
        str(streams),
        "--step-duration",
        f"{seconds}s",
        "--warmup",
        f"{warmup_s}s",
        "--max-tokens",
        str(max_tokens),
        "--csv",
        csv,
        "--only-summary",
    ]


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
