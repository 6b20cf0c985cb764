"""Secrets stay at home: the master never sends the key or secret headers to its workers, which use their own."""

import json
import subprocess
import sys
import urllib.request

import pytest

from tests.support.procs import ROOT, clean_env, disturbed, free_port, server

pytestmark = pytest.mark.slow  # a real master and worker: deselected by -m 'not slow'

KEY, HEADER_SECRET = "sk-test-MASTER-ONLY-123456", "hk-SECRET-HEADER-98765"


def test_the_spawn_message_carries_no_secret_and_the_worker_still_authenticates(tmp_path):
    locustfile = str(ROOT / "tests" / "support" / "options_probe.py")
    port = free_port()
    with server(sys.executable, "-m", "tests.support.bad_server", "ok") as url:
        master = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "locust",
                "-f",
                locustfile,
                "--master",
                "--headless",
                "--master-bind-host",
                "127.0.0.1",
                "--master-bind-port",
                str(port),
                "--expect-workers",
                "1",
                "--host",
                url,
                "--model",
                "m",
                "--steps",
                "2",
                "--step-duration",
                "4s",
                "--warmup",
                "1s",
                "--min-step-requests",
                "1",
                "--api-key",
                KEY,
                "--header",
                f"X-Api-Key: {HEADER_SECRET}",
                "--header",
                "X-Team: llm",
                "--csv",
                str(tmp_path / "run"),
            ],
            cwd=tmp_path,
            env=clean_env(PROBE_DIR=str(tmp_path)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        worker_env = clean_env(
            PROBE_DIR=str(tmp_path), OPENAI_API_KEY=KEY, LOCUST_LLM_HEADERS=f"X-Api-Key: {HEADER_SECRET}"
        )
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "locust",
                "-f",
                locustfile,
                "--worker",
                "--master-host",
                "127.0.0.1",
                "--master-port",
                str(port),
            ],
            cwd=tmp_path,
            env=worker_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            out, err = master.communicate(timeout=90)
            worker_out, _ = worker.communicate(timeout=30)
        finally:
            for p in (master, worker):
                if p.poll() is None:
                    p.kill()
        with urllib.request.urlopen(url.rsplit("/v1", 1)[0] + "/seen", timeout=10) as resp:
            seen = json.load(resp)
    # what is checked here is what was sent, written and logged: a run whose figures the tool refused because this
    # shared machine stalled it (exit 3: a saturated generator or a scheduling lag) sent, wrote and logged it all
    assert master.returncode == 0 or disturbed(master.returncode, out), out[-2000:] + err[-3000:]
    probes = {p.name: json.loads(p.read_text()) for p in tmp_path.glob("options-*.json")}
    worker_options = probes[f"options-{worker.pid}.json"]
    assert KEY not in json.dumps(worker_options) and HEADER_SECRET not in json.dumps(worker_options)
    assert "X-Team: llm" in json.dumps(worker_options)  # other headers still travel
    # every request (the master's preflight and the worker's load) authenticated with the key, and sent the headers
    assert seen["requests"] > 5 and seen["auth"] == [f"Bearer {KEY}"] * seen["requests"]
    assert set(seen["headers"]["x-api-key"]) == {HEADER_SECRET} and set(seen["headers"]["x-team"]) == {"llm"}
    for text in (out, err, worker_out, *(p.read_text() for p in tmp_path.glob("run*") if p.is_file())):
        assert KEY not in text and HEADER_SECRET not in text
