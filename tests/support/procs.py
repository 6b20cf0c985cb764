"""Real processes on 127.0.0.1 for integration tests: Locust runs, the simulator, small misbehaving servers."""

from __future__ import annotations

import csv
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOCUSTFILE = ROOT / "locustfile.py"


def default_sigint() -> None:
    """A child's ``preexec_fn``: SIGINT at its default, whatever the test run's (a suite started in the background
    by a shell ignores SIGINT, and its children inherit that: they could not be interrupted)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOCUST_", "OPENAI_"))}
    env.update(extra)
    return env


def run_locust(
    *args: str, cwd: Path, timeout_s: float = 180, env: dict[str, str] | None = None, locustfile: Path = LOCUSTFILE
):
    cmd = [sys.executable, "-m", "locust", "-f", str(locustfile), *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout_s, env=env or clean_env())


@contextmanager
def server(*cmd: str, ready: str = r"listening on (http://\S+)", timeout_s: float = 30) -> Iterator[str]:
    """Start ``cmd``, wait for a line matching ``ready`` on stdout, yield its URL, stop it afterwards."""
    proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        deadline = time.monotonic() + timeout_s
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"{cmd} exited with {proc.wait()} before it was ready")
            match = re.search(ready, line)
            if match:
                yield match.group(1)
                break
        else:
            raise RuntimeError(f"{cmd} was not ready within {timeout_s} s")
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def sim(*args: str):
    return server(sys.executable, "-m", "locust_llm.sim", "--port", "0", *args)


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def free_port() -> int:
    """A port free right now (for Locust's master, which cannot bind to port 0 and say which port it got)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def distributed_run(
    tmp_path: Path, host: str, workers: int, sweep: tuple[str, ...], kill_worker_after_s: float | None = None
) -> tuple[int, str, str]:
    """A headless master and ``workers`` real worker processes on 127.0.0.1 running ``sweep`` against ``host``, with
    ``--csv tmp_path/run``; optionally SIGKILL the first worker after a while. Returns the master's exit code,
    stdout and stderr; every process is gone afterwards."""
    port = free_port()
    locust = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE)]
    master = subprocess.Popen(
        [*locust, "--master", "--headless", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
         "--expect-workers", str(workers), "--host", host, "--csv", str(tmp_path / "run"), *sweep],
        cwd=tmp_path, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    procs = [
        subprocess.Popen([*locust, "--worker", "--master-host", "127.0.0.1", "--master-port", str(port)],
                         cwd=tmp_path, env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(workers)
    ]  # fmt: skip
    try:
        if kill_worker_after_s is not None:
            time.sleep(kill_worker_after_s)
            procs[0].send_signal(signal.SIGKILL)
        out, err = master.communicate(timeout=150)
    finally:
        for proc in (master, *procs):
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    return master.returncode, out, err
