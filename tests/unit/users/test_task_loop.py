"""The next request goes from inside the user's task where Locust's task loop would only come back to it at once,
and through Locust's loop everywhere else (``LLMUserMixin._next_in_task``), through Locust's own task loop.

Locust monkey-patches the interpreter on import, so the users run in their own process (tests/support/loop_probe.py).
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = Path(__file__).resolve().parents[2] / "support" / "loop_probe.py"


@pytest.fixture(scope="module")
def got():
    out = subprocess.run([sys.executable, str(PROBE)], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_state_compared_is_locusts_own(got):
    assert got["running"] is True


def test_requests_that_wait_on_the_loop_follow_each_other_in_one_task_and_the_others_run_in_their_waits(got):
    assert got["Waits"] == {
        "requests": 50,
        "tasks": 1,
        "locust_waits": 0,
        "zero_sleeps": 0,
        "think_sleeps": 0,
        "think_draws": 0,
        "others_ran_between": 49,
        "ended": True,
    }


def test_a_request_that_never_yields_is_followed_by_a_zero_sleep_so_the_others_run_between_every_two(got):
    assert got["NeverYields"] == {
        "requests": 50,
        "tasks": 1,
        "locust_waits": 0,
        "zero_sleeps": 49,
        "think_sleeps": 0,
        "think_draws": 0,
        "others_ran_between": 49,
        "ended": True,
    }


def test_a_graceful_stop_during_a_request_ends_the_user_after_it_through_locusts_wait(got):
    assert got["StopsItself"] == {
        "requests": 3,
        "tasks": 1,
        "locust_waits": 1,
        "zero_sleeps": 0,
        "think_sleeps": 0,
        "think_draws": 2,
        "others_ran_between": 2,
        "ended": True,
    }


def test_a_think_time_is_drawn_once_per_request_and_slept_by_locust_after_every_task(got):
    assert got["Thinks"] == {
        "requests": 50,
        "tasks": 50,
        "locust_waits": 49,
        "zero_sleeps": 0,
        "think_sleeps": 49,
        "think_draws": 49,
        "others_ran_between": 49,
        "ended": True,
    }


@pytest.mark.parametrize("kind", ["TwoTasks", "OwnWaitTime"])
def test_a_class_with_tasks_or_a_wait_time_of_its_own_goes_through_locusts_loop_after_every_request(got, kind):
    assert got[kind] == {
        "requests": 50,
        "tasks": 50,
        "locust_waits": 49,
        "zero_sleeps": 49,
        "think_sleeps": 0,
        "think_draws": 0,
        "others_ran_between": 49,
        "ended": True,
    }
