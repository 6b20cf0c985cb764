import random

import pytest

from locust_llm.measure.histogram import Histogram
from locust_llm.sim.timing import (
    ALARM_GUARD_NS,
    EARLY_NS,
    FILE_EVERY,
    MAX_LEAD_NS,
    MAX_SPIN_NS,
    SPREAD_WINDOW,
    START_QUANTILE,
    WINDOW,
    EmissionError,
    WriteLead,
)


def test_before_any_step_the_lead_is_the_timer_jitter_alone():
    assert WriteLead().lead_ns() == EARLY_NS


def test_the_lead_is_half_the_last_steps_measured_write_time():
    lead = WriteLead()
    for _ in range(60):  # the averages settle on the measured cost and start delay
        lead.observe(512, 80_000, 512 * 6_000)
    assert lead.write_ns == pytest.approx(6_000, rel=1e-3)
    assert lead.wake_ns == pytest.approx(80_000, rel=1e-3)
    room = 2 * ALARM_GUARD_NS  # a precise step's room to yield the loop (no spread: every wake alike)
    assert lead.lead_ns() == pytest.approx(80_000 + room + 512 * 6_000 / 2, rel=1e-3)
    lead.observe(128, 80_000, 128 * 6_000)  # the batch shrank: the next step is expected as large as this one
    assert lead.lead_ns() == pytest.approx(80_000 + room + 128 * 6_000 / 2, rel=1e-3)
    lead.observe(64, 80_000, 64 * 6_000)  # 384 us: too small to start precisely
    assert lead.lead_ns() == pytest.approx(80_000 + 64 * 6_000 / 2, rel=1e-3)


def test_a_step_of_few_tokens_moves_the_write_cost_by_its_weight_only():
    lead = WriteLead()
    for _ in range(60):
        lead.observe(512, 0, 512 * 6_000)
    lead.observe(2, 0, 1_000_000)  # two writes after a pause: 500 us each
    assert lead.write_ns < 6_000 * 1.5  # (0.8 * ~2,560 tokens' cost + 1 ms) / (0.8 * ~2,560 + 2)


def test_an_empty_step_keeps_the_costs_and_expects_nothing():
    lead = WriteLead()
    lead.observe(100, 0, 100 * 8_000)
    cost, wake = lead.write_ns, lead.wake_ns
    lead.observe(0, 5_000_000, 0)
    assert (lead.write_ns, lead.wake_ns, lead.tokens) == (cost, wake, 0)
    assert lead.lead_ns() == int(wake)


def test_a_stalled_process_never_writes_far_ahead():
    lead = WriteLead()
    for _ in range(30):
        lead.observe(4096, 0, 4096 * 10**6)  # steps that took seconds to write
    assert lead.lead_ns() == MAX_LEAD_NS


def test_early_and_late_writes_both_count_as_error_and_early_ones_apart():
    emission = EmissionError()
    for error in (3_000_000, 1_000_000):
        emission.error.record(error)
    emission.early.record(1_000_000)
    stats = emission.stats()
    assert stats["lateness_ms"]["count"] == 2 and stats["lateness_ms"]["max"] == 3.0
    assert stats["early_ms"] == {"count": 1, "p99": 1.0, "max": 1.0}
    emission.clear()
    assert emission.stats()["lateness_ms"]["count"] == 0


def test_delivered_ttft_and_itl_are_filed_apart_and_cleared_with_the_rest():
    emission = EmissionError()
    emission.deliver([200_000_000, 203_000_000], [20_000_000] * 98 + [25_000_000, 31_000_000])
    delivered = emission.stats()["delivered_ms"]
    assert delivered["ttft"]["count"] == 2 and delivered["itl"]["count"] == 100
    assert delivered["ttft"]["max"] == 203.0 and delivered["itl"]["max"] == 31.0
    assert delivered["itl"]["p50"] == pytest.approx(20.0, rel=2e-3)  # the histogram's 0.2 % buckets
    assert delivered["itl"]["p99"] == pytest.approx(25.0, rel=2e-3)
    emission.clear()
    assert emission.stats()["delivered_ms"]["ttft"]["count"] == 0 == emission.stats()["delivered_ms"]["itl"]["count"]


def test_one_stalled_step_does_not_move_the_next_steps_lead():
    lead = WriteLead()
    for _ in range(30):
        lead.observe(512, 80_000, 512 * 6_000)
    steady = lead.lead_ns()
    lead.observe(512, 10_000_000, 512 * 40_000)  # woken 10 ms late, and its writes held up
    assert lead.lead_ns() == steady  # a mean would have moved it by milliseconds: the next steps would go out early


