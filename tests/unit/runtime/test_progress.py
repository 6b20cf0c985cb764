"""The console of a run: the step lines, each step's result once it has settled, and a master's rule for that."""

import logging
from types import SimpleNamespace

import pytest

from locust_llm.measure.rows import format_done
from locust_llm.runtime.collector import REPORT_KEY, Collector
from locust_llm.runtime.progress import SETTLE_S, Progress, clock_text
from locust_llm.shapes.search import Outcome, Search

S = 1_000_000_000


def row(step, users=8, **kw):
    base = {
        "step": step,
        "users": users,
        "model": "m",
        "requests": 200,
        "status_429": 3,
        "ttft_p99_ms": 29.26,
        "itl_p99_ms": 15.554,
        "output_tok_s": 1137.6,
        "valid": True,
        "invalid_reasons": "",
        "offered_req_s": None,
    }
    return {**base, **kw}


def test_a_result_line_rounds_as_it_says():
    assert format_done(row(2, 16)) == "16 users (m): TTFT p99 29.3 ms, ITL p99 15.55 ms, 1,138 tok/s, 1.5% 429, valid"
    line = format_done(row(1, valid=False, invalid_reasons="worker lost", ttft_p99_ms=None, offered_req_s=4.0))
    assert line == "4 req/s (m): TTFT p99 -, ITL p99 15.55 ms, 1,138 tok/s, 1.5% 429, INVALID: worker lost"
    csv_like = {k: ("" if v is None else str(v)) for k, v in row(3).items()}  # as read back from the CSV
    assert format_done(csv_like) == format_done(row(3))


@pytest.mark.parametrize(("seconds", "text"), [(0, "0:00"), (90, "1:30"), (59.6, "1:00"), (3723, "1:02:03")])
def test_time_left_reads_as_a_clock(seconds, text):
    assert clock_text(seconds) == text


class Clock:
    def __init__(self):
        self.now = 0

    def __call__(self):
        return self.now


def test_each_result_waits_until_its_step_has_settled_and_is_printed_once(caplog):
    clock, settled = Clock(), {1: False}
    progress = Progress(lambda: [row(1), row(2, 16)], lambda step: settled.get(step, True), clock)
    caplog.set_level(logging.INFO, logger="locust_llm")
    progress.step_began(1, 3, "8 users", 30.0, 5.0, "")
    clock.now = 30 * S
    progress.step_began(2, 3, "16 users", 30.0, 7.5, ", covering ...")
    assert "locust-llm step 1/3: 8 users, 30 s (warm-up 5.0 s) — about 1:30 left" in caplog.messages
    assert "locust-llm step 2/3: 16 users, 30 s (warm-up 7.5 s, covering ...) — about 1:00 left" in caplog.messages
    clock.now += int(SETTLE_S * S) - 1
    progress.poll()  # too soon: a request observed before the boundary may not be recorded yet
    settled[1] = True
    progress.poll()
    assert not any("done" in m for m in caplog.messages)
    clock.now += 1
    settled[1] = False
    progress.poll()  # a worker has not reported since
    assert not any("done" in m for m in caplog.messages)
    settled[1] = True
    progress.poll()  # settled now: printed at the next poll, after the loop's turn in between
    assert not any("done" in m for m in caplog.messages)
    progress.poll()
    done = [m for m in caplog.messages if "done" in m]
    assert done == [f"locust-llm step 1/3 done: {format_done(row(1))}"]
    progress.finish([row(1), row(2, 16)])  # the end: the rest, once
    done = [m for m in caplog.messages if "done" in m]
    assert done[1:] == [f"locust-llm step 2/3 done: {format_done(row(2, 16))}"]


def test_a_search_probe_has_no_total_and_a_new_run_starts_afresh(caplog):
    progress = Progress(lambda: [row(1)], lambda step: True, Clock())
    caplog.set_level(logging.INFO, logger="locust_llm")
    progress.step_began(1, None, "8 users", 30.0, 5.0, "")
    assert caplog.messages[-1] == "locust-llm step 1: 8 users, 30 s (warm-up 5.0 s)"
    progress.finish([row(1)])
    progress.step_began(1, 2, "8 users", 30.0, 5.0, "")
    assert progress.printed == set() and progress.total == 2


def master_with(workers):
    runner = SimpleNamespace(clients=SimpleNamespace(all=workers), send_message=lambda *a, **k: None)
    return Collector(SimpleNamespace(runner=runner, events=None), "master")


def report(c, worker, at):
    from locust_llm.measure.stats import StatsTable

    c._on_worker_report(worker, {REPORT_KEY: {"run": c.run, "stats": StatsTable().to_wire(), "at": at}})


def test_a_master_waits_for_every_connected_worker_to_report_after_the_step():
    a, b, gone = (SimpleNamespace(id=n, state=s) for n, s in (("a", "running"), ("b", "running"), ("c", "missing")))
    c = master_with([a, b, gone])
    assert not c.settled(1)  # nobody reported yet
    report(c, "a", [2, int(SETTLE_S * S), False])
    report(c, "b", [2, int(SETTLE_S * S) - 1, False])  # in step 2, but too soon after learning of it
    assert not c.settled(1)
    report(c, "b", [1, 29 * S, False])  # still in step 1
    assert not c.settled(1)
    report(c, "b", [2, 3 * S, False])
    assert c.settled(1) and not c.settled(2)  # the missing worker does not hold it back
    report(c, "a", [2, 9 * S, True])  # ended
    report(c, "b", [2, 9 * S, True])
    assert c.settled(2)


def test_a_worker_says_where_it_is_in_each_report():
    runner = SimpleNamespace(send_message=lambda *a, **k: None)
    c = Collector(SimpleNamespace(runner=runner, events=None), "worker")
    data = {}
    c._on_report_to_master("w", data)
    assert data[REPORT_KEY]["at"] == [0, 0, False]
    c.timeline.begin(3, 8, 0, 0)
    data = {}
    c._on_report_to_master("w", data)
    step, since_ns, ended = data[REPORT_KEY]["at"]
    assert step == 3 and since_ns > 0 and ended is False


def test_the_search_says_about_how_many_probes_are_left():
    search = Search(8, 0.1, 512)
    assert search.probes_left() is None  # growing: its end is not known
    for passed in (True, True, True):
        search.record(Outcome(passed))
    search.record(Outcome(False))  # 8, 16, 32 pass; 64 fails
    assert search.bracket == (32, 64)
    # 32 wide, 3.2 enough: 32 -> 16 -> 8 -> 4 -> 2
    assert search.probes_left() == 4
    probes = 0
    while search.next() is not None:
        search.record(Outcome(search.next().load <= 40))
        probes += 1
    assert probes <= 4 and search.probes_left() == 0
