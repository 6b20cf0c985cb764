import pytest

from locust_llm.sim.timing import EARLY_NS, MAX_LEAD_NS, EmissionError, WriteLead


def test_before_any_step_the_lead_is_the_timer_jitter_alone():
    assert WriteLead().lead_ns() == EARLY_NS


def test_the_lead_is_half_the_last_steps_measured_write_time():
    lead = WriteLead()
    for _ in range(60):  # the average settles on the measured cost
        lead.observe(512, 512 * 6_000)
    assert lead.write_ns == pytest.approx(6_000, rel=1e-3)
    assert lead.lead_ns() == pytest.approx(EARLY_NS + 512 * 6_000 / 2, rel=1e-3)
    lead.observe(128, 128 * 6_000)  # the batch shrank: the next step is expected as large as this one
    assert lead.lead_ns() == pytest.approx(EARLY_NS + 128 * 6_000 / 2, rel=1e-3)


def test_an_empty_step_keeps_the_write_cost_and_expects_nothing():
    lead = WriteLead()
    lead.observe(100, 100 * 8_000)
    cost = lead.write_ns
    lead.observe(0, 0)
    assert lead.write_ns == cost and lead.lead_ns() == EARLY_NS


def test_a_stalled_process_never_writes_far_ahead():
    lead = WriteLead()
    lead.observe(4096, 4096 * 10**6)  # a step that took seconds to write
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
