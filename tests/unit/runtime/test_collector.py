import time
from types import SimpleNamespace

import pytest

from locust_llm.measure.health import StepHealth, Validity, invalid_reasons
from locust_llm.measure.stats import StatsKey, StatsTable
from locust_llm.protocol.metrics import RequestResult
from locust_llm.runtime.collector import REPORT_KEY, Collector

MS = 1_000_000


class Clients(dict):
    """Locust's workers by id, and ``all`` of them."""

    @property
    def all(self):
        return list(self.values())


class FakeRunner:
    def __init__(self):
        self.sent = []
        self.clients = Clients()

    def send_message(self, kind, data, client_id=None):
        self.sent.append((kind, data, client_id))


def collector(role):
    env = SimpleNamespace(runner=FakeRunner(), events=None)
    return Collector(env, role)


def result(sent_ns, tokens=3, lag_ns=0):
    token_ns = [sent_ns + 100 * MS + i * 10 * MS for i in range(tokens)]
    return RequestResult("m", sent_ns - lag_ns, sent_ns, token_ns[-1], token_ns=token_ns, completion_tokens=tokens)


def test_master_broadcasts_step_changes_and_the_end():
    c = collector("master")
    c.begin_step(1, 8, warmup_ns=5 * 10**9)
    c.end()
    kinds = [k for k, _, _ in c.environment.runner.sent]
    assert kinds == ["locust_llm_step", "locust_llm_end"]
    assert c.environment.runner.sent[0][1]["users"] == 8


def test_worker_stamps_steps_with_its_own_clock_and_ships_deltas_once():
    w = collector("worker")
    w._on_step_message(None, SimpleNamespace(data={"step": 1, "users": 4, "warmup_ns": 0, "elapsed_ns": 10**9}))
    mark = w.timeline.current
    assert mark.step == 1 and mark.users == 4
    now = mark.began_ns + 2 * 10**9
    w.record(result(now))
    data = {}
    w._on_report_to_master("w1", data)
    shipped = StatsTable.from_wire(data[REPORT_KEY]["stats"])
    assert shipped.get(StatsKey(1, "m", "steady")).counts["requests"] == 1
    again = {}
    w._on_report_to_master("w1", again)
    assert again[REPORT_KEY]["stats"] == []


def test_master_merges_reports_per_worker_and_drops_malformed_ones():
    m = collector("master")
    for worker in ("w1", "w2"):
        table = StatsTable()
        table.add(result(10**9), lambda t: (1, "steady"))
        m._on_worker_report(worker, {REPORT_KEY: {"stats": table.to_wire(), "cpu": {"1": 42.0}}})
    m._on_worker_report("w3", {REPORT_KEY: {"stats": [["x"]]}})
    m._on_worker_report("w4", {})  # a report without our data (e.g. another plugin's) is ignored
    assert m.results().get(StatsKey(1, "m", "steady")).counts["requests"] == 2
    assert {r["worker"] for r in m.worker_rows()} == {"w1", "w2"}
    assert m.health[1].cpu_max_pct == {"w1": 42.0, "w2": 42.0}


def test_invalid_reasons_name_the_saturated_generator_the_lost_worker_and_the_lag():
    table = StatsTable()
    table.add(result(10**9, lag_ns=50 * MS), lambda t: (1, "steady"))
    health = StepHealth(cpu_max_pct={"w1": 95.0, "master": 10.0}, lost=["w2"])
    reasons = invalid_reasons(1, health, table, max_cpu_pct=80.0, max_lag_ms=10.0)
    assert reasons == [
        "generator saturated: w1 CPU 95% > 80%",
        "worker lost during the step: w2",
        "scheduling lag p99 50.0 ms > 10 ms (m)",
    ]
    assert invalid_reasons(1, StepHealth(), StatsTable(), 80.0, 10.0) == []


def test_a_worker_going_missing_is_noticed_once():
    m = collector("master")
    m.begin_step(1, 8, 0)
    alive = [SimpleNamespace(id="w1", state="running"), SimpleNamespace(id="w2", state="running")]
    m.environment.runner.clients.update((c.id, c) for c in alive)
    m.sample_health()
    alive[1].state = "missing"
    m.sample_health()
    m.sample_health()
    assert m.health[1].lost == ["w2"] and m.health[1].workers_min == 1 and m.health[1].workers_max == 2
    assert ("quit", None, "w2") in m.environment.runner.sent  # told to quit, should it come back


def test_a_worker_that_joins_mid_run_takes_users_from_the_next_step():
    """Locust's handler calls start() right after the connect event, which would re-spread the users in the middle
    of the step: that one call is skipped; the next turn of the loop restores start() whatever happened."""
    import gevent

    m = collector("master")
    runner = m.environment.runner
    started = []
    type(runner).start = lambda self, *args: started.append(args)  # the runner's own start(), recorded
    m.begin_step(1, 8, warmup_ns=0)
    m.workers.check(1)
    m._on_worker_connect("late")
    runner.start(8, 1.0)  # what Locust's handler does next
    assert started == []
    gevent.sleep(0)
    runner.start(16, 1.0)  # the next step's
    assert started == [(16, 1.0)] and "start" not in vars(runner)
    del type(runner).start


