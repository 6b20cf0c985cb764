import copy

import pytest

from locust_llm.reports.compare import GateInputError, Thresholds, compare, format_comparison

USERS = [8, 16, 32, 64, 128]


def summary(recommended=32, knee=32, ttft=(24, 29, 35, 1646, 3064), itl=(12, 14, 17, 20, 21), errors=(0,) * 5):
    return {
        "schema": "locust-llm/summary",
        "version": 1,
        "model": "m",
        "valid": True,
        "invalid_reasons": [],
        "knee": {"recommended_users": recommended, "latency_knee_users": knee},
        "steps": [
            {
                "users": u,
                "model": "m",
                "ttft_p99_ms": ttft[i],
                "itl_p99_ms": itl[i],
                "requests": 1000,
                "errors": errors[i],
            }
            for i, u in enumerate(USERS)
        ],
    }


def verdicts(result):
    return {(c.step, c.metric): c.verdict for c in result.checks}


def test_identical_runs_pass():
    result = compare(summary(), summary())
    assert not result.regressed and "verdict: no regression" in format_comparison(result)


def test_the_baselines_knee_step_gets_a_wider_allowance_and_later_steps_are_not_compared():
    result = compare(summary(), summary(ttft=(24, 29, 100, 9999, 9999)))
    assert not result.regressed
    assert verdicts(result)[("32 users", "ttft_p99_ms")] == "ok"  # 35 -> 100 ms: within 3x at the knee
    assert verdicts(result)[("64 users", "p99 TTFT/ITL, errors")] == "skipped"
    assert verdicts(result)[("16 users", "ttft_p99_ms")] == "ok"
    assert compare(summary(), summary(ttft=(24, 29, 1004, 9999, 9999))).regressed  # 35 -> 1004 ms at the knee


def test_steps_below_the_baselines_knee_are_compared_even_when_the_current_knee_fell():
    worse = summary(knee=16, ttft=(24, 90, 700, 1646, 3064))
    assert verdicts(compare(summary(), worse))[("16 users", "ttft_p99_ms")] == "REGRESSION"


@pytest.mark.parametrize(("current", "regressed"), [(24, False), (16, True), (8, True)])
def test_capacity_may_fall_by_one_step_but_never_halve(current, regressed):
    result = compare(summary(), summary(recommended=current, knee=current))
    assert result.regressed is regressed


def test_throughput_is_compared_on_a_continuous_scale():
    base = summary()
    for step, tok in zip(base["steps"], (650, 1130, 1830, 2070, 2060), strict=True):
        step["output_tok_s"] = tok
    same = copy.deepcopy(base)
    for step in same["steps"]:
        step["output_tok_s"] *= 0.95  # -5 %: noise
    assert not compare(base, same).regressed
    cut = copy.deepcopy(base)  # a third of the KV cache gone: the plateau falls 25 %, the recommendation stays
    for step in cut["steps"]:
        step["output_tok_s"] = min(step["output_tok_s"], 1550)
    result = compare(base, cut)
    assert verdicts(result)[("-", "peak_output_tok_s")] == "REGRESSION"
    assert verdicts(result)[("64 users", "output_tok_s")] == "REGRESSION"


def test_sla_capacity_is_compared_interpolated():
    base, cur = summary(), summary()
    base["knee"].update(sla_max_users=32, sla_max_users_interpolated=40.0)
    cur["knee"].update(sla_max_users=32, sla_max_users_interpolated=34.0)
    assert verdicts(compare(base, cur))[("-", "sla_capacity_users")] == "REGRESSION"  # -15 % within one step


def test_capacity_rule_needs_both_more_than_a_step_and_more_than_ten_percent():
    base = summary(recommended=100)
    base["steps"] = [{**s, "users": u} for s, u in zip(base["steps"], [96, 97, 98, 99, 100], strict=True)]
    # 100 -> 96 falls 4 steps of that fine sweep but only 4 %: not a regression
    assert not compare(base, {**base, "knee": {"recommended_users": 96, "latency_knee_users": None}}).regressed


