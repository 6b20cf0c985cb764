import pytest

from locust_llm.shapes.plan import Step, StepPlan

PLAN = StepPlan((8, 16, 32), 10.0)


@pytest.mark.parametrize(
    ("elapsed", "users"),
    [
        (0.0, 8),
        (9.999, 8),
        (10.0, 16),
        (19.999, 16),
        (20.0, 32),
        (29.999, 32),
        (30.0, None),
        (1e9, None),
        (-1, 8),
    ],
)
def test_users_at_every_boundary(elapsed, users):
    assert PLAN.users_at(elapsed) == users


def test_step_at_gives_index_start_and_duration():
    assert PLAN.step_at(15.0) == Step(1, 16, 10.0, 10.0)
    assert PLAN.step(2).end_s == 30.0
    assert PLAN.total_s == 30.0


def test_spawn_rate_reaches_each_step_in_about_a_second():
    assert [PLAN.spawn_rate(i) for i in range(3)] == [8.0, 8.0, 16.0]


@pytest.mark.parametrize(("steps", "duration"), [((), 1.0), ((1,), 0.0)])
def test_invalid_plans(steps, duration):
    with pytest.raises(ValueError):
        StepPlan(steps, duration)


def test_spawn_rates_never_pass_locusts_warning_threshold():
    plan = StepPlan((8, 16, 32, 64, 128, 512), 30.0)
    assert [plan.spawn_rate(i) for i in range(6)] == [8.0, 8.0, 16.0, 32.0, 64.0, 100.0]
    assert plan.drain_rate == 100.0 and StepPlan((8, 16), 1.0).drain_rate == 16.0
