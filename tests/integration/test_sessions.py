"""Replaying a trace's sessions: each later turn follows the answer before it by its ``delay``, carries the history
(its body and its prompt grow by what came before), and a session stays whole on one process, on both HTTP paths.

Timing is read where it is known: a server that answers at once (tests/support/bad_server.py ``ok``) notes when each
request's head arrived and how long its body was, so each gap between a session's turns is the turn's delay plus one
answer over loopback.
"""

import json
import statistics
import sys
import urllib.request

import pytest

from tests.support.procs import (
    PREFLIGHT_REQUESTS,
    ROOT,
    accepted,
    at_once,
    free_port,
    read_csv,
    run_locust,
    server,
    sim,
)

pytestmark = pytest.mark.slow  # end-to-end runs: deselected by -m 'not slow'

DELAYS_MS = (200, 300)  # the think times before turns 2 and 3
OWN = (64, 48, 40)  # each turn's own input tokens


def write(path, entries):
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return str(path)


def one_session(path):
    """One session of three turns: a single arrival, so the trace repeats every second (at 0, 1, 2, 3 s); each
    session ends within 0.6 s, before the next begins."""
    return write(
        path,
        [
            {"timestamp": 0, "session_id": "s", "input_length": OWN[0], "output_length": 3},
            {"session_id": "s", "delay": DELAYS_MS[0], "input_length": OWN[1], "output_length": 3},
            {"session_id": "s", "delay": DELAYS_MS[1], "input_length": OWN[2], "output_length": 3},
        ],
    )


def many_sessions(path, n=8):
    """``n`` sessions of three turns 0.5 s apart (a 4 s period), 16 output tokens a turn."""
    entries = []
    for s in range(n):
        entries.append({"timestamp": 500 * s, "session_id": s, "input_length": OWN[0], "output_length": 16})
        for turn in (1, 2):
            delay = DELAYS_MS[turn - 1]
            entries.append({"session_id": s, "delay": delay, "input_length": OWN[turn], "output_length": 16})
    return write(path, entries)


STEP = ("--headless", "--trace-speeds", "1", "--step-duration", "4s", "--warmup", "1s", "--stop-timeout", "10")


def timed(out):
    """The one-session trace against a server that answers at once; what the server saw of each request."""
    out.mkdir()
    with server(sys.executable, "-m", "tests.support.bad_server", "ok") as url:
        proc = run_locust(
            *STEP, "--trace", one_session(out / "trace.jsonl"), "--host", url, "--model", "m", "--csv",
            str(out / "run"), "--min-step-requests", "1", cwd=out,
        )  # fmt: skip
        with urllib.request.urlopen(url.rsplit("/v1", 1)[0] + "/seen", timeout=10) as resp:
            seen = json.load(resp)
    return proc, out, seen


def replayed(out, *extra, locustfile=None):
    """The 8-session trace against the default simulator (its prefix cache on): what the rows and turns say."""
    out.mkdir()
    with sim() as base:
        args = ("--host", base, "--model", "sim-llm", "--csv", str(out / "run"), *extra)
        kw = {"locustfile": locustfile} if locustfile else {}
        proc = run_locust(*STEP, "--trace", many_sessions(out / "trace.jsonl"), *args, cwd=out, **kw)
    return proc, out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("sessions")
    port = str(free_port())
    workers = ("--processes", "2", "--master-bind-port", port, "--master-port", port)
    return at_once(
        {
            "timed": lambda: timed(root / "timed"),
            "workers": lambda: replayed(root / "workers", *workers),
            "sdk": lambda: replayed(root / "sdk", locustfile=ROOT / "locustfile_sdk.py"),
        }
    )


def test_each_later_turn_follows_the_answer_before_it_by_its_delay_and_carries_the_history(runs):
    proc, out, seen = runs["timed"]
    assert accepted(proc.returncode, proc.stdout), proc.stdout[-3000:]
    (row,) = read_csv(out / "run_llm_steps.csv")
    answer_ms = float(row["e2e_p50_ms"])  # the client's: from its send to the answer's end
    times = seen["times"][PREFLIGHT_REQUESTS:]
    lengths = [int(n) for n in seen["headers"]["content-length"][PREFLIGHT_REQUESTS:]]
    sessions = [(times[i : i + 3], lengths[i : i + 3]) for i in range(0, len(times) - len(times) % 3, 3)]
    assert len(sessions) >= 3, (times, lengths)
    late = []
    for heads, sizes in sessions:
        # the history: each body holds the one before it, its answer and the turn's own text (4 bytes a token)
        assert sizes[1] > sizes[0] + 4 * OWN[1] - 8 and sizes[2] > sizes[1] + 4 * OWN[2] - 8, sizes
        for k, delay_ms in enumerate(DELAYS_MS):
            late.append((heads[k + 1] - heads[k]) * 1000 - delay_ms)
    # nothing is sent before the answer before it (its five events 5 ms apart: the last one at least 20 ms after the
    # head) and the delay after it; past those, the median gap holds the answer as the client timed it and a timer's
    # wake-up and a loopback send, a few tenths of a millisecond (a stall of this shared machine moves single gaps,
    # not the median of 6 or more)
    assert min(late) >= 20 - 1, late  # the head's time is noted once it is read: a millisecond's slack
    assert -2 <= statistics.median(late) - answer_ms <= 10, (late, answer_ms)


@pytest.mark.parametrize("name", ["workers", "sdk"])
def test_a_sessions_prompt_grows_by_its_history_and_the_cache_serves_it(runs, name):
    proc, out = runs[name]
    assert accepted(proc.returncode, proc.stdout), proc.stdout[-3000:] + proc.stderr[-3000:]
    (row,) = read_csv(out / "run_llm_steps.csv")
    assert int(row["sessions"]) > 0 and int(row["turns"]) == int(row["client_requests"]) > int(row["sessions"])
    if name == "workers":
        assert row["workers"] == "2"
    turns = {int(t["turn"]): t for t in read_csv(out / "run_llm_turns.csv")}
    assert sorted(turns) == [1, 2, 3], turns
    prompt = [float(turns[k]["prompt_tokens_p50"]) for k in (1, 2, 3)]
    # each turn resends the one before, its 16-token answer and its own text: a session kept whole, in one process
    assert prompt[1] >= prompt[0] + 16 + OWN[1] and prompt[2] >= prompt[1] + 16 + OWN[2], prompt
    # the simulator's prefix cache holds the history a later turn resends
    assert float(turns[1]["cached_prompt_tokens_p50"]) == 0 and float(turns[3]["cached_prompt_tokens_p50"]) > prompt[0]
