"""The web UI as a user drives it: runs started from /swarm, the LLM view, repeated runs, and the key's safety."""

import json
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from contextlib import contextmanager

import pytest

from tests.support.procs import LOCUSTFILE, clean_env, free_port, read_csv, server

pytestmark = pytest.mark.slow  # end-to-end runs: deselected by -m 'not slow'

KEY = "sk-test-WEBUI-4242"


def fetch(url, data=None, timeout=10):
    body = urllib.parse.urlencode(data).encode() if data is not None else None
    with urllib.request.urlopen(url, data=body, timeout=timeout) as resp:
        return resp.read().decode()


@contextmanager
def web_ui(cwd, *args, env=None, master=False):
    """A locust process serving its web UI on 127.0.0.1; yields its base URL; its output is kept on ``.output``."""
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
        *args,
    ]
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env or clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                fetch(base + "/")
                break
            except OSError:
                time.sleep(0.2)
        else:
            raise AssertionError("the web UI did not come up")
        yield base
    finally:
        proc.terminate()
        web_ui.output, _ = proc.communicate(timeout=30)


def steps_json(base):
    return json.loads(fetch(base + "/llm/steps.json"))


def wait_for(base, state, timeout_s=60):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        data = steps_json(base)
        if data["state"] == state:
            return data
        time.sleep(0.3)
    raise AssertionError(f"the run did not reach {state!r}: {steps_json(base)['state']}")


def locust_e2e_requests(base):
    stats = json.loads(fetch(base + "/stats/requests"))["stats"]
    return sum(s["num_requests"] for s in stats if s["method"] == "E2E")


ARGS = ("--steps", "2,4", "--step-duration", "4s", "--warmup", "1s", "--max-tokens", "8", "--min-step-requests", "1")


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """One web UI session: a run of steps 2,4, then a run of one step of 3 users started with other form fields."""
    cwd = tmp_path_factory.mktemp("webui")
    out = {}
    with web_ui(cwd, *ARGS, "--csv", "run", "--api-key", KEY) as base:
        out["page"] = fetch(base + "/")
        assert json.loads(fetch(base + "/swarm", {}))["success"]
        out["first"] = wait_for(base, "finished")
        out["first_locust"] = locust_e2e_requests(base)
        started = json.loads(fetch(base + "/swarm", {"steps": "3", "step_duration": "5s"}))
        assert started["success"], started
        running = wait_for(base, "running")
        out["second"] = wait_for(base, "finished")
        out["second_locust"] = locust_e2e_requests(base)
        out["running_run"] = running["run"]
        out["routes"] = {
            path: fetch(base + path)
            for path in (
                "/llm/",
                "/llm/steps.json",
                "/llm/steps.csv",
                "/llm/summary.json",
                "/llm/report.html",
                "/stats/requests",
            )
        }
    out["output"] = web_ui.output
    out["cwd"] = cwd
    return out


def test_each_start_is_a_new_complete_run(two_runs):
    first, second = two_runs["first"], two_runs["second"]
    assert (first["run"], two_runs["running_run"], second["run"]) == (1, 2, 2)
    assert [r["users"] for r in first["rows"]] == [2, 4] and [r["users"] for r in second["rows"]] == [3]
    for row in first["rows"] + second["rows"]:
        assert row["duration_s"] > 2 and row["requests"] > 5 and row["valid"], row
    assert first["summary"]["run"]["settings"]["steps"] == [2, 4]
    assert second["summary"]["run"]["settings"]["steps"] == [3]  # the form's fields reached the second run


def test_each_runs_totals_match_locusts_own_per_run_counts(two_runs):
    cwd = two_runs["cwd"]
    first = json.loads((cwd / "run_run1_llm_run.json").read_text())
    second = json.loads((cwd / "run_llm_run.json").read_text())
    assert first["run"] == 1 and second["run"] == 2
    assert first["totals"]["requests"] == two_runs["first_locust"] > 0
    assert second["totals"]["requests"] == two_runs["second_locust"] > 0


