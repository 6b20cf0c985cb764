"""Real processes on 127.0.0.1 for integration tests: Locust runs, the simulator, small misbehaving servers."""

from __future__ import annotations

import csv
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parents[2]
LOCUSTFILE = ROOT / "locustfile.py"

T = TypeVar("T")


def at_once(jobs: dict[str, Callable[[], T]]) -> dict[str, T]:
    """Run ``jobs`` (each a light end-to-end run: a few users, its own simulator) at the same time, each in a thread
    of its own (they wait on subprocesses); their results by name. After every job has ended, the exception of the
    first in ``jobs``' order that raised is raised here. For a module's runs that are compared with each other, at
    once also means under the same machine state rather than its stalls at different times."""
    timings = os.environ.get("LOCUST_LLM_TEST_TIMINGS")  # a file to append each job's seconds to (the suite's budget)

    def timed(name: str, job: Callable[[], T]) -> T:
        started = time.monotonic()
        try:
            return job()
        finally:
            if timings:
                with open(timings, "a") as out:
                    out.write(f"{name}\t{time.monotonic() - started:.1f}\n")

    with ThreadPoolExecutor(len(jobs)) as pool:
        futures = {name: pool.submit(timed, str(name), job) for name, job in jobs.items()}
    return {name: future.result() for name, future in futures.items()}


def default_sigint() -> None:
    """A child's ``preexec_fn``: SIGINT at its default, whatever the test run's (a suite started in the background
    by a shell ignores SIGINT, and its children inherit that: they could not be interrupted)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


TEST_VALIDITY = {"LOCUST_LLM_MAX_SCHED_LAG": "1s", "LOCUST_LLM_MAX_GENERATOR_CPU": "100"}
"""How the tests' runs judge their own generator (a test that checks these rules passes its own flags). The runs of
the end-to-end tests check behaviour, counts and medians against a known truth, none of which a stall of this shared
machine changes: it delays sends (the scheduling lag) and fills a CPU sample, and the run would call the step
invalid for it, so at the defaults (10 ms, 80 %) a test would fail for the machine, not the code. A lag p99 of 1 s is
longer than any test step's warm-up, which is what the lag rule protects. The rules themselves are tested apart
(tests/unit/measure/test_health.py, tests/unit/runtime/test_collector.py), the generator's accuracy by the bench."""


PREFLIGHT_REQUESTS = 2
"""What a run sends to an endpoint before any load, in no measurement: the preflight request and, after it succeeded,
``--output-length auto``'s one question whether the server honours ``min_tokens``."""


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOCUST_", "OPENAI_"))}
    env.update(TEST_VALIDITY)
    env.update(extra)
    return env


# the reasons a step is invalid because the shared 2-core machine stalled the generator, not because of what it ran
_DISTURBANCE = re.compile(r"(step \d+: )?(generator saturated: |scheduling lag p99 )")


def disturbed(code: int, stdout: str) -> bool:
    """Whether a run's own verdict is "exit 3, the measurement is invalid" for machine disturbance alone: every
    reason it names is a saturated generator or a scheduling lag (a stall of the machine), none a lost worker, a
    too-short step or a failed search, which are what a test may be checking."""
    verdict = re.search(r"verdict: exit 3, the measurement is invalid: (.*)", stdout)
    return code == 3 and verdict is not None and disturbance_only(verdict.group(1))


def accepted(code: int, stdout: str) -> bool:
    """A run a test may read: exit 0, or exit 3 for machine disturbance alone (:func:`disturbed`); never exit 3 for
    anything else (a lost worker, a too-short step, no success), which is what a test may be checking."""
    return code == 0 or disturbed(code, stdout)


def disturbance_only(reasons: str) -> bool:
    """Whether ``reasons`` (joined by ``"; "``, as in a step row's ``invalid_reasons``) are all a stall of the machine
    (a saturated generator, a scheduling lag), and there is at least one."""
    return bool(reasons) and all(_DISTURBANCE.match(r) for r in reasons.split("; "))


def run_locust(
    *args: str, cwd: Path, timeout_s: float = 180, env: dict[str, str] | None = None, locustfile: Path = LOCUSTFILE
) -> subprocess.CompletedProcess[str]:
    """One Locust run (never run again)."""
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
    tmp_path: Path,
    host: str,
    workers: int,
    sweep: tuple[str, ...],
    kill_worker_at_step: int | None = None,
    signals: tuple[tuple[int, int], ...] = (),
    late_worker_at_step: int | None = None,
) -> tuple[int, str, str]:
    """A headless master and ``workers`` real worker processes on 127.0.0.1 running ``sweep`` against ``host``, with
    ``--csv tmp_path/run``; optionally SIGKILL the first worker two seconds into step ``kill_worker_at_step``, or send
    it each ``(step, signal)`` of ``signals`` two seconds into that step, or start one more worker two seconds into
    step ``late_worker_at_step`` (when the master's log says the step began: whatever the start-up took). Returns the
    master's exit code, stdout and stderr; every process is gone afterwards."""
    if kill_worker_at_step is not None:
        signals = ((kill_worker_at_step, signal.SIGKILL),)
    port = free_port()
    locust = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE)]
    master = subprocess.Popen(
        [
            *locust,
            "--master",
            "--headless",
            "--master-bind-host",
            "127.0.0.1",
            "--master-bind-port",
            str(port),
            "--expect-workers",
            str(workers),
            "--host",
            host,
            "--csv",
            str(tmp_path / "run"),
            *sweep,
        ],
        cwd=tmp_path,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    logs = [(tmp_path / f"worker{i}.log").open("w") for i in range(workers)]  # each worker's output, to read after
    procs = [
        subprocess.Popen(
            [*locust, "--worker", "--master-host", "127.0.0.1", "--master-port", str(port)],
            cwd=tmp_path,
            env=clean_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        for log in logs
    ]
    try:
        seen: list[str] = []
        assert master.stderr is not None
        actions: list[tuple[int, int | None]] = [*signals]
        if late_worker_at_step is not None:
            actions.append((late_worker_at_step, None))
        for step, sent in actions:
            marker = f"locust-llm step {step}/"
            for line in master.stderr:  # the master's log, as it comes, until the step begins
                seen.append(line)
                if marker in line and " done:" not in line:
                    time.sleep(2.0)
                    if sent is None:
                        log = (tmp_path / f"worker{len(procs)}.log").open("w")
                        logs.append(log)
                        worker = [*locust, "--worker", "--master-host", "127.0.0.1", "--master-port", str(port)]
                        procs.append(
                            subprocess.Popen(
                                worker, cwd=tmp_path, env=clean_env(), stdout=log, stderr=subprocess.STDOUT
                            )
                        )
                    else:
                        procs[0].send_signal(sent)
                    break
        out, err = master.communicate(timeout=150)
        err = "".join(seen) + err
    finally:
        for proc in (master, *procs):
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        for log in logs:
            log.close()
    return master.returncode, out, err
