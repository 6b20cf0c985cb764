"""Endpoints that fail in the ways real ones do: systematic failures stop the run with one line (exit 2), the others
are classified, recorded and judged (exit 3 when nothing succeeded), and odd but valid streams just work."""

import json
import socket
import sys
import time
import urllib.request
from functools import partial

import pytest

from locust_llm.protocol.retry import RetryPolicy
from tests.support.procs import LOCUSTFILE, ROOT, at_once, clean_env, read_csv, run_locust, server

pytestmark = pytest.mark.slow  # end-to-end runs: deselected by -m 'not slow'

KEY = "sk-test-RECOGNISABLE-0123456789"


def short_run(host, tmp_path, *extra, seconds="3s", locustfile=LOCUSTFILE):
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
        seconds,
        "--request-timeout",
        "10s",
        "--min-step-requests",
        "1",
        *extra,
        cwd=tmp_path,
        env=clean_env(OPENAI_API_KEY=KEY),
        locustfile=locustfile,
    )


def seen(url):
    with urllib.request.urlopen(url.rsplit("/v1", 1)[0] + "/seen", timeout=10) as resp:
        return json.load(resp)


def failures(tmp_path):
    return {r["Error"]: int(r["Occurrences"]) for r in read_csv(tmp_path / "run_failures.csv")}


def no_key_anywhere(proc, tmp_path):
    assert KEY not in proc.stdout + proc.stderr
    assert all(KEY not in p.read_text() for p in tmp_path.glob("run*") if p.is_file())


def one_line_error(proc):
    lines = [line for line in proc.stderr.splitlines() if line.startswith("locust-llm: error:")]
    assert len(lines) == 1, proc.stderr[-3000:]
    return lines[0]


