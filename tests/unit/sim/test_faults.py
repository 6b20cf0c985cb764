import pytest

from locust_llm.sim.faults import FaultPlan, parse_fault


def test_script_cycles():
    plan = FaultPlan(script=("ok", "503", "reset"))
    assert [plan.decide(i) for i in range(6)] == [None, "503", "reset", None, "503", "reset"]


def test_probabilities_are_seeded_and_roughly_right():
    plan = FaultPlan(probabilities=(("500", 0.1), ("stall", 0.2)), seed=3)
    draws = [plan.decide(i) for i in range(5000)]
    assert draws == [plan.decide(i) for i in range(5000)]
    assert draws.count("500") / 5000 == pytest.approx(0.1, abs=0.02)
    assert draws.count("stall") / 5000 == pytest.approx(0.2, abs=0.02)
    assert draws != [FaultPlan(probabilities=plan.probabilities, seed=4).decide(i) for i in range(5000)]


def test_no_faults_by_default():
    assert not FaultPlan().active and FaultPlan().decide(0) is None


@pytest.mark.parametrize(("text", "parsed"), [("503:0.05", ("503", 0.05)), ("reset", ("reset", 1.0))])
def test_parse(text, parsed):
    assert parse_fault(text) == parsed


@pytest.mark.parametrize("text", ["teapot:0.1", "503:x", "503:1.5"])
def test_parse_errors_name_what_is_allowed(text):
    with pytest.raises(ValueError, match="fault"):
        parse_fault(text)


def test_probabilities_must_not_exceed_one():
    with pytest.raises(ValueError, match="more than 1"):
        FaultPlan(probabilities=(("500", 0.6), ("502", 0.6)))


def test_unknown_kind_in_script():
    with pytest.raises(ValueError, match="unknown fault kind"):
        FaultPlan(script=("ok", "boom"))
