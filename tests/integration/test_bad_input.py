"""Endpoints that fail in the ways real ones do: systematic failures stop the run with one line (exit 2), the others
are classified, recorded and judged (exit 3 when nothing succeeded), and odd but valid streams just work."""

import json
import socket
import sys
import time
import urllib.request

import pytest

from locust_llm.protocol.retry import RetryPolicy
from tests.support.procs import LOCUSTFILE, ROOT, clean_env, read_csv, run_locust, server

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


@pytest.mark.parametrize("path", ["auto", "off"])
@pytest.mark.parametrize(
    ("mode", "needle"),
    [("cut", "(mid-stream)"), ("json200", "not an SSE stream: HTTP 200 with Content-Type 'application/json'")],
)
def test_a_run_where_nothing_succeeds_is_an_invalid_measurement(tmp_path, mode, needle, path):
    with server(sys.executable, "-m", "tests.support.bad_server", mode) as url:
        proc = short_run(url, tmp_path, "--fast-path", path)
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert any(needle in e for e in failures(tmp_path)), failures(tmp_path)
    assert "no successful request at any step" in proc.stdout
    no_key_anywhere(proc, tmp_path)


@pytest.mark.parametrize("path", ["auto", "off"])
@pytest.mark.parametrize("mode", ["cr", "crlf", "keepalive"])
def test_valid_but_unusual_streams_work(tmp_path, mode, path):
    with server(sys.executable, "-m", "tests.support.bad_server", mode) as url:
        proc = short_run(url, tmp_path, "--fast-path", path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (row,) = read_csv(tmp_path / "run_llm_steps.csv")
    assert int(row["errors"]) == 0 and int(row["ok"]) > 0 and int(row["protocol_errors"]) == 0
    assert int(row["completion_tokens"]) == 3 * int(row["ok"])


@pytest.mark.parametrize(
    ("locustfile", "path"),
    [(LOCUSTFILE, "auto"), (LOCUSTFILE, "off"), (ROOT / "locustfile_sdk.py", "auto")],
    ids=["fasthttp", "fasthttp-library-path", "sdk"],
)
def test_a_stream_that_ends_cleanly_after_a_finish_reason_is_complete_without_done(tmp_path, locustfile, path):
    with server(sys.executable, "-m", "tests.support.bad_server", "no-done") as url:
        proc = short_run(url, tmp_path, "--fast-path", path, locustfile=locustfile)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (row,) = read_csv(tmp_path / "run_llm_steps.csv")
    assert int(row["errors"]) == 0 and int(row["no_done"]) == int(row["ok"]) > 0, row
    totals = json.loads((tmp_path / "run_llm_run.json").read_text())["totals"]
    assert totals["no_done"] == totals["ok"] == totals["requests"] > 0
    warning = f"the server ends streams without [DONE] ({totals['no_done']} requests); counted as complete"
    assert proc.stderr.count(warning) == 1, proc.stderr[-3000:]


@pytest.mark.parametrize(
    ("locustfile", "path"),
    [(LOCUSTFILE, "auto"), (LOCUSTFILE, "off"), (ROOT / "locustfile_sdk.py", "auto")],
    ids=["fasthttp", "fasthttp-library-path", "sdk"],
)
def test_a_stream_that_ends_without_done_or_a_finish_reason_is_truncated(tmp_path, locustfile, path):
    with server(sys.executable, "-m", "tests.support.bad_server", "no-finish") as url:
        proc = short_run(url, tmp_path, "--fast-path", path, locustfile=locustfile)
    assert proc.returncode == 3, proc.stdout[-3000:] + proc.stderr[-3000:]
    errors = failures(tmp_path)
    assert list(errors) == ["stream ended without 'data: [DONE]' or a finish_reason (mid-stream)"], errors
    (row,) = read_csv(tmp_path / "run_llm_steps.csv")
    assert int(row["protocol_errors"]) == int(row["requests"]) > 0 and int(row["no_done"]) == 0, row


@pytest.mark.parametrize(
    ("locustfile", "path"),
    [(LOCUSTFILE, "auto"), (LOCUSTFILE, "off"), (ROOT / "locustfile_sdk.py", "auto")],
    ids=["fasthttp", "fasthttp-library-path", "sdk"],
)
def test_in_stream_errors_read_the_same_from_both_users_and_hide_the_key(tmp_path, locustfile, path):
    with server(sys.executable, "-m", "tests.support.bad_server", "echo-stream-error") as url:
        proc = short_run(url, tmp_path, "--fast-path", path, locustfile=locustfile)
    errors = failures(tmp_path)
    assert list(errors) == ["error in stream: internal error for key *** (code server_error) (mid-stream)"], errors
    no_key_anywhere(proc, tmp_path)


@pytest.mark.parametrize("locustfile", [LOCUSTFILE, ROOT / "locustfile_sdk.py"], ids=["fasthttp", "sdk"])
def test_a_rate_limit_inside_a_200_stream_counts_as_a_429_and_is_retried(tmp_path, locustfile):
    with server(sys.executable, "-m", "tests.support.bad_server", "ratelimit-stream") as url:
        proc = short_run(url, tmp_path, "--max-retries", "1", "--backoff-base", "200ms", locustfile=locustfile)
    (row,) = read_csv(tmp_path / "run_llm_steps.csv")
    assert int(row["status_429"]) == int(row["requests"]) > 0 and int(row["retries"]) > 0, row
    assert all(e.startswith("error in stream: Rate limit reached") for e in failures(tmp_path)), failures(tmp_path)
    assert proc.returncode == 3  # nothing succeeded


# the two paths an unusable value takes: no usable wait (None: "-5", "inf", a past date and others take this path,
# tests/unit/protocol/test_retry.py) and a wait past the cap; a run for each costs 7 s
@pytest.mark.parametrize("value", ["NaN", "99999999999"])
def test_unusable_retry_after_values_never_turn_honor_into_a_storm(tmp_path, value):
    with server(sys.executable, "-m", "tests.support.bad_server", f"retry-after:{value}") as url:
        proc = short_run(url, tmp_path, "--max-retry-wait", "2s", "--backoff-base", "500ms", seconds="4s")
        requests = seen(url)["requests"]
    assert "Traceback" not in proc.stderr and proc.returncode == 3
    # 2 users for ~4 s, each wait at least a jittered backoff (or the 2 s cap): far from thousands
    assert requests < 60, requests
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


@pytest.mark.parametrize("locustfile", [LOCUSTFILE, ROOT / "locustfile_sdk.py"], ids=["fasthttp", "sdk"])
@pytest.mark.parametrize("mode", ["http500", "json200"])
def test_honor_backs_off_from_a_server_that_fails_at_once(tmp_path, mode, locustfile):
    """2 users for a 4 s step against a server that fails every request at once (a 500, or a 200 that is not a
    stream): the server sees at most what the policy allows in the run's time (``most_requests``)."""
    with server(sys.executable, "-m", "tests.support.bad_server", mode) as url:
        started = time.monotonic()
        proc = short_run(url, tmp_path, "--seed", "1", seconds="4s", locustfile=locustfile)
        elapsed_s = time.monotonic() - started
        requests = seen(url)["requests"]
    assert proc.returncode == 3 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    (row,) = read_csv(tmp_path / "run_llm_steps.csv")
    assert int(row["error_backoffs"]) > 0 and float(row["error_backoff_s"]) > 0, row
    assert requests <= 1 + 2 * most_requests(RetryPolicy(), elapsed_s), requests  # + the preflight


def test_naive_hammers_the_server_that_honor_backs_off_from(tmp_path):
    """The same server under ``--retry-policy naive`` (today's storm, kept to compare): far more requests."""
    with server(sys.executable, "-m", "tests.support.bad_server", "http500") as url:
        started = time.monotonic()
        short_run(url, tmp_path, "--retry-policy", "naive", seconds="3s")
        elapsed_s = time.monotonic() - started
        requests = seen(url)["requests"]
    assert requests > 10 * (1 + 2 * most_requests(RetryPolicy(), elapsed_s)), requests


def test_every_first_request_waits_for_the_retry_after_the_preflight_was_given(tmp_path):
    """The preflight is refused with ``Retry-After: 2``: no user's request reaches the server before 2 s after the
    server stamped the preflight (the client's wait starts later still, when the answer arrived)."""
    with server(sys.executable, "-m", "tests.support.bad_server", "retry-after-first:2") as url:
        proc = short_run(url, tmp_path, seconds="4s")
        times = seen(url)["times"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert len(times) > 2 and min(times[1:]) - times[0] >= 2.0, [round(t - times[0], 3) for t in times[:6]]
    (row,) = read_csv(tmp_path / "run_llm_steps.csv")
    assert float(row["retry_wait_s"]) > 0  # the users' wait is counted as a retry wait
