import copy
import math
import random

import pytest

from locust_llm.measure.histogram import Histogram
from locust_llm.reports.compare import (
    GateInputError,
    Thresholds,
    compare,
    format_comparison,
    holm,
    knee_fall_p,
    rise_p,
)

USERS = [8, 16, 32, 64, 128]


def sampled(p99_ms, n, seed, itl=False):
    """``n`` log-normal samples (ns) whose p99 is about ``p99_ms``, as a histogram: sigma 0.5, a heavy tail."""
    sigma = 0.5
    median = p99_ms / math.exp(2.326 * sigma)
    rng = random.Random(repr(seed))
    h = Histogram()
    for _ in range(n):
        h.record(int(rng.lognormvariate(math.log(median * 1e6), sigma)))
    return h


def summary(
    recommended=32, knee=32, ttft=(24, 29, 35, 1646, 3064), itl=(12, 14, 17, 20, 21), errors=(0,) * 5, n=1000, seed=0
):
    """A run whose steps' TTFT and ITL histograms are drawn (seeded) around the given p99s; the rows' p99s are the
    histograms' own."""
    steps, hists = [], {}
    for i, u in enumerate(USERS):
        ttft_h, itl_h = sampled(ttft[i], n, (seed, i, "t")), sampled(itl[i], 20 * n, (seed, i, "i"))
        hists[str(i + 1)] = {"ttft": ttft_h.to_wire(), "itl": itl_h.to_wire()}
        steps.append(
            {
                "step": i + 1,
                "users": u,
                "model": "m",
                "ttft_p99_ms": round(ttft_h.quantile(0.99) / 1e6, 3),
                "itl_p99_ms": round(itl_h.quantile(0.99) / 1e6, 3),
                "requests": n,
                "errors": errors[i],
            }
        )
    return {
        "schema": "locust-llm/summary",
        "version": 1,
        "model": "m",
        "valid": True,
        "invalid_reasons": [],
        "knee": {"recommended_users": recommended, "latency_knee_users": knee},
        "steps": steps,
        "histograms": hists,
    }


def verdicts(result):
    return {(c.step, c.metric): c.verdict for c in result.checks}


def test_identical_runs_pass():
    result = compare(summary(), summary())
    assert not result.regressed and "verdict: no regression" in format_comparison(result)


def test_the_baselines_knee_step_gets_a_wider_allowance_and_later_steps_are_not_compared():
    result = compare(summary(), summary(ttft=(24, 29, 80, 9999, 9999), seed=1))
    assert not result.regressed
    assert verdicts(result)[("32 users", "ttft_p99_ms")] == "ok"  # 35 -> 80 ms: within 3x at the knee
    assert verdicts(result)[("64 users", "p99 TTFT/ITL, errors")] == "skipped"
    assert verdicts(result)[("16 users", "ttft_p99_ms")] == "ok"
    assert compare(summary(), summary(ttft=(24, 29, 1004, 9999, 9999), seed=1)).regressed  # 35 -> 1004 ms at the knee


def test_steps_below_the_baselines_knee_are_compared_even_when_the_current_knee_fell():
    worse = summary(knee=16, ttft=(24, 90, 700, 1646, 3064), seed=1)
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


@pytest.mark.parametrize(("ttft_16", "regressed"), [(29, False), (33, False), (60, False), (80, True)])
def test_a_p99_rise_must_clear_the_allowed_rise_beyond_its_intervals(ttft_16, regressed):
    """The same server drawn again (29 ms) and a small rise (33 ms: within 15 %) pass. A p99 of 1,000 requests is
    the 10th slowest: its 95 % interval spans about +-12 % here, so 60 ms (p 0.06 that it rose by more than the 20 ms
    minimum) is not beyond chance for a 1 % family; 80 ms (p 0.0005) is."""
    current = summary(ttft=(24, ttft_16, 35, 1646, 3064), seed=2)
    assert compare(summary(), current).regressed is regressed


def test_itl_rise():
    assert compare(summary(), summary(itl=(12, 20, 17, 20, 21), seed=3)).regressed  # +43 % and +6 ms at 16 users
    assert not compare(summary(), summary(itl=(12, 15.5, 17, 20, 21), seed=3)).regressed  # +1.5 ms < 2 ms


@pytest.mark.parametrize(("errors", "regressed"), [(5, False), (12, True)])
def test_an_error_rate_rise_needs_the_minimum_and_an_exact_test(errors, regressed):
    """0 -> 5 of 1,000 is the 0.5 pp minimum, not more; 0 -> 12 of 1,000 (Fisher p 0.0002) regresses."""
    assert compare(summary(), summary(errors=(0, errors, 0, 0, 0))).regressed is regressed


