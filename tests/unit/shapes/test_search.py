"""The search's rules on synthetic p99 curves with a known crossing (see locust_llm.shapes.search)."""

import math
import random

import pytest

from locust_llm.measure.sla import Sla
from locust_llm.shapes.criteria import Criterion
from locust_llm.shapes.search import Search

LIMIT_MS = 1000.0


def knee_curve(knee: float, flat_ms: float = 100.0, slope_ms: float = 40.0):
    """Flat until ``knee`` users, then rising linearly: the p99 crosses LIMIT_MS at knee + (LIMIT - flat) / slope."""
    return lambda load: flat_ms + max(0.0, load - knee) * slope_ms


def row(p99: float, valid: bool = True, requests: int = 300) -> dict:
    return {
        "requests": requests,
        "ok": requests,
        "client_requests": requests,
        "client_ok": requests,
        "errors": 0,
        "ttft_p99_ms": p99,
        "client_ttft_p99_ms": p99,
        "valid": valid,
        "invalid_reasons": "" if valid else "generator CPU 95% > 80%",
    }


def drive(search: Search, p99_at, criterion: Criterion, invalid_at=(), budget_probes=None):
    """Run the search to its end against a curve; ``invalid_at``: loads whose first run is invalid."""
    seen_invalid = set()
    while (planned := search.next()) is not None:
        if budget_probes is not None and len(search.probes) >= budget_probes:
            search.stop("budget")
            break
        load = planned.load
        valid = not (load in invalid_at and load not in seen_invalid)
        if not valid:
            seen_invalid.add(load)
        search.record(criterion.judge(row(p99_at(load), valid)), (len(search.probes) + 1,))
    return search


@pytest.mark.parametrize("knee", [3, 10, 23, 37, 90, 200])
@pytest.mark.parametrize("start", [1, 8, 64])
def test_it_converges_within_the_precision_on_monotone_curves(knee, start):
    curve = knee_curve(knee)
    crossing = knee + (LIMIT_MS - 100.0) / 40.0  # the true capacity: the last load at or under the limit
    truth = math.floor(crossing)
    search = drive(Search(start, 0.1, 512), curve, Criterion("sla", Sla(ttft_p99_ms=LIMIT_MS)))
    low, high = search.bracket
    assert search.complete and low is not None and high is not None
    assert curve(low) <= LIMIT_MS < curve(high)  # the bracket holds the crossing ...
    assert high - low <= max(0.1 * low, 1)  # ... within the precision
    assert truth - max(0.1 * truth, 1) <= search.answer <= truth
    assert len(search.probes) <= 2 * math.log2(512) + 2  # doubling then bisection: logarithmic


def test_noise_moves_the_answer_only_within_the_bracket_it_was_probed_in():
    rng = random.Random(7)
    curve = knee_curve(30)  # crossing at 52.5 users
    answers = []
    for _ in range(50):
        noisy = lambda load: curve(load) * rng.uniform(0.85, 1.15)  # noqa: E731
        search = drive(Search(8, 0.1, 512), noisy, Criterion("sla", Sla(ttft_p99_ms=LIMIT_MS)))
        answers.append(search.answer)
        low, high = search.bracket
        assert high - low <= max(0.1 * low, 1)
    # +-15 % noise on the p99 shifts where it crosses the limit by at most the curve's response to 15 %
    lowest = 30 + (LIMIT_MS / 1.15 - 100) / 40
    highest = 30 + (LIMIT_MS / 0.85 - 100) / 40
    assert all(lowest - max(0.1 * lowest, 1) <= a <= highest for a in answers), answers


def test_a_borderline_probe_is_run_again_and_decided_on_both_together():
    search = Search(8, 0.1, 512)
    criterion = Criterion("sla", Sla(ttft_p99_ms=LIMIT_MS))
    search.record(criterion.judge(row(300)), (1,))  # 8: pass, clear
    assert search.next().load == 16 and search.next().kind == "probe"
    first = search.record(criterion.judge(row(1050)), (2,))  # 16: fails by 5 %: borderline
    assert first.outcome.borderline and not first.outcome.passed
    assert search.bracket == (8, None)  # not trusted: nothing decided
    again = search.next()
    assert (again.load, again.kind) == (16, "repeat")
    merged = search.record(criterion.judge(row(980)), (2, 3))  # both runs together pass, still borderline
    assert merged.kind == "repeat" and merged.steps == (2, 3)
    assert search.bracket == (16, None) and search.next().load == 32  # decided: no third run


