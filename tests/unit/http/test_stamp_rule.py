"""Which stamp a plain read takes (docs/architecture.md, "Stamps"): the kernel's receive time in a turn that follows
more than ``WORK_NS`` of the loop's own work, the moment the poll returned in any other turn. On the real loop."""

import time

import gevent
import pytest

import locust_llm.http.loop as loop_module
from locust_llm.protocol.metrics import Outcome
from tests.unit.http.test_pump import Turn, kernel_stamping  # noqa: F401  (a fixture)


def watch_turns(cell, each):
    """A check watcher that runs ``each()`` in every turn after the one that keeps ``cell`` (it has the highest
    priority; this one the next), before the turn's reads."""
    watcher = gevent.get_hub().loop.check(ref=False, priority=1)
    watcher.start(each)
    return watcher


def test_a_turn_reads_the_kernel_s_times_after_the_loop_s_work_or_a_long_wait_not_after_a_short_one():
    """On the real loop. Twenty times a greenlet works for five times ``WORK_NS`` (by the wall clock) in one turn,
    woken after the poll by a timer or, every other time, before it by a callback (``sleep(0)``: where gevent switches
    to the users that the pump wakes): the next turn reads the kernel's times, every time. So does every turn whose
    poll waited more than ``WAIT_NS`` (five sleeps of 20 ms make some). Of the turns that follow neither (a timer due
    at once: no wait, a few calls), at least one does not (a rule that always took the kernel's time fails here)."""
    cell = loop_module.loop_turn(time.perf_counter_ns)
    turns = {}
    watcher = watch_turns(
        cell, lambda: turns.__setitem__(cell.count, (cell.kernel_stamps, cell.start_ns - cell.polling_ns))
    )
    worked, quick = [], []
    try:
        for i in range(20):
            gevent.sleep(0.002)
            if i % 2:
                gevent.sleep(0)  # woken by a callback: before the next poll, in gevent's callbacks
            worked.append(cell.count)  # the last turn whose poll came before this work
            until = time.perf_counter_ns() + 5 * loop_module.WORK_NS  # less than WAIT_NS: never taken for a wait
            while time.perf_counter_ns() < until:
                pass
            gevent.sleep(1e-6)  # a timer due at once: the next poll does not wait
            for _ in range(3):
                gevent.sleep(1e-6)
                quick.append(cell.count)  # the turn whose timer woke it
        for _ in range(5):
            gevent.sleep(0.02)
    finally:
        watcher.stop()
    assert all(turns[turn + 1][0] for turn in worked), turns
    waited = [turn for turn, (_, wait) in turns.items() if wait > loop_module.WAIT_NS]
    assert len(waited) >= 5 and all(turns[turn][0] for turn in waited), turns
    others = [turns[turn][0] for turn in quick if turn - 1 not in worked and turn not in waited]
    assert others and not all(others), turns


@pytest.mark.usefixtures("kernel_stamping")
@pytest.mark.parametrize("after_work", [False, True])
def test_a_plain_read_takes_the_poll_s_return_unless_its_turn_follows_work(after_work):
    """Every turn said after work or not by the test (a watcher that runs after the turn's own): five streams whose
    sockets get the kernel's receive times, their next tokens written at once. Not after work, each read is stamped
    with the start of a turn, exactly; after work, with the kernel's time of its bytes, which is none of the turns'
    starts (they arrived inside the writes, before any poll returned with them)."""
    cell = loop_module.loop_turn(time.perf_counter_ns)
    starts = set()

    def said():
        cell.kernel_stamps = after_work
        starts.add(cell.start_ns)

    watcher = watch_turns(cell, said)
    turn = Turn(answered=5, clock=time.perf_counter_ns)
    try:
        turn.spawn(5)
        assert turn.started.wait(10), "the five streams did not all get their first token"
        turn.send_rest()
        results = turn.results()
    finally:
        turn.close()
        watcher.stop()
    assert [(r.outcome, len(r.token_ns)) for r in results] == [(Outcome.OK, 2)] * 5
    assert [r.token_ns[1] in starts for r in results] == [not after_work] * 5, (results, sorted(starts))
