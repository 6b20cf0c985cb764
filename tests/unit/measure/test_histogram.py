import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from locust_llm.measure.histogram import PRECISION, Histogram, bucket_bounds


def bucket_index(units: int, precision: int = PRECISION) -> int:
    """The module docstring's layout, written out here: the index of the bucket holding ``units``."""
    if units < 1 << precision:
        return units
    e = units.bit_length() - precision
    return (e << (precision - 1)) + (units >> e)


def record_all(h: Histogram, values) -> None:
    for value in values:
        h.record(value)


values_ns = st.integers(min_value=0, max_value=3_600 * 10**9)


def hist_of(values, unit=1000):
    h = Histogram(unit)
    record_all(h, values)
    return h


def nearest_rank(values, q):
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


precisions = st.integers(min_value=2, max_value=16)


@given(st.integers(min_value=0, max_value=2**40), precisions)
def test_bucket_bounds_contain_the_value(units, precision):
    low, high = bucket_bounds(bucket_index(units, precision), precision)
    assert low <= units < high


@given(st.integers(min_value=0, max_value=2**40), precisions)
def test_buckets_tile_the_line_in_index_order(units, precision):
    index = bucket_index(units, precision)
    low, high = bucket_bounds(index, precision)
    assert bucket_index(high, precision) == index + 1
    assert low == 0 or bucket_index(low - 1, precision) == index - 1


@given(st.integers(min_value=0, max_value=2**40), precisions)
def test_bucket_width_is_at_most_its_lower_bound_over_two_to_the_precision_minus_one(units, precision):
    low, high = bucket_bounds(bucket_index(units, precision), precision)
    assert high - low == 1 or (high - low) << (precision - 1) <= low


def test_default_buckets_near_200_ms_are_a_quarter_millisecond_wide():
    low, high = bucket_bounds(bucket_index(200_000))
    assert low <= 200_000 < high and high - low == 256  # units of 1 us; it was 2,048 at 7 bits


@given(st.lists(values_ns, min_size=1, max_size=200), st.sampled_from([0.0, 0.5, 0.9, 0.99, 1.0]))
def test_quantiles_within_one_percent_of_the_exact_nearest_rank(values, q):
    exact = nearest_rank(values, q)
    got = hist_of(values).quantile(q)
    # relative error <= 2**-precision for values >= 2**precision us; within half a microsecond below that
    assert abs(got - exact) <= max(exact / 2**PRECISION, 500)


@given(st.lists(values_ns, min_size=1, max_size=200), st.sampled_from([0.5, 0.99]), st.integers(4, 12))
def test_any_precision_bounds_the_quantile_error(values, q, precision):
    h = Histogram(1000, precision)
    record_all(h, values)
    exact = nearest_rank(values, q)
    assert abs(h.quantile(q) - exact) <= max(exact / 2**precision, 500)


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


@given(st.lists(values_ns, max_size=30), st.integers(2, 16))
def test_wire_form_round_trips_at_any_precision(values, precision):
    h = Histogram(1000, precision)
    record_all(h, values)
    back = Histogram.from_wire(h.to_wire())
    assert back == h and back.precision == precision


def test_a_wire_form_without_precision_is_the_wave_1_layout():
    old = {"u": 1000, "n": 1, "s": 200_000_000, "lo": 200_000_000, "hi": 200_000_000, "b": [64 * 11 + 97, 1]}
    assert Histogram.from_wire(old).precision == 7