def test_a_lasting_change_is_followed_within_half_the_window():
    lead = WriteLead()
    for _ in range(WINDOW):
        lead.observe(512, 80_000, 512 * 6_000)
    for _ in range(WINDOW // 2 + 1):  # the machine got slower: every write costs twice as much from now on
        assert lead.write_ns == 6_000
        lead.observe(512, 200_000, 512 * 12_000)
    assert (lead.write_ns, lead.wake_ns) == (12_000, 200_000)
    assert lead.lead_ns() == 200_000 + lead.allowance_ns + 512 * 12_000 // 2
    # the wake delays' spread (half the window took the new one) and the room to yield
    assert lead.allowance_ns == 200_000 - 80_000 + 2 * ALARM_GUARD_NS


def test_the_write_cost_is_the_median_weighted_by_writes():
    lead = WriteLead()
    lead.observe(100, 0, 100 * 5_000)
    lead.observe(10, 0, 10 * 50_000)
    lead.observe(10, 0, 10 * 50_000)  # two small slow steps: 20 writes against 100
    assert lead.write_ns == 5_000
    lead.observe(100, 0, 100 * 7_000)
    assert lead.write_ns == 7_000  # half of 220 writes is reached in the 7 us step


@pytest.mark.parametrize("tokens", [10, FILE_EVERY + 1, 3 * FILE_EVERY + 17])
def test_steps_filed_in_bulk_give_the_histograms_of_every_token_filed_alone(tokens):
    """A step's errors and intervals wait in lists and are filed FILE_EVERY at a time, or when read: whatever the
    step sizes, the figures are those of one record per value, and every late one is counted at once."""
    rng = random.Random(tokens)
    emission = EmissionError()
    error, early, ttft, itl = Histogram(), Histogram(), Histogram(), Histogram()
    late_ns, counted, late = 5_000_000, 0, 0
    while counted < tokens:
        step = [rng.randint(-3_000_000, 40_000_000) for _ in range(min(rng.randint(1, 700), tokens - counted))]
        firsts = [rng.randint(190_000_000, 260_000_000) for _ in range(rng.randint(0, 3))]
        gaps = [rng.randint(0, 60_000_000) for _ in step]
        counted += len(step)
        assert emission.add(step, late_ns) == sum(e > late_ns for e in step)
        late += sum(e > late_ns for e in step)
        emission.deliver(firsts, gaps)
        for e in step:
            error.record(abs(e))
            if e < 0:
                early.record(-e)
        for value in firsts:
            ttft.record(value)
        for value in gaps:
            itl.record(value)
    assert emission.stats()["lateness_ms"]["count"] == tokens and late > 0
    assert (emission.error, emission.early, emission.ttft, emission.itl) == (error, early, ttft, itl)


def test_a_precise_step_rings_earlier_by_the_wake_delays_spread_and_a_small_one_does_not():
    lead = WriteLead()
    wakes = [1_000_000 + 10_000 * i for i in range(SPREAD_WINDOW)]  # 1.00-1.63 ms
    for wake in wakes:
        lead.observe(512, wake, 512 * 6_000)  # a 3 ms span: precise
    ordered = sorted(wakes)
    spread = ordered[SPREAD_WINDOW * 19 // 20] - ordered[SPREAD_WINDOW // 2]
    assert lead.allowance_ns == spread + 2 * ALARM_GUARD_NS
    assert lead.lead_ns() == int(lead.wake_ns + spread + 2 * ALARM_GUARD_NS + 512 * 6_000 / 2)
    assert lead.start_ns(10**9, 512) == 10**9 - 512 * 6_000 // 2  # the writes' instant: centred on the due time
    lead.observe(16, 1_000_000, 16 * 6_000)  # 96 us: starts when ready, no allowance
    assert lead.lead_ns() == int(lead.wake_ns + 16 * 6_000 / 2)
    assert lead.start_ns(10**9, 16) == 0


def test_the_allowance_is_bounded_and_needs_ten_precise_steps():
    lead = WriteLead()
    for wake in (0, 0, 0, 10_000_000) * 2:
        lead.observe(512, wake, 512 * 6_000)
    assert lead.allowance_ns == 0  # eight steps: too few to know the spread
    for wake in (0, 0, 0, 10_000_000) * 2:
        lead.observe(512, wake, 512 * 6_000)
    assert lead.allowance_ns == MAX_SPIN_NS + 2 * ALARM_GUARD_NS  # a quarter woke 10 ms late: the spread is capped


def test_a_precise_step_starts_half_its_span_at_the_upper_quartile_cost_before_its_due_time():
    lead = WriteLead()
    costs = [6_000, 7_000, 8_000, 9_000] * 3 + [6_000, 7_000, 8_000]  # the window's 15 steps, 512 writes each
    for cost in costs:
        lead.observe(512, 100_000, 512 * cost)
    assert lead.write_ns == 7_000  # the median: what the start rule and the spin threshold do not use
    quartile = lead.write_cost(START_QUANTILE)
    assert quartile == 8_000  # 0.75 of 15 x 512 writes is reached in the 8 us steps
    assert lead.start_ns(10**9, 400) == 10**9 - 400 * 8_000 // 2  # a longer span runs late more than early
    assert lead.lead_ns() == int(lead.wake_ns + lead.allowance_ns + 512 * 8_000 / 2)
