"""The knee search on curves whose knee is known: it finds what the sweep's rule finds, also below its start."""

import itertools

import pytest

from locust_llm.measure.knee import latency_knee
from locust_llm.measure.sla import Sla
from locust_llm.shapes.criteria import Criterion
from locust_llm.shapes.knee_search import KneeSearch


def interpolated(points):
    """A curve through ``{load: value}``, straight between the given loads (flat beyond them)."""
    loads = sorted(points)

    def at(load):
        if load <= loads[0]:
            return points[loads[0]]
        for a, b in itertools.pairwise(loads):
            if a <= load <= b:
                return points[a] + (points[b] - points[a]) * (load - a) / (b - a)
        return points[loads[-1]]

    return at


def row(load, p99, itl, **extra):
    return {
        "users": load,
        "requests": 300,
        "ok": 300,
        "client_requests": 300,
        "client_ok": 300,
        "errors": 0,
        "ttft_p99_ms": p99,
        "itl_p50_ms": itl,
        "valid": True,
        **extra,
    }


def drive(search, p99_at, itl_ms, criterion=None, extra_at=None):
    """Run a knee search to its end against a curve, each probe judged against the row of the load it names."""
    criterion = criterion or Criterion("knee", Sla())
    rows = {}
    while (planned := search.next()) is not None:
        here = row(planned.load, p99_at(planned.load), itl_ms, **((extra_at or (lambda _: {}))(planned.load)))
        outcome = criterion.judge(here, rows.get(planned.reference))
        search.record(outcome, (len(search.probes) + 1,))
        if outcome.passed is not None:
            rows[planned.load] = here
    return search


# TTFT p99 (ms) by users and the decode step (ms), as measured: a llama.cpp server with 8 slots (1 thread: the tail
# rises smoothly with the batch, then the queue past 8 slots is a cliff), the default simulator (prefill alone at
# one user; from two on a request waits for the current decode step; the tail already waits at 32) and 4 slots
LLAMA_8 = ({1: 42.0, 2: 57.0, 4: 84.0, 8: 126.0, 9: 900.0, 16: 1709.0, 32: 3900.0}, 30.0)
DEFAULT_SIM = ({1: 1.8, 2: 24.0, 8: 25.2, 16: 29.3, 24: 31.0, 30: 34.0, 32: 195.6, 64: 2073.0, 128: 3883.0}, 17.0)
FOUR_SLOTS = ({1: 40.0, 2: 45.0, 3: 55.0, 4: 67.0, 5: 600.0, 8: 902.0, 16: 2000.0}, 15.0)


@pytest.mark.parametrize(
    ("server", "start", "sweep"),
    [
        (LLAMA_8, 1, (1, 2, 4, 8, 16)),  # the pair: the sweep said 8, the old search 4
        (DEFAULT_SIM, 8, (8, 16, 32, 64, 128)),
        (FOUR_SLOTS, 1, (1, 2, 4, 8, 16)),
    ],
)
def test_the_search_lands_in_the_bracket_the_sweep_finds(server, start, sweep):
    points, itl = server
    curve = interpolated(points)
    swept = latency_knee(list(sweep), [curve(u) for u in sweep], [itl] * len(sweep))
    search = drive(KneeSearch(start, 0.1, 512), curve, itl)
    low, high = swept.bracket
    assert search.complete and low <= search.answer < high, (search.bracket, swept)


@pytest.mark.parametrize("start", [64, 128])
def test_started_past_the_knee_it_answers_below_its_start(start):
    """The default simulator from 64 users (its analytic knee 34): the old search could never say less than 64. At
    128 users its provider cap (100 concurrent requests) refuses most requests with HTTP 429: past capacity too."""
    points, itl = DEFAULT_SIM

    def refused(load):
        return {"status_429": 180, "requests": 300} if load > 100 else {}

    search = drive(KneeSearch(start, 0.1, 512), interpolated(points), itl, extra_at=refused)
    assert search.complete and 16 <= search.answer < 32, search.as_dict()
    assert min(p.load for p in search.probes) <= 16  # it went down the ladder to a flat segment


def test_a_flat_curve_has_no_knee_up_to_the_maximum():
    search = drive(KneeSearch(4, 0.1, 64), lambda load: 50.0 + load * 0.1, 10.0)
    assert search.answer == 64 and search.bracket == (64, None) and "no knee up to" in search.reason


def test_a_bend_from_the_first_user_on_answers_one():
    search = drive(KneeSearch(8, 0.1, 512), lambda load: 50.0 * load**2, 10.0)  # faster than the load, everywhere
    assert search.answer == 1 and search.bracket == (1, 2)


def test_a_server_queue_fails_a_probe_whatever_its_latency():
    """The server's own metrics show a queue from 6 users on while the latency curve stays flat: the answer is 5."""

    def queue_at(load):
        waiting = 4 if load >= 6 else 0
        return {"server_scrapes": 20, "server_waiting_p50": waiting, "server_running_p50": min(load, 5)}

    search = drive(KneeSearch(2, 0.05, 512), lambda load: 60.0, 10.0, extra_at=queue_at)
    assert search.answer == 5 and search.bracket == (5, 6)
    assert any("past capacity: the server queues" in p.outcome.detail for p in search.probes)


def test_rates_are_searched_as_real_numbers_and_the_first_probe_is_judged_with_the_next():
    points, itl = FOUR_SLOTS
    search = drive(KneeSearch(2.0, 0.05, 64, integer=False), interpolated(points), itl)
    assert 4 <= search.answer < 5 and search.text(search.answer).endswith("req/s")
    first, second = search.probes[:2]
    assert first.reference is None and second.reference == first.load and "judged with the next" in first.outcome.detail


def test_an_invalid_probe_is_run_again_and_twice_invalid_stops_not_sure():
    search = KneeSearch(8, 0.1, 512)
    criterion = Criterion("knee", Sla())
    bad = {**row(8, 30.0, 10.0), "valid": False, "invalid_reasons": "generator saturated"}
    search.record(criterion.judge(bad), (1,))
    assert search.next().kind == "retry"
    search.record(criterion.judge(bad), (2,))
    assert search.next() is None and search.reason.startswith("not sure") and not search.complete
