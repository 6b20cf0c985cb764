"""The master's watch over its workers, against a runner whose workers' states the test sets: a lost worker is lost
for the run (told to quit, its later reports set aside), the last heard time is kept, and --min-workers fires once."""

import time
from types import SimpleNamespace

from locust_llm.measure.stats import StatsKey
from locust_llm.runtime.workers import WorkerWatch


class Clients(dict):
    @property
    def all(self):
        return list(self.values())


def watch(*workers):
    sent = []
    clients = Clients({w: SimpleNamespace(id=w, state="running") for w in workers})
    runner = SimpleNamespace(clients=clients, send_message=lambda kind, data, client_id: sent.append((kind, client_id)))
    w = WorkerWatch(SimpleNamespace(runner=runner))
    return w, clients, sent


def test_a_worker_gone_missing_is_lost_for_the_run_and_told_to_quit():
    w, clients, sent = watch("a", "b", "c")
    assert w.check(1) == (3, [])  # the first check knows who is there
    clients["b"].state = "missing"
    assert w.check(2) == (2, ["b"]) and w.lost == {"b": 2}
    assert "b" not in clients and sent == [("quit", "b")]  # no users go to it again, and it stops if it comes back
    clients["b"] = SimpleNamespace(id="b", state="running")  # it self-heals (Locust takes it back on a heartbeat)
    assert w.check(3) == (2, []) and w.alive() == {"a", "c"}


def test_a_lost_workers_later_reports_are_set_aside_and_it_is_told_again_to_quit():
    w, clients, sent = watch("a", "b")
    w.check(1)
    clients["a"].state = "missing"
    w.check(1)
    assert w.accept("b") and not w.accept("a") and not w.accept("a")
    assert w.set_aside == {"a": 2} and sent == [("quit", "a")] * 3


def test_min_workers_fires_once_when_fewer_are_left():
    w, clients, _ = watch("a", "b", "c")
    calls = []
    w.min_workers, w.on_too_few = 3, calls.append
    w.check(1)
    clients["c"].state = "missing"
    w.check(1)
    w.check(2)
    assert calls == [2]


def test_the_workers_rows_say_when_each_was_last_heard_and_where_it_was_lost():
    w, clients, _ = watch("a", "b")
    w.check(1)
    w.heard_ns = {"a": 3_500_000_000, "b": 1_250_000_000}
    clients["b"].state = "missing"
    w.check(2)
    shares = {
        worker: {StatsKey(1, "m", "steady"): {"requests": 5, "ok": 5, "completion_tokens": 50}} for worker in "ab"
    }
    rows = w.rows(shares, {1: {"a": 12.34}}, began_ns=1_000_000_000)
    assert [(r["worker"], r["last_heard_s"], r["lost_in_step"], r["cpu_max_pct"]) for r in rows] == [
        ("a", 2.5, None, 12.3),
        ("b", 0.25, 2, None),
    ]


def test_a_lost_worker_is_named_with_what_it_reported_and_a_bound_on_what_it_did_not():
    """Its reports count 12 requests; 3 users silent for 2 s at a step E2E p50 of 0.6 s had at most 3 x (1 +
    ceil(2 / 0.6)) = 15 more in flight or started, which nothing counts."""
    w, clients, _ = watch("a", "b")
    clients["b"].user_count = 3
    w.check(1)
    clients["b"].state, clients["b"].user_count = "missing", 0  # as Locust marks it: its users zeroed
    heard = time.perf_counter_ns() - 2_000_000_000
    w.heard_ns["b"] = heard
    w.check(2)  # found lost 2 s (and the microseconds of this test) after its last report
    shares = {"b": {StatsKey(1, "m", "steady"): {"requests": 5}, StatsKey(2, "m", "steady"): {"requests": 7}}}
    (lost,) = w.lost_workers(shares, began_ns=heard - 500_000_000, e2e_s={2: 0.6})
    assert 2.0 <= lost.pop("silent_s") < 2.1
    assert lost == {
        "worker": "b",
        "lost_in_step": 2,
        "last_heard_s": 0.5,
        "requests_reported": 12,
        "users": 3,
        "unreported_at_most": 15,
        "reports_set_aside": 0,
    }
    w.accept("b")  # it thaws: its report is set aside, and the silence before its loss stands
    (lost,) = w.lost_workers(shares, None, {})
    assert lost["reports_set_aside"] == 1 and lost["silent_s"] < 2.1 and lost["last_heard_s"] is None
    assert lost["unreported_at_most"] is None  # no E2E in that step: not guessed
