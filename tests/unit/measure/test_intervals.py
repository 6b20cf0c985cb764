"""The order-statistic interval of a quantile: its ranks by hand, and its coverage of a known distribution's true
quantile at the stated rate (seeded; the tolerance is the binomial noise of the coverage itself)."""

import math
import random
from statistics import NormalDist

import pytest

from locust_llm.measure.histogram import Histogram
from locust_llm.measure.intervals import quantile_interval, quantile_ranks, rank_bounds


def test_ranks_by_hand():
    # Binomial(10, 0.5): P(2 <= B < 9) = F(8) - F(1) = 1 - 22/1024 = 0.979 >= 0.95; (3, 8) would give 0.891
    assert quantile_ranks(10, 0.5) == (2, 9)
    assert quantile_ranks(100, 0.99) == (97, None)  # the upper rank is past the sample: open above
    assert quantile_ranks(0, 0.5) == (None, None)


def test_the_nearest_rank_estimate_lies_inside_its_interval():
    for n in (20, 120, 400, 1000, 5000):
        for q in (0.5, 0.9, 0.99):
            low, high = quantile_ranks(n, q)
            rank = max(1, math.ceil(q * n))
            assert (low is None or low <= rank) and (high is None or rank <= high), (n, q, low, high)


def test_a_histogram_reads_each_end_at_its_buckets_outer_bound():
    h = Histogram()
    for value in range(1, 1001):
        h.record(value * 1_000_000)  # 1 .. 1000 ms
    low, high = quantile_interval(h, 0.5)
    low_rank, high_rank = quantile_ranks(1000, 0.5)
    assert low <= low_rank * 1_000_000 and high >= high_rank * 1_000_000  # widened, never narrowed
    assert low >= 0.998 * low_rank * 1_000_000 and high <= 1.002 * high_rank * 1_000_000  # by at most a bucket
    assert rank_bounds(h, 1000)[1] == 1000 * 1_000_000  # clamped to the maximum


@pytest.mark.parametrize(("n", "q"), [(300, 0.5), (300, 0.9), (300, 0.99), (1000, 0.99)])
def test_the_interval_covers_the_true_quantile_at_the_stated_rate(n, q):
    """Log-normal TTFTs (median 200 ms, a heavy tail: sigma 0.8): 1,000 seeded samples of n each. An exact interval
    covers at least 95 % of the time; the coverage measured over 1,000 trials has a binomial noise of
    sqrt(0.95 * 0.05 / 1000) = 0.7 %, so it is at least 95 % less 3 of those."""
    mu, sigma = math.log(200e6), 0.8
    truth = math.exp(mu + sigma * NormalDist().inv_cdf(q))
    rng = random.Random(7)
    trials, covered = 1000, 0
    for _ in range(trials):
        h = Histogram()
        for _ in range(n):
            h.record(int(rng.lognormvariate(mu, sigma)))
        low, high = quantile_interval(h, q)
        covered += (low is None or low <= truth) and (high is None or truth <= high)
    assert covered / trials >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / trials), covered / trials
