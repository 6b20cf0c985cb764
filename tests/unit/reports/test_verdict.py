import pytest

from locust_llm.reports.compare import GateInputError, InvalidRunError, compare
from locust_llm.reports.verdict import verdict
from tests.unit.reports.test_compare import summary


def judged(valid=True, reasons=(), sla_described="", sla_max=32):
    s = summary()
    s.update(valid=valid, invalid_reasons=list(reasons), sla={"described": sla_described})
    s["knee"]["sla_max_users"] = sla_max
    return s


def test_a_valid_sweep_is_0_even_with_errors_past_the_knee():
    assert verdict(judged(), 0) == (0, "a valid sweep")


def test_a_regression_is_1():
    assert verdict(judged(), 1)[0] == 1


def test_an_sla_that_no_step_meets_is_1():
    code, why = verdict(judged(sla_described="TTFT p99 <= 5 ms", sla_max=None))
    assert code == 1 and "no tested concurrency meets the SLA (TTFT p99 <= 5 ms)" in why


def test_an_invalid_measurement_is_3_and_beats_a_regression():
    code, why = verdict(judged(valid=False, reasons=["step 2: worker lost during the step: w1"]), 1)
    assert code == 3 and "worker lost" in why


def test_an_invalid_current_run_is_not_judged_but_an_invalid_baseline_is_bad_input():
    with pytest.raises(InvalidRunError):
        compare(summary(), judged(valid=False, reasons=["x"]))
    with pytest.raises(GateInputError) as info:
        compare(judged(valid=False, reasons=["x"]), summary())
    assert not isinstance(info.value, InvalidRunError)