def test_wire_form_is_compact():
    h = hist_of(range(0, 10**9, 10**5))  # 10,000 samples from 0 to 1 s: one bucket each at most
    assert len(h.to_wire()["b"]) <= 2 * 10_000
    itl = hist_of(20_000_000 + 1000 * (i % 3000) for i in range(100_000))  # a step of ITLs spread over 3 ms
    assert len(itl.to_wire()["b"]) <= 2 * (3000 // 32 + 2)  # buckets of 32 us near 20 ms


def test_memory_is_bounded_by_the_number_of_buckets():
    h = hist_of(range(0, 3_600 * 10**9, 7_919 * 10**5))
    assert max(h.buckets) < 2**9 * 22 + 2**10  # an hour is 3.6e9 us, 32 bits: e <= 22, mantissa < 2**10


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


def test_a_coarser_histogram_cannot_take_in_a_finer_ones_samples_the_other_way_round():
    with pytest.raises(ValueError, match="precisions 10 and 7"):
        Histogram(1000).merge(Histogram(1000, 7))


@given(st.lists(values_ns, max_size=200), precisions, precisions)
def test_a_finer_histogram_merged_into_a_coarser_one_is_exactly_the_coarser_ones_record(values, fine, coarse):
    """Buckets nest: every bucket of the finer layout lies inside one of the coarser, so coarsening loses nothing the
    coarser histogram would have kept had it recorded the values itself."""
    fine, coarse = max(fine, coarse), min(fine, coarse)
    recorded, finer = Histogram(1000, coarse), Histogram(1000, fine)
    record_all(recorded, values)
    record_all(finer, values)
    merged = Histogram(1000, coarse).merge(finer)
    assert merged.buckets == recorded.buckets
    assert (merged.count, merged.sum, merged.min, merged.max) == (
        recorded.count,
        recorded.sum,
        recorded.min,
        recorded.max,
    )


@pytest.mark.parametrize("precision", [1, 17])
def test_precision_out_of_range_is_refused(precision):
    with pytest.raises(ValueError, match=f"precision must be an integer from 2 to 16 \\(bits\\), got {precision}"):
        Histogram(1000, precision)


def test_quantile_must_be_within_zero_and_one():
    with pytest.raises(ValueError, match="quantile"):
        hist_of([1]).quantile(1.5)


@given(
    st.lists(st.integers(min_value=0, max_value=10**12), min_size=0, max_size=80),
    st.lists(values_ns, max_size=10),
    st.integers(2, 16),
    st.data(),
)
def test_record_gaps_equals_recording_each_gap(times, before, precision, data):
    start = data.draw(st.integers(1, max(1, len(times))))
    stop = data.draw(st.integers(start, max(start, len(times))))
    one_by_one, at_once = Histogram(1000, precision), Histogram(1000, precision)
    record_all(one_by_one, before)
    record_all(at_once, before)
    for i in range(start, stop):
        one_by_one.record(times[i] - times[i - 1])  # unsorted times give negative gaps: clamped to 0 by both
    at_once.record_gaps(times, start, stop)
    assert at_once == one_by_one


time_runs = st.lists(st.lists(st.integers(min_value=0, max_value=10**12), max_size=40), max_size=8)


@given(time_runs, st.lists(values_ns, max_size=10), st.integers(2, 16), st.sampled_from([1, 1000]))
def test_gap_runs_recorded_together_equal_each_run_recorded_alone(runs, before, precision, unit):
    """numpy's per-gap work (forced on at any size) gives the same histogram as the loop, negative gaps (unsorted
    times) clamped to 0 and every bucket, count, sum, minimum and maximum exact."""
    alone, together = Histogram(unit, precision), Histogram(unit, precision)
    record_all(alone, before)
    record_all(together, before)
    for run in runs:
        alone.record_gaps(run)
    together.record_gap_runs(runs, vector_min=0)
    assert together == alone


@pytest.mark.parametrize("big", [2**52 * 1000, 2**70, 2**63 // 3])
def test_gap_runs_beyond_numpy_s_exact_range_take_the_loop(big):
    runs = [[0, 5_000, 7_000], [1, big], [3, 4]]
    alone, together = Histogram(), Histogram()
    for run in runs:
        alone.record_gaps(run)
    together.record_gap_runs(runs, vector_min=0)
    assert together == alone and together.max == big - 1


@given(st.sampled_from([0, 7, 255, 256, 700]), st.lists(values_ns, max_size=10), st.integers(2, 16), st.data())
def test_record_values_equals_recording_each_value(size, before, precision, data):
    """From VECTOR_MIN_GAPS values on numpy does the per-value work: the same buckets, count, sum, min and max,
    negative values clamped to 0, as one record call per value (which the shorter lists take)."""
    values = data.draw(st.lists(st.integers(min_value=-(10**9), max_value=10**13), min_size=size, max_size=size))
    one_by_one, at_once = Histogram(1000, precision), Histogram(1000, precision)
    record_all(one_by_one, before)
    record_all(at_once, before)
    for value in values:
        one_by_one.record(value)
    at_once.record_values(values)
    assert at_once == one_by_one and at_once.count == len(before) + size


@pytest.mark.parametrize("big", [2**52, 2**70, 2**62 // 300])
def test_record_values_beyond_numpy_s_exact_range_take_the_loop(big):
    values = [5_000] * 299 + [big]
    one_by_one, at_once = Histogram(), Histogram()
    for value in values:
        one_by_one.record(value)
    at_once.record_values(values)
    assert at_once == one_by_one and at_once.max == big and at_once.sum == 5_000 * 299 + big
