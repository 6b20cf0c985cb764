"""The integration tests' acceptance rule (tests/support/procs.py) read against the verdict lines the tool really
prints: a run invalid for machine disturbance alone may be read, one invalid for what it ran may not."""

import pytest

from locust_llm.reports.verdict import verdict
from tests.support.procs import accepted, disturbed


def printed(*reasons: str) -> str:
    code, why = verdict({"valid": False, "invalid_reasons": list(reasons)})
    return f"locust-llm capacity summary\n  verdict: exit {code}, {why}\n"


@pytest.mark.parametrize(
    "reasons",
    [
        ["step 1: scheduling lag p99 10.4 ms > 10 ms (sim-llm)"],
        [
            "step 2: generator saturated: local CPU 93% > 80%; scheduling lag p99 12.6 ms > 10 ms (m)",
            "step 3: scheduling lag p99 11.0 ms > 10 ms (m)",
        ],
    ],
)
def test_a_run_invalid_only_because_the_machine_stalled_is_disturbed(reasons):
    assert disturbed(3, printed(*reasons))


@pytest.mark.parametrize(
    "reasons",
    [
        ["step 1: worker lost during the step: w1"],
        ["step 1: scheduling lag p99 10.4 ms > 10 ms (m); worker lost during the step: w1"],
        ["step 1: scheduling lag p99 10.4 ms > 10 ms (m)", "no successful request at any step"],
        ["step 2: too few completed requests in the steady window: 3 < 20 (lengthen --step-duration)"],
        ["the search could not decide: not sure: a probe was disturbed"],
    ],
)
def test_a_run_invalid_for_what_it_ran_is_not(reasons):
    assert not disturbed(3, printed(*reasons))


def test_only_exit_3_with_its_verdict_counts():
    assert not disturbed(0, "verdict: exit 0, a valid sweep")
    assert not disturbed(3, "error: no successful request")  # exit 3 without the verdict line
    assert not disturbed(1, printed("step 1: scheduling lag p99 10.4 ms > 10 ms (m)"))


def test_accepted_takes_exit_0_and_disturbance_alone():
    assert accepted(0, "verdict: exit 0, a valid sweep")
    assert accepted(3, printed("step 1: scheduling lag p99 10.4 ms > 10 ms (m)"))
    assert not accepted(3, printed("step 1: worker lost during the step: w1"))
    assert not accepted(1, "verdict: exit 1, a regression against the baseline")
