"""Endpoints that fail in the ways real ones do: each becomes a classified failure and the run completes."""

import socket
import sys

import pytest

from tests.support.procs import clean_env, read_csv, run_locust, server

KEY = "sk-test-RECOGNISABLE-0123456789"


def short_run(host, tmp_path, *extra):
    return run_locust(
        "--headless",
        "--csv",
        str(tmp_path / "run"),
        "--host",
        host,
        "--model",
        "m",
        "--steps",
        "2",
        "--step-duration",
        "3s",
        "--request-timeout",
        "10s",
        *extra,
        cwd=tmp_path,
        env=clean_env(OPENAI_API_KEY=KEY),
    )


def failures(tmp_path):
    return {r["Error"]: int(r["Occurrences"]) for r in read_csv(tmp_path / "run_failures.csv")}


def check_finished_with(proc, tmp_path, needle):
    assert proc.returncode == 1, proc.stderr[-3000:]  # Locust's exit code when requests failed
    assert "Traceback" not in proc.stderr
    errors = failures(tmp_path)
    assert any(needle in e for e in errors), errors
    assert KEY not in proc.stdout + proc.stderr
    assert all(KEY not in p.read_text() for p in tmp_path.glob("run*.csv"))


def test_unreachable_host(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before the run: nothing listens there
    proc = short_run(f"http://127.0.0.1:{port}/v1", tmp_path)
    check_finished_with(proc, tmp_path, "connection error: Connection refused (before any response)")


@pytest.mark.parametrize(
    ("mode", "needle"),
    [
        ("unauthorized", 'HTTP 401 Unauthorized: {"error": {"message": "Incorrect API key provided: ***."'),
        ("cut", "(mid-stream)"),
        ("json200", "not an SSE stream: HTTP 200 with Content-Type 'application/json'"),
    ],
)
def test_misbehaving_servers(tmp_path, mode, needle):
    with server(sys.executable, "-m", "tests.support.bad_server", mode) as url:
        proc = short_run(url, tmp_path)
    check_finished_with(proc, tmp_path, needle)