@pytest.mark.parametrize(
    ("ttft_16", "regressed"),
    [(29 * 1.15, False), (29 * 1.15 + 20.01, True), (29 + 20, False)],  # +15 % is allowed; > 15 % AND > 20 ms is not
)
def test_p99_ttft_rise_needs_both_the_percentage_and_the_absolute_minimum(ttft_16, regressed):
    current = summary(ttft=(24, ttft_16, 35, 1646, 3064))
    assert compare(summary(), current).regressed is regressed


def test_itl_rise():
    assert compare(summary(), summary(itl=(12, 18, 17, 20, 21))).regressed  # +28.6 % and +4 ms at 16 users
    assert not compare(summary(), summary(itl=(12, 15.5, 17, 20, 21))).regressed  # +1.5 ms < 2 ms


@pytest.mark.parametrize(("errors", "regressed"), [(5, False), (6, True)])  # 0.5 pp of 1,000 requests = 5
def test_error_rate_rise_boundary(errors, regressed):
    assert compare(summary(), summary(errors=(0, errors, 0, 0, 0))).regressed is regressed


def test_thresholds_are_configurable():
    current = summary(ttft=(24, 54, 35, 1646, 3064))  # +86 %, +25 ms at 16 users
    assert compare(summary(), current).regressed
    assert not compare(summary(), current, Thresholds(p99_rise_pct=90)).regressed
    assert not compare(summary(), current, Thresholds(min_ttft_rise_ms=30)).regressed


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda s: s.update(schema="other"), "is not a locust-llm summary.json"),
        (lambda s: s.update(version=9), "summary version 9"),
        (lambda s: s.pop("steps"), "truncated or malformed: no 'steps'"),
        (lambda s: s.update(valid=False, invalid_reasons=["worker lost"]), "invalid run and cannot be judged: worker"),
        (lambda s: s.update(model="other"), "different models"),
    ],
)
def test_bad_input(mutate, message):
    current = copy.deepcopy(summary())
    mutate(current)
    with pytest.raises(GateInputError, match=message):
        compare(summary(), current)


def rate_summary(recommended=8.0, tok=(600, 1100, 1800, 1850)):
    rates = [2.0, 4.0, 8.0, 16.0]
    return {
        "schema": "locust-llm/summary",
        "version": 1,
        "model": "m",
        "valid": True,
        "invalid_reasons": [],
        "mode": "rate",
        "knee": {"recommended_rate_req_s": recommended, "latency_knee_rate_req_s": 8.0},
        "steps": [
            {
                "users": 3 * (i + 1),
                "offered_req_s": r,
                "model": "m",
                "ttft_p99_ms": 30.0,
                "itl_p99_ms": 12.0,
                "requests": 500,
                "errors": 0,
                "output_tok_s": tok[i],
            }
            for i, r in enumerate(rates)
        ],
    }


def test_open_loop_runs_are_compared_by_offered_rate():
    assert not compare(rate_summary(), rate_summary()).regressed
    result = compare(rate_summary(), rate_summary(recommended=4.0, tok=(600, 1100, 1300, 1300)))
    assert verdicts(result)[("-", "recommended")] == "REGRESSION"  # halved
    assert verdicts(result)[("8 req/s", "output_tok_s")] == "REGRESSION"


def test_an_open_loop_run_is_not_compared_with_a_closed_loop_one():
    with pytest.raises(GateInputError, match="load the endpoint differently"):
        compare(summary(), rate_summary())


def client_summary(failed, of=1000, refused=0):
    """A run whose 16-user step had ``failed`` of ``of`` client requests fail, and ``refused`` 429 attempts."""
    base = summary()
    step = base["steps"][1]
    step.update(client_requests=of, client_ok=of - failed, requests=of + refused, status_429=refused, errors=failed)
    return base


@pytest.mark.parametrize(
    ("before", "after"),
    # the grok-like reruns of one simulator behind its 429 wall: the client failure rate moved by 0.7-1.4 pp
    [(63.8, 70.5), (49.1, 56.3), (49.1, 63.5)],
)
def test_a_rise_of_the_error_rate_within_its_sampling_noise_is_no_regression(before, after):
    """A share of about 5-7 % of 1,000 client requests has a standard error of about 0.7 pp per run: these rises
    are within two standard errors of the difference (z 0.7-1.4), under the 2.33 a one-sided 99 % test needs."""
    result = compare(client_summary(round(before)), client_summary(round(after)))
    check = next(c for c in result.checks if c.metric == "error_rate_pct" and c.step == "16 users")
    assert check.verdict == "ok" and "within sampling noise" in check.note, check