def test_unreachable_host_stops_before_any_load(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before the run: nothing listens there
    started = time.monotonic()
    proc = short_run(f"http://127.0.0.1:{port}/v1", tmp_path, seconds="30s")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert time.monotonic() - started < 25  # stopped at once, not after a 30 s step of refused connections
    line = one_line_error(proc)
    assert "connection refused (check --host" in line and "Traceback" not in proc.stderr


def test_a_refused_key_stops_before_any_load_and_never_shows_the_key(tmp_path):
    with server(sys.executable, "-m", "tests.support.bad_server", "unauthorized") as url:
        proc = short_run(url, tmp_path, seconds="30s")
        requests = seen(url)["requests"]
    assert proc.returncode == 2 and requests == 1  # the preflight request alone
    line = one_line_error(proc)
    assert (
        "HTTP 401" in line and "check OPENAI_API_KEY or --api-key" in line and "Incorrect API key provided: ***" in line
    )
    no_key_anywhere(proc, tmp_path)


def test_a_server_that_does_not_serve_the_api_stops_before_any_load_naming_the_api(tmp_path):
    with server(sys.executable, "-m", "tests.support.bad_server", "ok") as url:
        proc = short_run(url, tmp_path, "--api", "responses", seconds="30s")
        requests = seen(url)["requests"]
    assert proc.returncode == 2 and requests == 1, proc.stderr[-3000:]  # the preflight request alone
    line = one_line_error(proc)
    assert "HTTP 404: this server does not serve /v1/responses (--api responses); try --api chat" in line, line


def test_a_key_revoked_mid_run_stops_it_fast_and_keeps_what_was_measured(tmp_path):
    with server(sys.executable, "-m", "tests.support.bad_server", "revoke:40") as url:
        proc = short_run(url, tmp_path, "--steps", "4", "--warmup", "0s", seconds="30s")
        requests = seen(url)["requests"]
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "the last 10 requests all failed: HTTP 401" in one_line_error(proc)
    # users pause after a systematic failure: 4 users stop within ~10 refusals each at most
    assert 40 < requests < 40 + 60, requests
    rows = read_csv(tmp_path / "run_llm_steps.csv")
    assert int(rows[0]["ok"]) > 0  # what was measured before is kept
    no_key_anywhere(proc, tmp_path)


def test_a_prompt_longer_than_the_context_stops_before_any_load(tmp_path):
    system = tmp_path / "system.txt"
    system.write_text("word " * 4000)  # ~5,000 tokens against the simulator's 2,048-token context
    proc = run_locust(
        "--headless",
        "--csv",
        str(tmp_path / "run"),
        "--steps",
        "2",
        "--step-duration",
        "20s",
        "--system-prompt",
        str(system),
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert "HTTP 400" in line and "maximum context length is 2048 tokens" in line and "--system-prompt" in line


SDK = ROOT / "locustfile_sdk.py"
PATHS = {"fasthttp": (LOCUSTFILE, "auto"), "fasthttp-library-path": (LOCUSTFILE, "off"), "sdk": (SDK, "auto")}
SCENARIOS = {
    # name: (server mode, the run's extra flags, locustfile, step length)
    **{
        f"{mode}-{path}": (mode, ("--fast-path", path), LOCUSTFILE, "3s")
        for mode in ("cut", "json200", "cr", "crlf", "keepalive")
        for path in ("auto", "off")
    },
    # Failing requests back off (jittered, growing), so a 3 s step may see none after a warmup: with --warmup 0s
    # each user's first request, made at the step's start, is always in the step's window.
    **{
        f"{mode}-{user}": (mode, ("--fast-path", path, "--warmup", "0s"), locustfile, "3s")
        for mode in ("no-done", "no-finish", "echo-stream-error")
        for user, (locustfile, path) in PATHS.items()
    },
    **{
        f"ratelimit-stream-{user}": (
            "ratelimit-stream",
            ("--max-retries", "1", "--backoff-base", "200ms", "--fast-path", path, "--warmup", "0s"),
            lf,
            "3s",
        )
        for user, (lf, path) in PATHS.items()
    },
    **{
        f"retry-after-{value}": (
            f"retry-after:{value}",
            # a capped wait (2 s) is as long as the 4 s step's warm-up (auto: half the step), so the second request
            # can land on either side of the window's start: with no warm-up, the first is always inside
            ("--max-retry-wait", "2s", "--backoff-base", "500ms", "--warmup", "0s"),
            LOCUSTFILE,
            "4s",
        )
        for value in ("NaN", "99999999999")
    },
    **{
        f"{mode}-backoff-{user}": (mode, ("--seed", "1", "--fast-path", path), lf, "4s")
        for mode in ("http500", "json200")
        for user, (lf, path) in PATHS.items()
    },
    # the held first requests are sent 2 s into the 4 s step, where its auto warm-up ends: with no warm-up, always in
    # the window whose retry_wait_s counts them
    "preflight-retry-after": ("retry-after-first:2", ("--warmup", "0s"), LOCUSTFILE, "4s"),
    "no-stream-options-refused": ("no-stream-options", (), LOCUSTFILE, "3s"),
    **{
        f"no-stream-options-{user}": (
            "no-stream-options",
            ("--extra-body", '{"stream_options": null}', "--fast-path", path),
            lf,
            "3s",
        )
        for user, (lf, path) in PATHS.items()
    },
}
AT_ONCE = 7
"""Scenario runs made at the same time: each is 2 users against a server of its own that answers at once, mostly
waiting on the network, so that many share the 2 cores without a saturated generator."""


def scenario(tmp_path, name):
    mode, extra, locustfile, seconds = SCENARIOS[name]
    with server(sys.executable, "-m", "tests.support.bad_server", mode) as url:
        started = time.monotonic()
        proc = short_run(url, tmp_path, *extra, seconds=seconds, locustfile=locustfile)
        elapsed_s = time.monotonic() - started
        return proc, tmp_path, seen(url), elapsed_s


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """Every scenario's run (its process, its directory, what its server saw, how long it took), made
    :data:`AT_ONCE` at a time and shared by the tests that read them."""
    names, results = list(SCENARIOS), {}
    for i in range(0, len(names), AT_ONCE):
        batch = names[i : i + AT_ONCE]
        results.update(at_once({n: partial(scenario, tmp_path_factory.mktemp(n), n) for n in batch}))
    return results


@pytest.mark.parametrize(
    ("mode", "needle"),
    [("cut", "(mid-stream)"), ("json200", "not an SSE stream: HTTP 200 with Content-Type 'application/json'")],
)
@pytest.mark.parametrize("path", ["auto", "off"])
def test_a_run_where_nothing_succeeds_is_an_invalid_measurement(ran, mode, needle, path):
    proc, tmp_path, _, _ = ran[f"{mode}-{path}"]
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert any(needle in e for e in failures(tmp_path)), failures(tmp_path)
    assert "no successful request at any step" in proc.stdout
    no_key_anywhere(proc, tmp_path)


@pytest.mark.parametrize("path", ["auto", "off"])
@pytest.mark.parametrize("mode", ["cr", "crlf", "keepalive"])
def test_valid_but_unusual_streams_work(ran, mode, path):
    proc, tmp_path, _, _ = ran[f"{mode}-{path}"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (row,) = read_csv(tmp_path / "run_llm_steps.csv")
    assert int(row["errors"]) == 0 and int(row["ok"]) > 0 and int(row["protocol_errors"]) == 0
    assert int(row["completion_tokens"]) == 3 * int(row["ok"])


def test_a_server_refusing_stream_options_stops_the_run_and_a_null_extra_body_field_leaves_it_out(ran):
    proc, _, _, _ = ran["no-stream-options-refused"]
    assert proc.returncode == 2 and "HTTP 400" in one_line_error(proc) and "stream_options" in proc.stderr


@pytest.mark.parametrize("user", PATHS)
def test_with_stream_options_left_out_every_user_runs_and_counts_its_tokens(ran, user):
    """``--extra-body '{"stream_options": null}'``: the field is not sent, so the server sends no usage and the
    tokens are counted from the chunks (three each), marked estimated."""
    proc, tmp_path, served, _ = ran[f"no-stream-options-{user}"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (row,) = read_csv(tmp_path / "run_llm_steps.csv")
    assert int(row["ok"]) > 0 and int(row["errors"]) == 0 and row["tokens_estimated"] == "True"
    assert int(row["completion_tokens"]) == 3 * int(row["ok"])
    assert served["requests"] > int(row["ok"])  # the preflight and the warm-up's requests too, none refused


@pytest.mark.parametrize("user", PATHS)
def test_a_stream_that_ends_cleanly_after_a_finish_reason_is_complete_without_done(ran, user):
    proc, tmp_path, _, _ = ran[f"no-done-{user}"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (row,) = read_csv(tmp_path / "run_llm_steps.csv")
    assert int(row["errors"]) == 0 and int(row["no_done"]) == int(row["ok"]) > 0, row
    totals = json.loads((tmp_path / "run_llm_run.json").read_text())["totals"]
    assert totals["no_done"] == totals["ok"] == totals["requests"] > 0
    warning = f"the server ends streams without [DONE] ({totals['no_done']} requests); counted as complete"
    assert proc.stderr.count(warning) == 1, proc.stderr[-3000:]
    # its /metrics answers 404: said once, never asked again, and the run went on; no wall is claimed
    assert proc.stderr.count("locust-llm: no server metrics:") == 1, proc.stderr[-3000:]
    summary = json.loads((tmp_path / "run_llm_summary.json").read_text())
    assert summary["diagnosis"]["wall"] == "unknown" and row["server_scrapes"] == "0"
    # it says nothing of itself (every GET but the stream 404, no Server header): the target's fields are absent,
    # none guessed
    assert summary["target"] == {"changed_during_run": []}, summary["target"]


@pytest.mark.parametrize("user", PATHS)
def test_a_stream_that_ends_without_done_or_a_finish_reason_is_truncated(ran, user):
    proc, tmp_path, _, _ = ran[f"no-finish-{user}"]
    assert proc.returncode == 3, proc.stdout[-3000:] + proc.stderr[-3000:]
    errors = failures(tmp_path)
    assert list(errors) == ["stream ended without 'data: [DONE]' or a finish_reason (mid-stream)"], errors
    (row,) = read_csv(tmp_path / "run_llm_steps.csv")
    assert int(row["protocol_errors"]) == int(row["requests"]) > 0 and int(row["no_done"]) == 0, row


@pytest.mark.parametrize("user", PATHS)
def test_in_stream_errors_read_the_same_from_both_users_and_hide_the_key(ran, user):
    proc, tmp_path, _, _ = ran[f"echo-stream-error-{user}"]
    errors = failures(tmp_path)
    assert list(errors) == ["error in stream: internal error for key *** (code server_error) (mid-stream)"], errors
    no_key_anywhere(proc, tmp_path)


@pytest.mark.parametrize("user", PATHS)
def test_a_rate_limit_inside_a_200_stream_counts_as_a_429_and_is_retried(ran, user):
    proc, tmp_path, _, _ = ran[f"ratelimit-stream-{user}"]
    (row,) = read_csv(tmp_path / "run_llm_steps.csv")
    assert int(row["status_429"]) == int(row["requests"]) > 0 and int(row["retries"]) > 0, row
    assert all(e.startswith("error in stream: Rate limit reached") for e in failures(tmp_path)), failures(tmp_path)
    assert proc.returncode == 3  # nothing succeeded


# the two paths an unusable value takes: no usable wait (None: "-5", "inf", a past date and others take this path,
# tests/unit/protocol/test_retry.py) and a wait past the cap
@pytest.mark.parametrize("value", ["NaN", "99999999999"])
def test_unusable_retry_after_values_never_turn_honor_into_a_storm(ran, value):
    proc, tmp_path, seen_by_server, _ = ran[f"retry-after-{value}"]
    assert "Traceback" not in proc.stderr and proc.returncode == 3
    # 2 users for ~4 s, each wait at least a jittered backoff (or the 2 s cap): far from thousands
    assert seen_by_server["requests"] < 60, seen_by_server["requests"]
    (row,) = read_csv(tmp_path / "run_llm_steps.csv")
    assert int(row["status_429"]) > 0
    if value == "99999999999":
        assert int(row["retry_waits_capped"]) > 0


def most_requests(policy, seconds, bound=1e-6):
    """The fewest requests N a user of ``policy`` sends to a server that fails every request at once within
    ``seconds`` with probability at least ``1 - bound``: the user's k-th wait is ``uniform(0, c_k)`` with ``c_k =
    min(backoff_max, backoff_base * 2 ** (k - 1))``, and N requests need the first N - 1 waits to fit in ``seconds``,
    each at most ``seconds``, which for waits drawn independently has probability at most ``prod(seconds / c_k)``
    over the waits whose ``c_k`` exceeds ``seconds``."""
    p, n = 1.0, 1
    while p > bound:
        cap = min(policy.backoff_max_s, policy.backoff_base_s * 2 ** (n - 1))
        p *= min(1.0, seconds / cap)
        n += 1
    return n


@pytest.mark.parametrize("user", PATHS)
@pytest.mark.parametrize("mode", ["http500", "json200"])
def test_honor_backs_off_from_a_server_that_fails_at_once(ran, mode, user):
    """2 users for a 4 s step against a server that fails every request at once (a 500, or a 200 that is not a
    stream): the server sees at most what the policy allows in the run's time (``most_requests``)."""
    proc, tmp_path, seen_by_server, elapsed_s = ran[f"{mode}-backoff-{user}"]
    assert proc.returncode == 3 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    (row,) = read_csv(tmp_path / "run_llm_steps.csv")
    assert int(row["error_backoffs"]) > 0 and float(row["error_backoff_s"]) > 0, row
    requests = seen_by_server["requests"]
    assert requests <= 1 + 2 * most_requests(RetryPolicy(), elapsed_s), requests  # + the preflight


def test_naive_hammers_the_server_that_honor_backs_off_from(tmp_path):
    """The same server under ``--retry-policy naive`` (today's storm, kept to compare): far more requests."""
    with server(sys.executable, "-m", "tests.support.bad_server", "http500") as url:
        started = time.monotonic()
        short_run(url, tmp_path, "--retry-policy", "naive", seconds="3s")
        elapsed_s = time.monotonic() - started
        requests = seen(url)["requests"]
    assert requests > 10 * (1 + 2 * most_requests(RetryPolicy(), elapsed_s)), requests


def test_every_first_request_waits_for_the_retry_after_the_preflight_was_given(ran):
    """The preflight is refused with ``Retry-After: 2``: no user's request reaches the server before 2 s after the
    server stamped the preflight (the client's wait starts later still, when the answer arrived)."""
    proc, tmp_path, seen_by_server, _ = ran["preflight-retry-after"]
    times = seen_by_server["times"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert len(times) > 2 and min(times[1:]) - times[0] >= 2.0, [round(t - times[0], 3) for t in times[:6]]
    (row,) = read_csv(tmp_path / "run_llm_steps.csv")
    assert float(row["retry_wait_s"]) > 0  # the users' wait is counted as a retry wait


def test_a_master_refuses_a_plan_larger_than_its_fleet_before_any_worker_joins(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens: the refusal comes before the preflight
    proc = run_locust(
        "--master",
        "--headless",
        "--master-bind-port=0",
        "--expect-workers=2",
        "--max-users-per-worker=4",
        "--steps=4,16",
        "--host",
        f"http://127.0.0.1:{port}/v1",
        "--model",
        "m",
        cwd=tmp_path,
        timeout_s=60,
    )
    assert proc.returncode == 2
    assert "--steps reaches 16 users, more than 2 worker(s) x 4 users each" in one_line_error(proc)
