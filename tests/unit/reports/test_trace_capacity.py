"""A replayed trace's capacity in multiples of it: each rate over the trace's own, and the printed line."""

from locust_llm.reports.console import load_text, trace_text
from locust_llm.reports.summary import trace_capacity

TRACE = {"rate_req_s": 4.0}
ANALYSIS = {
    "latency_knee_rate_req_s": 12.0,
    "sla_max_rate_req_s": 8.0,
    "sla_max_rate_req_s_interpolated": 10.8,
    "recommended_rate_req_s": 8.0,
}


def summary(knee, described="TTFT p99 <= 3000 ms"):
    return {"knee": knee, "sla": {"described": described}}


def test_with_an_sla_the_multiple_is_the_interpolated_sla_capacity_over_the_traces_rate():
    knee = trace_capacity(ANALYSIS, TRACE, sla_given=True)
    assert knee == {
        "trace_rate_req_s": 4.0,
        "latency_knee_speed": 3.0,
        "sla_max_speed": 2.7,
        "capacity_multiple": 2.7,
        "capacity_basis": "sla",
    }
    assert trace_text(summary(knee)) == (
        "  your traffic can grow 2.7x (speed) and stay within the SLA [TTFT p99 <= 3000 ms]"
    )


def test_without_an_sla_it_is_the_recommended_rate_and_below_one_it_says_past_capacity():
    knee = trace_capacity({**ANALYSIS, "recommended_rate_req_s": 2.0}, TRACE, sla_given=False)
    assert knee["capacity_multiple"] == 0.5 and knee["capacity_basis"] == "recommended"
    assert "past capacity: the endpoint serves only 0.5x of it below its knee" in trace_text(summary(knee, ""))
    none = trace_capacity({**ANALYSIS, "recommended_rate_req_s": 0}, TRACE, sla_given=False)
    assert (
        trace_text(summary(none, "")) == "  your traffic: no tested speed of it stayed below its knee (the "
        "recommended max rate)"
    )


def test_a_search_that_decided_nothing_says_it_is_not_known():
    knee = trace_capacity({**ANALYSIS, "recommended_rate_req_s": None}, TRACE, sla_given=False)
    text = trace_text(summary({**knee, "recommended_reason": "the search decided nothing"}, ""))
    assert text == "  your traffic: how many times of it fits is not known (the search decided nothing)"


def test_without_a_trace_nothing_is_added():
    assert trace_capacity(ANALYSIS, None, sla_given=True) == {}
    assert trace_text(summary({"latency_knee_rate_req_s": 1.0})) is None


def test_a_traces_rates_read_as_multiples_of_it_too():
    traced = {"mode": "rate", "knee": {"trace_rate_req_s": 2.18119}}
    assert load_text(traced, 8.72476) == "8.725 req/s (4x your traffic)"
    assert load_text({"mode": "rate", "knee": {}}, 6) == "6 req/s" and load_text({"mode": "users"}, 32) == "32 users"
