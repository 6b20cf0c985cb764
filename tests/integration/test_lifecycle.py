"""The embedded simulator never outlives Locust; bad flags stop the run before it starts."""

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from tests.support.procs import LOCUSTFILE, clean_env, default_sigint, run_locust


def sims_of(pid):
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info["cmdline"] or []
        if "locust_llm.sim" in cmd and "--parent-pid" in cmd and cmd[cmd.index("--parent-pid") + 1] == str(pid):
            found.append(proc)
    return found


def wait_for(predicate, timeout_s=15.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def start_locust(tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(LOCUSTFILE),
        "--headless",
        "--steps",
        "2",
        "--step-duration",
        "60s",
    ]
    return subprocess.Popen(
        cmd,
        cwd=tmp_path,
        env=clean_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )


@pytest.mark.slow  # a real run, stopped by each signal
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_simulator_stops_with_locust(tmp_path, sig):
    proc = start_locust(tmp_path)
    try:
        assert wait_for(lambda: sims_of(proc.pid)), "the embedded simulator did not start"
        time.sleep(1.0)
        os.kill(proc.pid, sig)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail(f"Locust still ran 30 s after {sig!r}; its log ends:\n{proc.communicate()[1][-3000:]}")
        assert wait_for(lambda: not sims_of(proc.pid)), f"simulator outlived Locust after {sig!r}"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stderr.close()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--steps", "8,16,16"], "locust-llm: error: --steps must be strictly increasing, got 8,16,16"),
        (["--step-duration", "fast"], "locust-llm: error: --step-duration must be a positive duration"),
        (
            ["--model", "grok-4"],
            "locust-llm: error: --model grok-4 was given without --host, and the embedded simulator serves sim-llm",
        ),
        (["--host", "http://127.0.0.1:9/v1"], "locust-llm: error: --model is required with --host"),
        (["--sim-args", "--capacity 0"], "locust-llm: error: the embedded simulator exited with code"),
    ],
)
def test_bad_flags_exit_2_with_one_line(tmp_path, args, message):
    proc = run_locust("--headless", *args, cwd=tmp_path, timeout_s=60)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("locust-llm: error:")]
    assert len(lines) == 1 and lines[0].startswith(message), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
