"""The simulator benches' ``--sched`` (bench/_common.py): which scheduling the servers and the ideal writer get, and
the server's wait for its core (``server_wait_pct``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import _common
from _common import realtime_allowed, realtime_here, realtime_wanted, wait_s


def test_normal_is_never_realtime_and_asks_nothing(monkeypatch):
    monkeypatch.setattr(_common, "realtime_allowed", lambda: pytest.fail("normal must not probe"))
    assert realtime_wanted("normal") is False


@pytest.mark.parametrize("allowed", [True, False])
def test_auto_follows_what_this_user_may(monkeypatch, allowed):
    monkeypatch.setattr(_common, "realtime_allowed", lambda: allowed)
    assert realtime_wanted("auto") is allowed


def test_fifo_where_not_allowed_is_an_error_naming_what_is_needed(monkeypatch):
    monkeypatch.setattr(_common, "realtime_allowed", lambda: False)
    with pytest.raises(SystemExit) as error:
        realtime_wanted("fifo")
    assert "--sched fifo" in str(error.value) and "CAP_SYS_NICE" in str(error.value)


def test_without_a_core_of_its_own_auto_is_normal_and_fifo_an_error(monkeypatch):
    monkeypatch.setattr(_common, "realtime_allowed", lambda: True)
    assert realtime_wanted("auto", own_core=False) is False
    with pytest.raises(SystemExit) as error:
        realtime_wanted("fifo", own_core=False)
    assert "a core of its own" in str(error.value)
    assert realtime_wanted("fifo", own_core=True) is True


@pytest.mark.skipif(not realtime_allowed(), reason="this machine refuses SCHED_FIFO to this user")
def test_realtime_here_holds_fifo_inside_and_gives_it_back():
    assert os.sched_getscheduler(0) == os.SCHED_OTHER
    with realtime_here(True):
        assert os.sched_getscheduler(0) == os.SCHED_FIFO
        assert os.sched_getparam(0).sched_priority == 1
    assert os.sched_getscheduler(0) == os.SCHED_OTHER
    with realtime_here(False):
        assert os.sched_getscheduler(0) == os.SCHED_OTHER


def test_wait_is_a_growing_count_of_seconds_and_zero_for_a_process_gone():
    first = wait_s(os.getpid())
    assert 0 <= first <= wait_s(os.getpid())
    assert wait_s(2**22 + 12345) == 0.0  # beyond pid_max's default: no such process