def test_a_clear_failure_with_a_borderline_pass_elsewhere_is_not_repeated():
    criterion = Criterion("sla", Sla(ttft_p99_ms=LIMIT_MS, itl_p99_ms=50))
    clear_fail = {**row(2000), "itl_p99_ms": 49.0}  # TTFT far over; ITL near its limit but met
    outcome = criterion.judge(clear_fail)
    assert outcome.passed is False and not outcome.borderline
    near_pass = {**row(500), "itl_p99_ms": 49.0}
    assert criterion.judge(near_pass).borderline


def test_an_invalid_probe_never_decides_and_twice_invalid_stops_not_sure():
    criterion = Criterion("sla", Sla(ttft_p99_ms=LIMIT_MS))
    search = drive(Search(8, 0.1, 512), knee_curve(30), criterion, invalid_at=(16, 64))
    kinds = [(p.load, p.kind, p.outcome.passed) for p in search.probes]
    assert (16, "probe", None) in kinds and (16, "retry", True) in kinds  # retried, then decided on the retry
    assert search.complete and search.answer == 52

    search = Search(8, 0.1, 512)
    search.record(criterion.judge(row(300, valid=False)), (1,))
    assert search.bracket == (None, None) and search.next().kind == "retry"
    search.record(criterion.judge(row(300, valid=False)), (2,))
    assert search.next() is None and not search.complete and search.reason.startswith("not sure")
    assert "generator CPU" in search.reason


def test_max_load_and_the_lowest_load_bound_it():
    criterion = Criterion("sla", Sla(ttft_p99_ms=LIMIT_MS))
    search = drive(Search(8, 0.1, 100), knee_curve(1000), criterion)  # never crosses
    assert [p.load for p in search.probes] == [8, 16, 32, 64, 100]
    assert search.answer == 100 and search.bracket == (100, None) and "at least" in search.reason

    search = drive(Search(8, 0.1, 100), lambda load: 5000.0, criterion)  # always fails
    assert [p.load for p in search.probes] == [8, 4, 2, 1]
    assert search.answer is None and "fails even at 1 users" in search.reason


def test_the_time_budget_ends_it_with_the_bracket_so_far():
    criterion = Criterion("sla", Sla(ttft_p99_ms=LIMIT_MS))
    search = drive(Search(8, 0.1, 512), knee_curve(30), criterion, budget_probes=4)
    assert [p.load for p in search.probes] == [8, 16, 32, 64]
    assert search.bracket == (32, 64) and not search.complete and search.next() is None
    assert search.where() == "the crossing lies between 32 users and 64 users"
    assert Search(8, 0.1, 64).where() == ""


def test_rates_are_searched_as_real_numbers():
    criterion = Criterion("sla", Sla(ttft_p99_ms=LIMIT_MS))
    curve = knee_curve(5.0, slope_ms=400.0)  # crossing at 7.25 req/s
    search = drive(Search(2.0, 0.05, 100.0, integer=False), curve, criterion)
    low, high = search.bracket
    assert curve(low) <= LIMIT_MS < curve(high) and high - low <= 0.05 * low
    assert 7.25 * 0.95 <= search.answer <= 7.25 and search.text(search.answer).endswith("req/s")


@pytest.mark.parametrize(("start", "precision", "max_load"), [(0, 0.1, 10), (1, 0, 10), (1, 1.0, 10), (1, 0.1, 0)])
def test_bad_settings_are_refused(start, precision, max_load):
    with pytest.raises(ValueError):
        Search(start, precision, max_load)


def test_outcomes_record_what_was_judged():
    outcome = Criterion("sla", Sla(ttft_p99_ms=500, max_error_rate=0.05)).judge(
        {**row(450), "client_requests": 100, "client_ok": 97}
    )
    assert outcome.passed and outcome.values == {"client_ttft_p99_ms": 450, "error_rate": 0.03}
    assert "TTFT p99 450 ms <= 500 ms" in outcome.detail and "errors 3.0% <= 5%" in outcome.detail
    assert outcome.borderline  # 450 is within 10 % of 500
    assert Criterion("sla", Sla(ttft_p99_ms=500)).judge(None).passed is None
