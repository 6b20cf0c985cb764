"""The latency knee's rule on curves whose answer is known, and the invariances it promises."""

import math
import random

from hypothesis import given
from hypothesis import strategies as st

from locust_llm.measure.histogram import Histogram
from locust_llm.measure.knee import knee_resamples, latency_knee, share_of, threshold_ms

USERS = [8, 16, 32, 64, 128]


def test_a_llama_cpp_server_with_8_slots_bends_past_8_however_the_tail_rose_before():
    """The real server of the issue: 1 thread, 8 slots; TTFT p99 rises smoothly with the batch, then the queue past
    8 slots makes a cliff (ITL p50 about 30 ms)."""
    loads, p99 = [1, 2, 4, 8, 16], [42, 57, 84, 126, 1709]
    knee = latency_knee(loads, p99, [20, 22, 25, 30, 30])
    assert (knee.users, knee.bracket) == (8, (8, 16))
    assert knee.confidence == "low" and "only at the last step" in knee.reason  # nothing after 16 confirms it
    extended = latency_knee([*loads, 32], [*p99, 3900], [20, 22, 25, 30, 30, 30])
    assert (extended.users, extended.bracket, extended.confidence) == (8, (8, 16), "high")


def test_the_default_simulators_tail_bends_between_16_and_32():
    """A run of the default preset (analytic KV knee 34; output lengths vary, so at 32 users the cache is sometimes
    full and the tail already waits): the p99 jumps 29 -> 196 ms while the decode step is 17 ms."""
    knee = latency_knee(USERS, [25.2, 29.3, 195.6, 2072.6, 3883.0], [12.2, 14.3, 17.3, 19.6, 19.6])
    assert (knee.users, knee.bracket, knee.confidence) == (16, (16, 32), "high")


def test_two_steps_are_enough_to_see_a_queue():
    """``--steps 2,8`` against 4 slots: 31 -> 763 ms is a bend (the old rule needed 3 steps)."""
    knee = latency_knee([2, 8], [31, 763], [30, 32])
    assert knee.users == 2 and knee.bracket == (2, 8) and knee.confidence == "low"


def test_one_users_prefill_against_two_users_decode_step_is_no_knee():
    """Alone a user's TTFT is its prefill (2 ms); with two, a request waits for the current decode step (24 ms):
    13 times more, less than 4 decode steps over it."""
    assert latency_knee([1, 2, 4], [1.8, 24.0, 26.0], [12, 12, 12]).users is None


def test_a_smooth_curve_has_no_knee_and_says_extend():
    knee = latency_knee(USERS, [10, 16, 26, 41, 66], [5] * 5)
    assert knee.users is None and knee.bracket is None and "extend the sweep" in knee.reason


def test_a_curve_bending_between_its_first_two_loads_says_the_knee_may_lie_lower():
    knee = latency_knee(USERS, [1500, 3100, 6300, 12700, 25500], [20] * 5)
    assert knee.users == 8 and knee.confidence == "low" and "may lie below 8" in knee.reason


def test_a_spike_that_falls_back_is_set_aside_not_a_knee():
    knee = latency_knee(USERS, [25, 29, 200, 31, 36], [12] * 5)
    assert knee.users is None and "the p99 at 32 (200 ms) fell back to 31 ms at 64" in knee.reason


def test_a_shared_machines_stall_at_the_second_step_moves_no_knee_below_the_real_one():
    """A CI run of grok-like (cap 48 in flight): one stall put 16 users' p99 of 133 samples at 62 ms, between 21 and
    23 ms, and the old rule recommended 8 users; the same run's twin had no knee. The spike is set aside, and a real
    bend later is still found."""
    p99s, decode = [20.9, 61.5, 23.1, 27.2], [8.8, 9.0, 9.9, 11.6]  # 61.5 ms is over 2 x 20.9 and 4 decode steps
    assert latency_knee([8, 16, 32, 64][:2], p99s[:2], decode[:2]).users == 8  # alone, the stall is a bend
    assert latency_knee([8, 16, 32, 64], p99s, decode).users is None
    knee = latency_knee([8, 16, 32, 64, 128], [*p99s[:3], 400, 900], [*decode, 11.6])
    assert (knee.users, knee.bracket, knee.confidence) == (32, (32, 64), "high") and "set aside" in knee.reason