def test_thresholds_are_configurable():
    current = summary(ttft=(24, 100, 35, 1646, 3064), seed=2)  # about +245 %, +70 ms at 16 users
    assert compare(summary(), current).regressed
    assert not compare(summary(), current, Thresholds(p99_rise_pct=400)).regressed
    assert not compare(summary(), current, Thresholds(min_ttft_rise_ms=120)).regressed


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
def test_a_rise_of_the_error_rate_within_chance_is_no_regression(before, after):
    """A share of about 5-7 % of 1,000 client requests moves by about 1 pp between runs: Fisher's p of these rises
    is 0.07-0.3, far above the 1 % family's level."""
    result = compare(client_summary(round(before)), client_summary(round(after)))
    check = next(c for c in result.checks if c.metric == "error_rate_pct" and c.step == "16 users")
    assert check.verdict == "ok" and check.p_value > 0.05, check


def test_a_real_rise_of_the_error_rate_is_a_regression_with_its_p_value():
    result = compare(client_summary(50), client_summary(120))  # 5 % -> 12 % of 1,000
    check = next(c for c in result.checks if c.metric == "error_rate_pct" and c.step == "16 users")
    assert check.verdict == "REGRESSION" and check.p_value < 1e-6 and "Holm's level" in check.note, check


def test_a_rise_beyond_chance_but_under_the_minimum_effect_is_no_regression():
    # 0.1 % -> 0.45 % of 100,000: certain, and still under the 0.5 pp a user would act on
    result = compare(client_summary(100, of=100_000), client_summary(450, of=100_000))
    assert not result.regressed


def test_the_429_share_of_attempts_is_a_finding_never_a_regression():
    """Behind a provider's cap the refused share of attempts moves while what users felt (the client failure rate,
    retries included) holds: it is reported, not judged."""
    result = compare(client_summary(10, refused=100), client_summary(10, refused=400))
    check = next(c for c in result.checks if c.metric == "status_429_pct")
    assert check.verdict == "finding" and "not judged" in check.note and not result.regressed
    assert "finding" in format_comparison(result) and "verdict: no regression" in format_comparison(result)


def test_fisher_by_hand():
    """0 failures in 1,000 against 6 in 1,000: the normal approximation's z of 2.45 fails a 99 % gate; Fisher's exact
    one-sided p is 0.0154 (the hypergeometric P of 6 of the 6 failures falling in the current run: C(1000, 6) /
    C(2000, 6) = 0.0155)."""
    assert rise_p((0, 1000), (6, 1000)) == pytest.approx(math.comb(1000, 6) / math.comb(2000, 6), rel=1e-6)
    assert rise_p((0, 1000), (6, 1000)) > 0.01  # not beyond chance at 99 %
    assert rise_p((0, 0), (5, 100)) == 1.0 and rise_p((50, 1000), (50, 1000)) > 0.5


def test_holm_by_hand():
    """Four p-values at a family level of 0.05: sorted 0.01, 0.02, 0.03, 0.2 meet 0.05/4 = 0.0125, then 0.02 > 0.05/3
    = 0.0167 stops it: only the first is rejected (one at a time at 0.05, three would be)."""
    from locust_llm.reports.compare import Check

    checks = [Check("s", f"c{i}", 0, 0, "test", "", p) for i, p in enumerate((0.03, 0.01, 0.2, 0.02))]
    holm(checks, 0.05)
    assert [c.verdict for c in checks] == ["ok", "REGRESSION", "ok", "ok"]
    assert "Holm's level 0.0125 of 4" in checks[1].note


def test_a_p99_of_too_few_requests_is_not_judged_and_says_so():
    """A p99 of 120 requests: its interval is open above (its upper rank is past the sample), so nothing can be said
    of a rise: reported, never judged, whatever the point estimates did."""
    result = compare(summary(n=120), summary(ttft=(24, 90, 35, 1646, 3064), n=120, seed=5))
    check = next(c for c in result.checks if c.metric == "ttft_p99_ms" and c.step == "16 users")
    assert check.verdict == "finding" and "not judged: the baseline's p99 of 120 samples: interval" in check.note


def test_a_summary_without_histograms_is_not_judged_on_its_p99s():
    old = summary()
    del old["histograms"]
    check = next(c for c in compare(old, summary(seed=1)).checks if c.metric == "ttft_p99_ms")
    assert check.verdict == "finding" and "without histograms" in check.note


