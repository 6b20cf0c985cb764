"""Every request the server answered is in Locust's own statistics at the end, or counted apart as cut by the stop.

Against a plain streaming server (a valid stream with ``[DONE]``, ~25 ms long) that counts what it receives: the
server's count of requests, less the preflight, equals the ``E2E`` rows' count in ``{prefix}_stats.csv`` (Locust's
file, written by Locust) plus the attempts cut by the stop (``interrupted`` in ``{prefix}_llm_run.json``), exactly.
Single process and ``--processes 2`` (a master and two workers), on both paths, and with ``--run-time``.
"""

import json
import sys
from functools import partial

import pytest

from tests.support.procs import at_once, clean_env, read_csv, run_locust, server

pytestmark = pytest.mark.slow  # end-to-end runs: deselected by -m 'not slow'


def seen_requests(url):
    import urllib.request

    with urllib.request.urlopen(url.rsplit("/v1", 1)[0] + "/seen", timeout=10) as resp:
        return json.load(resp)["requests"]


def accounted(tmp_path, *extra):
    with server(sys.executable, "-m", "tests.support.bad_server", "ok") as url:
        proc = run_locust(
            "--headless",
            "--csv",
            str(tmp_path / "run"),
            "--host",
            url,
            "--model",
            "m",
            "--steps",
            "2,4",
            "--step-duration",
            "3s",
            "--request-timeout",
            "3s",
            "--min-step-requests",
            "1",
            *extra,
            cwd=tmp_path,
            env=clean_env(),
        )
        received = seen_requests(url) - 1  # the preflight is no measured request
    e2e = sum(int(r["Request Count"]) for r in read_csv(tmp_path / "run_stats.csv") if r["Type"] == "E2E")
    totals = json.loads((tmp_path / "run_llm_run.json").read_text())["totals"]
    return proc, received, e2e, totals


RUNS = {
    "single-auto": ("--fast-path", "auto"),
    "single-off": ("--fast-path", "off"),
    "run-time": ("--run-time", "4s"),
    "processes-2-auto": ("--fast-path", "auto", "--processes", "2"),
    "processes-2-off": ("--fast-path", "off", "--processes", "2"),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The runs, the single-process ones at once, then each with workers (two masters would share Locust's port)."""
    made = {}
    for batch in (("single-auto", "single-off", "run-time"), ("processes-2-auto",), ("processes-2-off",)):
        made.update(at_once({name: partial(accounted, tmp_path_factory.mktemp(name), *RUNS[name]) for name in batch}))
    return made


@pytest.mark.parametrize("name", ["single-auto", "single-off", "processes-2-auto", "processes-2-off"])
def test_every_request_the_server_saw_is_in_locusts_csv_or_counted_as_cut(runs, name):
    proc, received, e2e, totals = runs[name]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert received == e2e + totals["interrupted"], (received, e2e, totals)
    assert totals["requests"] == e2e  # what the per-step statistics recorded is what Locust's file holds
    assert e2e > 100


def test_a_run_time_that_stops_mid_step_loses_nothing_either(runs):
    proc, received, e2e, totals = runs["run-time"]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert received == e2e + totals["interrupted"], (received, e2e, totals)
    assert totals["interrupted"] > 0  # 4 users were mid-request when the run time was up
