import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from locust_llm.histogram import Histogram, bucket_bounds, bucket_index

values_ns = st.integers(min_value=0, max_value=3_600 * 10**9)


def hist_of(values, unit=1000):
    h = Histogram(unit)
    h.record_many(values)
    return h


def nearest_rank(values, q):
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


@given(st.integers(min_value=0, max_value=2**40))
def test_bucket_bounds_contain_the_value(units):
    low, high = bucket_bounds(bucket_index(units))
    assert low <= units < high


@given(st.integers(min_value=128, max_value=2**40))
def test_bucket_width_is_at_most_one_64th_of_its_lower_bound(units):
    low, high = bucket_bounds(bucket_index(units))
    assert (high - low) * 64 <= low


@given(st.lists(values_ns, min_size=1, max_size=200), st.sampled_from([0.0, 0.5, 0.9, 0.99, 1.0]))
def test_quantiles_within_one_percent_of_the_exact_nearest_rank(values, q):
    exact = nearest_rank(values, q)
    got = hist_of(values).quantile(q)
    # relative error <= 1/128 for values >= 128 us; within half a microsecond below that
    assert abs(got - exact) <= max(exact / 128, 500)


def test_itl_of_a_tenth_of_a_millisecond_is_resolved():
    h = hist_of([100_000, 100_000, 200_000])
    assert h.quantile(0.5) == pytest.approx(100_000, abs=500)
    assert h.quantile(1.0) == 200_000


def test_count_sum_min_max_are_exact():
    h = hist_of([5, 1_000_000, 123_456_789])
    assert (h.count, h.sum, h.min, h.max) == (3, 124_456_794, 5, 123_456_789)
    assert h.mean == pytest.approx(124_456_794 / 3)


def test_empty_histogram():
    h = Histogram()
    assert (h.count, h.quantile(0.99), h.mean) == (0, 0.0, 0.0)


def test_negative_values_are_clamped_to_zero():
    assert hist_of([-5]).max == 0


@given(st.lists(values_ns, max_size=50), st.lists(values_ns, max_size=50), st.lists(values_ns, max_size=50))
def test_merge_is_associative_commutative_and_equals_one_histogram_of_all(a, b, c):
    ha, hb, hc = hist_of(a), hist_of(b), hist_of(c)
    left = ha.copy().merge(hb).merge(hc)
    right = hc.copy().merge(hb.copy().merge(ha))
    assert left == right == hist_of(a + b + c)


@given(st.lists(values_ns, max_size=100))
def test_wire_form_round_trips(values):
    h = hist_of(values)
    assert Histogram.from_wire(h.to_wire()) == h


def test_wire_form_is_compact():
    h = hist_of(range(0, 10**9, 10**5))  # 10,000 samples from 0 to 1 s
    assert len(h.to_wire()["b"]) < 2 * 1200


def test_memory_is_bounded_by_the_number_of_buckets():
    h = hist_of(range(0, 3_600 * 10**9, 7_919 * 10**5))
    assert len(h.buckets) < 1800


@pytest.mark.parametrize(
    "wire",
    [
        {},
        {"u": 1000, "n": 2, "s": 0, "lo": 0, "hi": 0, "b": [1, 1]},
        {"u": 1000, "n": 1, "s": 0, "lo": 0, "hi": 0, "b": [1]},
    ],
)
def test_malformed_wire_forms_are_rejected(wire):
    with pytest.raises(ValueError, match="malformed histogram"):
        Histogram.from_wire(wire)


def test_units_must_match_to_merge():
    with pytest.raises(ValueError, match="units"):
        Histogram(1000).merge(hist_of([1], unit=1))


def test_quantile_must_be_within_zero_and_one():
    with pytest.raises(ValueError, match="quantile"):
        hist_of([1]).quantile(1.5)