def test_only_a_valid_step_can_set_a_bend_aside():
    """An invalid step's low p99 (too few requests, a broken window) is no evidence that the tail recovered."""
    knee = latency_knee(USERS, [25, 29, 200, 31, 36], [12] * 5, [True, True, True, False, True])
    assert (knee.users, knee.bracket) == (16, (16, 32))


def test_loads_without_a_p99_are_left_out():
    assert latency_knee(USERS, [None, None, 10, None, 20]).users is None
    assert "at least 2 loads" in latency_knee([8], [10]).reason


def test_the_threshold_is_the_largest_of_the_three_rises():
    assert threshold_ms(8, 100, 16, 10) == 200  # in proportion to the load
    assert threshold_ms(10, 100, 11, 5) == 150  # a close load: 50 % still
    assert threshold_ms(1, 2, 2, 12) == 50  # 4 decode steps over a tiny p99


curves = st.lists(st.floats(min_value=1, max_value=1e5, allow_nan=False), min_size=2, max_size=7)


@given(curves, st.floats(min_value=0.01, max_value=100))
def test_scaling_every_latency_and_the_decode_step_moves_no_knee(values, scale):
    loads = [2**i for i in range(len(values))]
    steps = [v / 10 for v in values]
    knee = latency_knee(loads, values, steps)
    scaled = latency_knee(loads, [v * scale for v in values], [d * scale for d in steps])
    assert (scaled.users, scaled.bracket) == (knee.users, knee.bracket)


@given(curves, st.lists(st.floats(min_value=1, max_value=1e5, allow_nan=False), min_size=1, max_size=3))
def test_steps_after_the_bend_never_move_the_knee(values, more):
    """A knee with a step after its bend must not move because the sweep went further (Kneedle's does, by
    construction)."""
    loads = [2**i for i in range(len(values))]
    knee = latency_knee(loads, values)
    if knee.users is None or knee.bracket[1] == loads[-1]:  # a bend at the last step waits for the next to confirm
        return
    longer = latency_knee([*loads, *(2 ** (len(values) + i) for i in range(len(more)))], [*values, *more])
    assert (longer.users, longer.bracket) == (knee.users, knee.bracket)


@given(curves)
def test_a_sweep_that_starts_later_but_before_the_bend_finds_the_same_knee(values):
    loads = [2**i for i in range(len(values))]
    knee = latency_knee(loads, values)
    if knee.users is None or knee.users == loads[0]:
        return
    start = loads.index(knee.users)  # the sweep starts at the knee's load: the same segment bends first
    later = latency_knee(loads[start:], values[start:])
    if max(values[: start + 1]) == values[start]:  # no earlier peak lifted the knee's p99 (the running maximum)
        assert (later.users, later.bracket) == (knee.users, knee.bracket)


def blocks_of(p99s_ms, seconds, per_second, seed):
    """Each load's one-second blocks of TTFTs: log-normal (sigma 0.5), p99 about the given one."""
    rng = random.Random(seed)
    out = []
    for p99 in p99s_ms:
        median_ns = p99 / math.exp(2.326 * 0.5) * 1e6
        load = []
        for _ in range(seconds):
            h = Histogram()
            for _ in range(per_second):
                h.record(int(rng.lognormvariate(math.log(median_ns), 0.5)))
            load.append(h)
        out.append(load)
    return out


def test_a_clear_bend_is_found_by_every_resample_and_the_shares_add_up():
    loads = (8, 16, 32, 64)
    clear = knee_resamples(loads, blocks_of((25, 29, 230, 2100), 20, 15, 1), [12, 14, 17, 20])
    assert clear[0][0] == 16 and share_of(clear, 16) >= 0.99
    assert math.isclose(sum(share for _, share in clear), 1.0)
    assert knee_resamples(loads, blocks_of((25, 29, 230, 2100), 20, 15, 1), [12, 14, 17, 20]) == clear  # seeded


def test_a_step_on_the_threshold_splits_the_resamples():
    """32 users' p99 at 2.2x 16's (the threshold is 2x, the load's ratio): its 300 samples' p99 moves by about
    +-15 %, so resamples disagree on whether it bent."""
    split = knee_resamples((8, 16, 32, 64), blocks_of((25, 29, 64, 2100), 20, 15, 2), [1, 1, 1, 1])
    assert 0.1 < share_of(split, 16) < 0.9 and 0.1 < share_of(split, 32) < 0.9
    assert share_of(split, 128) == 0.0 and share_of(None, 16) is None