def test_a_change_of_wall_is_reported_and_never_fails_the_gate_alone():
    kv, cap = ({**summary(), "diagnosis": {"wall": wall}} for wall in ("kv_cache", "provider_cap"))
    result = compare(kv, cap)
    (wall,) = [c for c in result.checks if c.metric == "wall"]
    assert wall.verdict == "finding" and wall.note == "kv_cache -> provider_cap; reported, not judged"
    assert not result.regressed
    same = [c for c in compare(kv, kv).checks if c.metric == "wall"]
    assert [c.verdict for c in same] == ["ok"]
    assert not [c for c in compare(summary(), summary()).checks if c.metric == "wall"]  # older summaries: none


def knees(knee, resampled, reason="latency knee (TTFT p99)"):
    """A run whose knee (and recommendation) is ``knee``, with its knee bootstrap's shares."""
    run = summary(recommended=knee, knee=knee)
    run["knee"].update(latency_knee_resampled=resampled, recommended_reason=reason)
    return run


def test_a_knee_fall_both_bootstraps_are_sure_of_regresses():
    base, cur = knees(32, [[32, 1.0]]), knees(16, [[16, 0.995], [32, 0.005]])
    assert knee_fall_p("recommended_users", base, cur, Thresholds()) == pytest.approx(0.005)  # halved
    assert knee_fall_p("latency_knee_users", base, cur, Thresholds()) == 1.0  # one step: within the knee's rule
    result = compare(base, cur)
    assert verdicts(result)[("-", "recommended")] == "REGRESSION"
    assert "bootstraps agree (p 0.005 <= 0.01)" in next(c.note for c in result.checks if c.metric == "recommended")


def test_a_knee_on_the_edge_that_flips_between_runs_is_no_regression():
    """Both runs' resamples split between 16 and 32: the same server, measured twice, and the points fell a step
    only by chance (p = 1 - 0.6 * 0.4 that it did not fall)."""
    base, cur = knees(32, [[32, 0.6], [16, 0.4]]), knees(16, [[16, 0.6], [32, 0.4]])
    assert knee_fall_p("recommended_users", base, cur, Thresholds()) == pytest.approx(1 - 0.6 * 0.6)
    assert not compare(base, cur).regressed


def test_without_both_bootstraps_a_fall_is_judged_on_the_points():
    base, cur = knees(32, None), knees(16, [[16, 1.0]])
    assert knee_fall_p("latency_knee_users", base, cur, Thresholds()) is None
    assert compare(base, cur).regressed
    # a recommendation resting on something else than the knee has no bootstrap: its points decide
    other = knees(16, [[16, 0.5], [32, 0.5]], reason="server queue")
    assert knee_fall_p("recommended_users", knees(32, [[32, 0.5], [16, 0.5]]), other, Thresholds()) is None


def test_a_resample_with_no_knee_counts_as_past_the_sweep():
    base, cur = knees(64, [[None, 0.5], [64, 0.5]]), knees(16, [[16, 1.0]])
    assert knee_fall_p("latency_knee_users", base, cur, Thresholds()) == 0.0


def test_a_changed_target_is_printed_above_the_verdict_and_refused_when_the_same_is_required():
    """Tonight's server has half the KV blocks and three replicas: said above the verdict, judged as usual; with
    --gate-require-same-target (``require_same_target``) it is an input error naming the change, not a verdict."""
    before = {**summary(), "target": {"vllm": {"num_gpu_blocks": 2000}, "replicas": 1, "server": "uvicorn"}}
    after = {**summary(), "target": {"vllm": {"num_gpu_blocks": 1000}, "replicas": 3, "changed_during_run": []}}
    result = compare(before, after)
    assert result.target_changes == ["KV blocks: 2000 -> 1000", "replicas: 1 -> 3"]  # no Server header tonight: unknown
    lines = format_comparison(result).splitlines()
    assert lines[-2:] == [
        "the target changed since the baseline: KV blocks: 2000 -> 1000; replicas: 1 -> 3",
        "verdict: no regression",
    ]
    with pytest.raises(GateInputError, match=r"the target changed since the baseline \(KV blocks: 2000 -> 1000;"):
        compare(before, after, Thresholds(require_same_target=True))
    assert not compare(before, before, Thresholds(require_same_target=True)).target_changes
    assert not compare(summary(), after, Thresholds(require_same_target=True)).target_changes  # a baseline without one