def test_a_steps_e2e_is_its_steady_windows_not_the_requests_carried_over_from_the_load_before():
    """The previous step's E2E p90 (``--warmup auto``, validity's carry-over rule) is that step's own load's: its
    warm-up holds requests sent under the load before it (here 5 s ones, against 100 ms at its own). A step with no
    steady request yet falls back to its warm-up's."""
    c = collector("local")
    c.begin_step(1, 4, warmup_ns=10**9)
    began = c.timeline.current.began_ns

    def request(sent, e2e):
        return RequestResult("m", sent, sent, sent + e2e, token_ns=[sent + e2e // 2, sent + e2e], completion_tokens=2)

    for i in range(5):  # sent 5 s before the step, under the load before it: they end in its warm-up
        c.record(request(began - 5 * 10**9 + i * MS, 5 * 10**9))
    e2e, requests, _ = c.step_e2e(1)
    assert requests == 5 and e2e.quantile(0.9) >= 4.9e9  # nothing steady yet: the warm-up's
    for i in range(20):
        c.record(request(began + 2 * 10**9 + i * 10 * MS, 100 * MS))
    e2e, requests, _ = c.step_e2e(1)
    assert requests == 25 and 0.09e9 <= e2e.quantile(0.9) <= 0.11e9


def test_windows_exclude_the_warmup_and_carry_the_health():
    c = collector("local")
    c.begin_step(1, 4, warmup_ns=0)
    c.health[1].add_cpu("local", 12.5)
    c.end()
    (window,) = c.windows(Validity(max_cpu_pct=80.0, max_lag_ms=10.0))
    assert window.step == 1 and window.cpu_max_pct == 12.5 and window.invalid_reasons == ()


def test_one_steps_rows_are_that_steps_rows_of_the_whole_table():
    """A search asks each second for its probe's row alone: the same row as the whole table's, made from that step's
    statistics only."""
    c = collector("local")
    for step, users in ((1, 4), (2, 8), (3, 16)):
        c.begin_step(step, users, warmup_ns=0)
        began = c.timeline.current.began_ns
        for i in range(20 * step):  # requests of 3 us, all ended before the next step is stamped
            sent = began + 1 + 10 * i
            c.record(RequestResult("m", sent - step, sent, sent + 3000, token_ns=[sent + 1000, sent + 3000]))
        while time.perf_counter_ns() <= began + 10 * 20 * step + 3001:
            pass
    c.end()
    validity = Validity(max_cpu_pct=80.0, max_lag_ms=10.0)
    whole = {row["step"]: row for row in c.rows(validity, judge_open=True)}
    (alone,) = c.rows(validity, judge_open=True, steps=(2,))
    assert alone == whole[2] and alone["requests"] == 40
    assert [w.step for w in c.windows(validity, steps=(1, 3))] == [1, 3]
    assert {key.step for key, _ in c.results((3,))} == {3}


def test_a_step_too_short_for_its_requests_is_invalid():
    from locust_llm.measure.stats import StatsTable as Table

    table = Table()
    stats = table.get(StatsKey(1, "m", "steady"))
    stats.counts["requests"] = 4  # 4 requests of 6 s each ending in a 5 s window
    for _ in range(4):
        stats.hist["e2e"].record(6 * 10**9)
    reasons = invalid_reasons(1, StepHealth(), table, 80.0, 10.0, window_s=5.0, min_requests=10)
    assert reasons[0] == "too few completed requests in the steady window: 4 < 10 (lengthen --step-duration)"
    assert reasons[1].startswith("requests too long for the step: E2E p50 6.0 s > the whole of the 5.0 s steady")
    assert invalid_reasons(1, StepHealth(), table, 80.0, 10.0, window_s=60.0, min_requests=4) == []


@pytest.mark.parametrize(("growth", "overloaded"), [(0, False), (21, False), (60, True)])
def test_an_open_loop_step_whose_backlog_grew_is_a_finding_not_an_invalid_step(growth, overloaded):
    """Requests of 6 s in a 5 s window are too long, but not when the step's in-flight count grew: they are long
    because the endpoint fell behind, which is what the step found. In flight ~25: a stable queue varies by 3 sigma
    = 3 sqrt(50) = 21.2 between the window's two ends."""
    from locust_llm.measure.stats import StatsTable as Table

    table = Table()
    stats = table.get(StatsKey(1, "m", "steady"))
    stats.counts["requests"] = stats.counts["client_requests"] = 40
    stats.counts["arrivals"] = 40 + growth
    for _ in range(40):
        stats.hist["e2e"].record(6 * 10**9)
        stats.hist["in_flight"].record(25 * 1000)
    carry = StepHealth(carryover=(1.0, 3.0))
    reasons = invalid_reasons(1, carry, table, 80.0, 10.0, window_s=5.0, min_requests=10)
    assert (reasons == []) is overloaded, reasons


def test_a_warm_up_shorter_than_the_previous_requests_is_a_reason():
    health = StepHealth(carryover=(10.0, 22.7))
    (reason,) = invalid_reasons(2, health, StatsTable(), 80.0, 10.0)
    assert reason.startswith("warm-up 10.0 s shorter than the previous step's E2E p90 22.7 s")


def _deferred_scenario(monkeypatch, limit):
    """A worker's records interleaved with a late step message (its step began before some of them), reports, the
    end and a reset; what it ships, with results filed in batches of ``limit``."""
    import locust_llm.runtime.collector as collector_module

    clock = [0]
    monkeypatch.setattr(collector_module, "PENDING_LIMIT", limit)
    monkeypatch.setattr(collector_module.time, "perf_counter_ns", lambda: clock[0])
    w = collector("worker")
    shipped = []

    def report():
        data = {}
        w._on_report_to_master("w1", data)
        shipped.append(data[REPORT_KEY]["stats"])

    def record(r, good=False):
        """An attempt, and the client request it ended (it began 30 ms before the attempt was sent)."""
        w.record(r)
        w.record_client("m", r.sent_ns - 30 * MS, r, good)

    for i in range(5):  # before the worker knows the step: at 0.1 s to 0.9 s
        record(result((100 + 200 * i) * MS, tokens=4), good=i % 2 == 0)
    clock[0] = 2000 * MS  # told late: step 1 began 1.5 s ago, at 0.5 s, with no warm-up
    w._on_step_message(None, SimpleNamespace(data={"step": 1, "users": 4, "warmup_ns": 0, "elapsed_ns": 1500 * MS}))
    for i in range(40):
        record(result((2000 + 20 * i) * MS, tokens=3), good=i % 3 == 0)
    assert len(w._pending) < limit and len(w._clients) <= limit  # filed as they come, in batches: what waits is bounded
    report()
    for i in range(10):
        record(result((3000 + 50 * i) * MS, tokens=5))
    clock[0] = 3300 * MS
    w._on_end_message(None, SimpleNamespace(data={}))
    for i in range(3):
        record(result((3400 + 10 * i) * MS))  # ends after the end: drain
    report()
    record(result(4000 * MS))
    w.clear()  # Locust's reset: what was pending is forgotten with the rest
    report()
    return shipped


@pytest.mark.parametrize("tokens, batch", [(2, 128), (64, 128), (300, 28), (8192, 1), (0, 128)])
def test_a_batch_is_filed_at_128_results_or_once_they_hold_8192_tokens(tokens, batch):
    from locust_llm.runtime.collector import PENDING_LIMIT, PENDING_TOKENS

    assert (PENDING_LIMIT, PENDING_TOKENS) == (128, 8192)
    c = collector("local")
    filed = []
    c.table.add_all = lambda results, _locate: filed.append(len(results))
    for i in range(3 * batch):
        r = result((1000 + i) * MS, tokens=max(tokens, 1))
        if not tokens:
            r.token_ns = []  # a failure before its first token
        c.record(r)
    assert filed == [batch, batch, batch] and c._pending == [] and c._pending_tokens == 0
    c.record(result(5000 * MS, tokens=7))
    c.record_client("m", 4990 * MS, result(5000 * MS, tokens=7))
    c.clear()  # a reset forgets what waits, its tokens and client requests too
    assert c._pending == [] and c._pending_tokens == 0 and c._clients == []


@pytest.mark.parametrize("vector_min", [256, 0])
def test_results_filed_in_batches_equal_results_filed_at_once(monkeypatch, vector_min):
    """Also with a batch's ITL gaps always recorded by numpy (``record_gap_runs``), as big batches are."""
    import locust_llm.measure.histogram as histogram_module

    monkeypatch.setattr(histogram_module, "VECTOR_MIN_GAPS", vector_min)
    at_once = _deferred_scenario(monkeypatch, 1)
    batched = _deferred_scenario(monkeypatch, 32)
    assert batched == at_once
    steps = {(step, phase) for step, _model, phase, _stats in at_once[0]}
    assert steps == {(0, "warmup"), (1, "steady")} and at_once[2] == []  # the late step did not take the first ones
    assert {phase for _step, _model, phase, _stats in at_once[1]} >= {"drain"}
    clients = [stats["c"].get("client_requests", 0) for report in at_once for *_key, stats in report]
    good = [stats["c"].get("client_good", 0) for report in at_once for *_key, stats in report]
    assert sum(clients) == 58 and sum(good) == 3 + 14  # every client request shipped once, the reset's dropped
