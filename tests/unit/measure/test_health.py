import pytest

from locust_llm.measure.health import needed_step_s, warmup_for


@pytest.mark.parametrize(
    ("auto", "p90", "step", "expected"),
    [
        (5.0, None, 30.0, (5.0, False)),  # the first step
        (5.0, 3.0, 30.0, (5.0, False)),  # already covered
        (5.0, 9.0, 30.0, (9.0, False)),  # grown to cover the previous step's p90
        (5.0, 24.0, 30.0, (15.0, True)),  # capped at half the step: not covered
    ],
)
def test_the_automatic_warm_up_covers_the_previous_steps_e2e_p90(auto, p90, step, expected):
    assert warmup_for(auto, p90, step) == expected


def test_the_step_length_a_workload_needs():
    # 22.7 s requests (p90 24 s), 8 users finishing ~0.35 req/s, 10 requests needed:
    # warm-up 24 s, window max(22.7 s, 10 / 0.35 = 28.6 s) -> 52.6 s; twice the warm-up is 48 s
    assert needed_step_s(22.7, 24.0, 0.35, 10, 5.0) == pytest.approx(24.0 + 10 / 0.35)
    # short requests: twice the 5 s warm-up rules
    assert needed_step_s(0.3, 0.4, 20.0, 10, 5.0) == 10.0