def test_the_latest_run_has_the_plain_names_and_earlier_ones_are_kept(two_runs):
    cwd = two_runs["cwd"]
    assert [int(r["users"]) for r in read_csv(cwd / "run_llm_steps.csv")] == [3]
    assert [int(r["users"]) for r in read_csv(cwd / "run_run1_llm_steps.csv")] == [2, 4]
    assert (cwd / "run_run1_llm_summary.json").exists() and (cwd / "run_llm_report.html").exists()


def test_the_routes_answer_and_no_page_holds_the_key(two_runs):
    routes = two_runs["routes"]
    summary = json.loads(routes["/llm/summary.json"])
    assert summary == json.loads((two_runs["cwd"] / "run_llm_summary.json").read_text())  # the latest run's
    assert summary["knee"]["recommended_users"] == 3, (summary["knee"]["recommended_reason"], summary["steps"])
    assert "Plotly" in routes["/llm/report.html"] and 'id="chart-ttft"' in routes["/llm/"]
    assert routes["/llm/steps.csv"].splitlines()[0].startswith("step,users,model")
    extended = json.loads(routes["/stats/requests"])["extended_stats"]
    assert extended[0]["key"] == "llm" and extended[0]["data"][0]["users"] == 3
    tab = extended[0]["data"][0]
    step = read_csv(two_runs["cwd"] / "run_llm_steps.csv")[0]
    assert tab["answer_ttft_p50_ms"] == round(float(step["answer_ttft_p50_ms"]), 1)  # no reasoning: the TTFT
    assert tab["cache_hit_pct"] == round(100 * float(step["cache_hit_share"]), 1)
    for text in (two_runs["page"], *routes.values(), two_runs["output"]):
        assert KEY not in text


def test_a_stop_in_the_middle_of_a_step_closes_it_as_partial(tmp_path):
    with web_ui(
        tmp_path,
        "--steps",
        "2,4",
        "--step-duration",
        "30s",
        "--warmup",
        "1s",
        "--max-tokens",
        "8",
        "--min-step-requests",
        "1",
        "--csv",
        "run",
    ) as base:
        assert json.loads(fetch(base + "/swarm", {}))["success"]
        deadline = time.monotonic() + 20
        while not steps_json(base)["rows"] or steps_json(base)["rows"][0]["requests"] < 5:
            assert time.monotonic() < deadline
            time.sleep(0.3)
        fetch(base + "/stop", {})
        data = wait_for(base, "finished")
    (row,) = data["rows"]
    assert not row["valid"] and "partial: the run was stopped during this step" in row["invalid_reasons"]


def test_a_new_host_from_the_form_never_receives_the_key(tmp_path):
    with server(sys.executable, "-m", "tests.support.bad_server", "ok") as foreign:
        with web_ui(tmp_path, *ARGS, env=clean_env(OPENAI_API_KEY=KEY)) as base:
            answer = json.loads(fetch(base + "/swarm", {"host": foreign}))
            time.sleep(1.0)
            assert steps_json(base)["state"] == "idle"
        seen = json.loads(fetch(foreign.rsplit("/v1", 1)[0] + "/seen"))
    assert not answer["success"] and "it is not sent to" in answer["message"]
    assert seen["requests"] == 0 and KEY not in json.dumps(seen)


def test_the_form_may_not_point_a_path_outside_the_working_directory_nor_change_other_options(tmp_path):
    with web_ui(tmp_path, *ARGS) as base:
        outside = json.loads(fetch(base + "/swarm", {"prompts": "/etc/passwd"}))
        other = json.loads(fetch(base + "/swarm", {"csv_prefix": "/tmp/elsewhere"}))
        time.sleep(0.5)
        assert steps_json(base)["state"] == "idle"
    assert not outside["success"] and "prompts must be a file in the working directory" in outside["message"]
    assert not other["success"] and "may not change 'csv_prefix'" in other["message"]


def test_a_key_with_an_exposed_ui_gets_one_warning(tmp_path):
    port = free_port()
    cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--web-port", str(port), *ARGS]
    proc = subprocess.Popen(
        cmd,
        cwd=tmp_path,
        env=clean_env(OPENAI_API_KEY=KEY),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                fetch(f"http://127.0.0.1:{port}/")
                break
            except (OSError, urllib.error.URLError):
                time.sleep(0.2)
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert out.count("a key is set and the web UI listens on") == 1
    assert "--web-host 127.0.0.1" in out and "--web-login" in out and KEY not in out
