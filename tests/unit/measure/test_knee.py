import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from locust_llm.measure.knee import kneedle_convex_increasing, latency_knee

kneed = pytest.importorskip("kneed")

USERS = [8, 16, 32, 64, 128]


def test_flat_then_bending_curve_has_its_knee_at_the_last_flat_step():
    knee = latency_knee(USERS, [24.4, 28.8, 35.1, 1646, 3064])
    assert knee.users == 32 and knee.bracket == (32, 64) and knee.reason == ""


def test_a_straight_line_has_no_knee():
    assert latency_knee(USERS, [10, 20, 30, 40, 50]).users is None


def test_noise_below_the_minimum_rise_is_not_a_knee():
    knee = latency_knee(USERS, [100, 104, 98, 103, 101])
    assert knee.users is None and "rose only" in knee.reason


def test_noisy_flat_part_still_finds_the_bend():
    assert latency_knee(USERS, [31, 29, 33, 30, 900]).users == 64


def test_single_step_and_missing_values():
    assert latency_knee([8], [10]).users is None
    assert "at least 3 steps" in latency_knee(USERS, [None, None, 10, None, 20]).reason


def test_a_bend_at_the_last_step():
    knee = latency_knee(USERS, [10, 11, 12, 14, 100])
    assert knee.users == 64 and knee.bracket == (64, 128)
    # Kneedle confirms a knee by the drop after it: with 3 steps a bend at the last one cannot be confirmed
    assert latency_knee([8, 16, 32], [10, 10.5, 60]).users is None


@given(st.floats(min_value=1e-3, max_value=1e6))
def test_scaling_all_latencies_moves_no_knee(scale):
    values = [24.4, 28.8, 35.1, 1646, 3064]
    assert latency_knee(USERS, [v * scale for v in values]).users == 32


curves = st.lists(st.floats(min_value=0, max_value=1000, allow_nan=False), min_size=3, max_size=9)


@settings(max_examples=300, deadline=None)
@given(curves)
def test_kneedle_matches_the_kneed_library_on_convex_increasing_curves(increments):
    ys = []
    total = 1.0
    for inc in sorted(increments):  # sorted increments: a convex increasing curve
        total += inc
        ys.append(total)
    xs = [float(i) for i in range(len(ys))]
    assume(max(ys) > min(ys))
    expected = kneed.KneeLocator(xs, ys, curve="convex", direction="increasing").knee
    got = kneedle_convex_increasing(xs, ys)
    assert (None if got is None else xs[got]) == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=1000, allow_nan=False), min_size=3, max_size=9))
def test_kneedle_matches_kneed_on_arbitrary_curves_too(ys):
    assume(max(ys) > min(ys))
    xs = [math.log2(8 * 2**i) for i in range(len(ys))]
    expected = kneed.KneeLocator(xs, ys, curve="convex", direction="increasing").knee
    got = kneedle_convex_increasing(xs, ys)
    assert (None if got is None else xs[got]) == expected


def test_a_dip_after_the_bend_is_noise_not_a_later_knee():
    # ITL p99 of a real run: up to 32 users, a jump at 64, a slightly lower value at 128
    assert latency_knee(USERS, [13.76, 16.51, 21.12, 56.58, 55.04]).users == 32
