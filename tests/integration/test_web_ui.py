"""The run from Locust's web UI: the embedded simulator is pre-filled as host, the shape starts from /swarm."""

import json
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

from tests.support.procs import LOCUSTFILE, clean_env

KEY = "sk-test-WEBUI-4242"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch(url, data=None, timeout=5):
    body = urllib.parse.urlencode(data).encode() if data is not None else None
    with urllib.request.urlopen(url, data=body, timeout=timeout) as resp:
        return resp.read().decode()


def test_web_ui_run_streams_and_never_shows_the_key(tmp_path):
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(LOCUSTFILE),
        "--web-host",
        "127.0.0.1",
        "--web-port",
        str(port),
        "--steps",
        "2",
        "--step-duration",
        "4s",
        "--max-tokens",
        "8",
        "--api-key",
        KEY,
    ]
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        page = None
        while page is None and time.monotonic() < deadline:
            try:
                page = fetch(base + "/")
            except OSError:
                time.sleep(0.2)
        assert page is not None, "web UI did not come up"
        assert KEY not in page
        assert "127.0.0.1" in page  # the embedded simulator's URL is offered as host
        started = json.loads(fetch(base + "/swarm", {}))
        assert started["success"], started
        rows = []
        while time.monotonic() < deadline:
            stats = json.loads(fetch(base + "/stats/requests"))
            rows = {(s["method"], s["name"]): s for s in stats["stats"]}
            if ("E2E", "sim-llm") in rows and rows[("E2E", "sim-llm")]["num_requests"] >= 2:
                break
            time.sleep(0.5)
        assert ("TTFT", "sim-llm") in rows and ("ITL", "sim-llm") in rows, rows.keys()
        assert rows[("E2E", "sim-llm")]["num_failures"] == 0
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert KEY not in out
    assert "Traceback" not in out
