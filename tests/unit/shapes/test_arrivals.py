import itertools
import random
import statistics

import pytest

from locust_llm.config.parsers import ConfigError, parse_arrivals, parse_rates
from locust_llm.shapes.arrivals import Arrivals, share

N = 20_000


def gaps(arrivals, rate, seed=0):
    times = list(itertools.islice(arrivals.times_s(rate, random.Random(seed)), N + 1))
    return [b - a for a, b in itertools.pairwise(times)]


CASES = [
    (Arrivals("poisson"), 1.0),
    (Arrivals("constant"), 0.0),
    (Arrivals("gamma", 0.5), 0.5),
    (Arrivals("gamma", 2.0), 2.0),
]


@pytest.mark.parametrize(("arrivals", "cv"), CASES)
def test_mean_and_coefficient_of_variation_match_theory(arrivals, cv):
    g = gaps(arrivals, rate=8.0)
    mean = statistics.fmean(g)
    # over 20,000 gaps the mean is within 5 standard errors: cv / sqrt(N) relative
    assert mean == pytest.approx(1 / 8.0, rel=max(1e-9, 5 * cv / N**0.5))
    assert statistics.pstdev(g) / mean == pytest.approx(cv, abs=0.05 * max(cv, 0.2))


def test_the_same_seed_gives_the_same_schedule_and_another_seed_another():
    assert gaps(Arrivals(), 5.0, seed=1)[:50] == gaps(Arrivals(), 5.0, seed=1)[:50]
    assert gaps(Arrivals(), 5.0, seed=1)[:50] != gaps(Arrivals(), 5.0, seed=2)[:50]


@pytest.mark.parametrize("processes", [1, 2, 3, 7])
def test_the_rate_is_split_exactly_and_constant_arrivals_interleave(processes):
    rate = 12.0
    shares = [share(rate, processes, i) for i in range(processes)]
    assert sum(r for r, _ in shares) == pytest.approx(rate)
    constant = Arrivals("constant")
    firsts = [itertools.islice(constant.times_s(r, random.Random(), offset), 30) for r, offset in shares]
    merged = sorted(itertools.chain.from_iterable(firsts))
    assert all(b - a == pytest.approx(1 / rate) for a, b in itertools.pairwise(merged))


def test_split_poisson_processes_merge_into_the_requested_rate():
    rate, processes, horizon = 10.0, 3, 300.0
    arrivals = []
    for i in range(processes):
        r, _ = share(rate, processes, i)
        arrivals += list(itertools.takewhile(lambda t: t < horizon, Arrivals().times_s(r, random.Random(i))))
    # 3,000 arrivals expected; a Poisson count's standard deviation is its square root
    assert abs(len(arrivals) - rate * horizon) < 5 * (rate * horizon) ** 0.5


@pytest.mark.parametrize(
    ("text", "expected"),
    [("poisson", Arrivals()), ("Constant", Arrivals("constant")), ("gamma:0.5", Arrivals("gamma", 0.5))],
)
def test_parse_arrivals(text, expected):
    assert parse_arrivals(text) == expected


@pytest.mark.parametrize("text", ["uniform", "gamma", "gamma:0", "gamma:-1", "gamma:x"])
def test_bad_arrivals(text):
    with pytest.raises(ConfigError, match="--arrivals must be one of poisson, constant, gamma:CV"):
        parse_arrivals(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2,2", "--rates must be strictly increasing, got 2,2"),
        ("0,1", "--rates rates must be positive"),
        ("a", "--rates must be comma-separated request rates per second like 2,4,8, got 'a'"),
        ("1,inf", "positive"),
    ],
)
def test_bad_rates(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_rates(text)


def test_rates_parse():
    assert parse_rates("0.5, 2,4.5") == (0.5, 2.0, 4.5)
