"""``locust-llm sim --realtime``: the simulator's process under SCHED_FIFO when the kernel allows it, a one-line
error and exit 2 when it refuses, normal scheduling when not asked (locust_llm/sim/realtime.py)."""

from __future__ import annotations

import ctypes
import json
import os
import re
import resource
import subprocess
import sys

import pytest

from locust_llm.sim import realtime
from tests.integration.test_sim_server import get, post
from tests.support.procs import ROOT, clean_env, sim

PR_CAPBSET_DROP, CAP_SYS_NICE = 24, 23  # <linux/prctl.h>, <linux/capability.h>


def _no_realtime() -> None:
    """A child's ``preexec_fn``: no way left to real-time scheduling (an RLIMIT_RTPRIO of 0 and, for root, no
    CAP_SYS_NICE after the exec: it is dropped from the bounding set, from which root's next capabilities come)."""
    resource.setrlimit(resource.RLIMIT_RTPRIO, (0, 0))
    if os.geteuid() == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_CAPBSET_DROP, CAP_SYS_NICE, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _policy_of_server(origin: str) -> str:
    return get(origin, "/sim/stats")[1]["scheduling"]


def test_without_the_flag_the_simulator_runs_under_normal_scheduling():
    with sim() as url:
        assert _policy_of_server(url.rsplit("/v1", 1)[0]) == "normal"


@pytest.mark.skipif(
    not realtime.allowed(), reason="this machine refuses SCHED_FIFO to this user (needs root or CAP_SYS_NICE)"
)
def test_with_the_flag_it_serves_streams_under_fifo_and_its_children_would_start_normal():
    proc = subprocess.Popen(
        [sys.executable, "-m", "locust_llm.sim", "--port", "0", "--realtime"],
        cwd=ROOT,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        match = None
        while match is None:
            line = proc.stdout.readline()
            assert line, f"the simulator exited with {proc.wait()} before it listened"
            match = re.search(r"listening on (http://\S+)/v1", line)
        origin = match.group(1)
        assert _policy_of_server(origin) == "fifo"
        policy = os.sched_getscheduler(proc.pid)  # the process itself, as the kernel sees it
        assert policy == os.SCHED_FIFO | os.SCHED_RESET_ON_FORK
        assert os.sched_getparam(proc.pid).sched_priority == 1
        body = {"model": "sim-llm", "stream": True, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
        response, data = post(origin + "/v1", body)
        assert response.status == 200
        events = [json.loads(line[6:]) for line in data.decode().splitlines() if line.startswith("data: {")]
        tokens = [e["choices"][0]["delta"].get("content") for e in events if e["choices"]]
        assert 0 < len([t for t in tokens if t]) <= 5, data  # the preset draws each reply's length up to max_tokens
        assert events[-1]["choices"][0]["finish_reason"] == "length" and data.endswith(b"data: [DONE]\n\n")
    finally:
        proc.terminate()
        proc.wait(10)
        proc.stdout.close()


def test_a_refusal_is_one_line_naming_what_is_needed_and_exit_2_before_serving():
    proc = subprocess.run(
        [sys.executable, "-m", "locust_llm.sim", "--port", "0", "--realtime"],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_no_realtime,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("locust-llm sim: error: --realtime:")
    assert "CAP_SYS_NICE" in lines[0] and "ulimit -r" in lines[0]
    assert "listening" not in proc.stdout