def test_a_real_rise_of_the_error_rate_is_a_regression_and_says_it_is_beyond_noise():
    result = compare(client_summary(50), client_summary(120))  # 5 % -> 12 % of 1,000: z about 5.6
    check = next(c for c in result.checks if c.metric == "error_rate_pct" and c.step == "16 users")
    assert check.verdict == "REGRESSION" and "beyond sampling noise" in check.note, check


def test_a_rise_beyond_noise_but_under_the_minimum_effect_is_no_regression():
    # 0.1 % -> 0.45 % of 100,000: certain, and still under the 0.5 pp a user would act on
    result = compare(client_summary(100, of=100_000), client_summary(450, of=100_000))
    assert not result.regressed


def test_the_429_share_of_attempts_is_a_finding_never_a_regression():
    """Behind a provider's cap the refused share of attempts moves while what users felt (the client failure rate,
    retries included) holds: it is reported, not judged."""
    result = compare(client_summary(10, refused=100), client_summary(10, refused=400))
    check = next(c for c in result.checks if c.metric == "status_429_pct")
    assert check.verdict == "finding" and "beyond sampling noise" in check.note and not result.regressed
    assert "finding" in format_comparison(result) and "verdict: no regression" in format_comparison(result)


def test_the_two_proportion_statistic():
    from locust_llm.reports.compare import rise_z

    assert rise_z((50, 1000), (50, 1000)) == 0.0 and rise_z((0, 1000), (0, 1000)) == 0.0
    assert rise_z((0, 0), (5, 100)) == 0.0  # nothing to compare with
    # pooled p = 0.1, se = sqrt(0.09 * 0.02) = 0.04243: (0.15 - 0.05) / se
    assert rise_z((5, 100), (15, 100)) == pytest.approx(0.10 / 0.0424264, rel=1e-4)


def small_steps(ttft_p99, ttft_p90, requests=300):
    """A run of 8-second steps: a few hundred requests each, TTFT p99 and p90 given at 16 users."""
    base = summary()
    for step in base["steps"]:
        step.update(requests=requests, ttft_p90_ms=step["ttft_p99_ms"] * 0.9)
    base["steps"][1].update(ttft_p99_ms=ttft_p99, ttft_p90_ms=ttft_p90)
    return base


def test_a_ttft_p99_of_a_few_hundred_requests_is_reported_and_the_p90_judged():
    """One stall of a shared machine set a 300-request step's p99 (its third-slowest request): 29 -> 52 ms, the p90
    unmoved. That is not a regression; the same rise of the p90 is."""
    result = compare(small_steps(29, 26), small_steps(52, 26.5))
    checks = {(c.step, c.metric): c for c in result.checks}
    assert checks[("16 users", "ttft_p99_ms")].verdict == "finding"
    assert "judged at p90" in checks[("16 users", "ttft_p99_ms")].note
    assert checks[("16 users", "ttft_p90_ms")].verdict == "ok" and not result.regressed
    assert compare(small_steps(29, 26), small_steps(90, 80)).regressed  # the p90 rose 26 -> 80 ms: +208 %, +54 ms


def test_a_ttft_p99_of_a_thousand_requests_is_judged_as_it_is():
    result = compare(small_steps(29, 26, requests=1000), small_steps(52, 26.5, requests=1000))
    assert verdicts(result)[("16 users", "ttft_p99_ms")] == "REGRESSION"


def test_a_change_of_wall_is_reported_and_never_fails_the_gate_alone():
    kv, cap = ({**summary(), "diagnosis": {"wall": wall}} for wall in ("kv_cache", "provider_cap"))
    result = compare(kv, cap)
    (wall,) = [c for c in result.checks if c.metric == "wall"]
    assert wall.verdict == "finding" and wall.note == "kv_cache -> provider_cap; reported, not judged"
    assert not result.regressed
    same = [c for c in compare(kv, kv).checks if c.metric == "wall"]
    assert [c.verdict for c in same] == ["ok"]
    assert not [c for c in compare(summary(), summary()).checks if c.metric == "wall"]  # older summaries: none
