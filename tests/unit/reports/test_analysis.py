import pytest
from hypothesis import given
from hypothesis import strategies as st

from locust_llm.measure.sla import Prices, Sla
from locust_llm.reports.analysis import analyze, provider_cap, rate_saturation, sla_capacity, throughput_saturation

USERS = [8, 16, 32, 64, 128]


def steps(ttft_p99, tok_s, errors=None, n429=None, requests=100, **extra):
    out = []
    for i, users in enumerate(USERS):
        row = {
            "step": i + 1,
            "users": users,
            "model": "m",
            "requests": requests,
            "errors": (errors or [0] * 5)[i],
            "status_429": (n429 or [0] * 5)[i],
            "ok": requests - (errors or [0] * 5)[i],
            "ttft_p50_ms": ttft_p99[i] / 2,
            "ttft_p90_ms": ttft_p99[i] * 0.8,
            "ttft_p99_ms": ttft_p99[i],
            "itl_p99_ms": 20.0,
            "itl_p50_ms": 15.0,
            "itl_p90_ms": 18.0,
            "e2e_p99_ms": 2000.0,
            "output_tok_s": tok_s[i],
            "req_s": tok_s[i] / 100,
            "duration_s": 10.0,
            "prompt_tokens": 1000 * (i + 1),
            "completion_tokens": 5000 * (i + 1),
            "goodput_req_s": 9.0,
        }
        row.update({k: v[i] for k, v in extra.items()})
        out.append(row)
    return out


FLAT_THEN_BENDING = steps([24, 29, 35, 1646, 3064], [650, 1130, 1830, 2070, 2060])


def test_flat_then_bending_run():
    a = analyze("m", FLAT_THEN_BENDING)
    assert a.latency_knee_users == 32 and a.latency_knee_bracket == (32, 64)
    assert a.throughput_saturation_users == 32
    assert a.recommended_users == 32 and a.recommended_reason == "latency knee (TTFT p99)"
    assert not a.provider_is_the_wall and a.provider_cap_users is None


def test_saturation_is_the_lowest_plateau_step_no_later_step_contradicts():
    # peak 2070 at 64; 1830 at 32 is 88% of it and 64 adds 13% (< 15%)
    users, note = throughput_saturation(FLAT_THEN_BENDING)
    assert users == 32 and "88% of the peak 2070" in note


def tok(*values):
    return [{"users": u, "output_tok_s": float(v)} for u, v in zip(USERS, values, strict=False)]


@pytest.mark.parametrize(
    ("curve", "expected"),
    [
        ((1000, 1000, 1300, 1700, 1750), 64),  # flat, then rising ~30%: not saturated at its flat start
        ((650, 1130, 1830, 1840, 1835), 32),  # rising, then flat
        ((650, 1100, 1800, 1700, 1850), 32),  # a noisy plateau: +3% and -6% are noise
        ((100, 200, 400, 800, 1600), None),  # still rising at the end
        ((100, 200, 400, 800, 1000), None),  # the last doubling still adds 25%: not shown to be flat
        ((100, 200, 400, 800, 900), 64),  # the last doubling adds 12.5%: the plateau begins at 64
        ((500, 1000, 900, 700, 600), 16),  # a peak, then collapse: the peak is where it saturates
        ((0, 0, 0), None),
    ],
)
def test_saturation_on_synthetic_curves(curve, expected):
    assert throughput_saturation(tok(*curve))[0] == expected


@given(st.lists(st.floats(min_value=1, max_value=1e5), min_size=2, max_size=8))
def test_no_later_step_contradicts_the_saturation_point(values):
    steps = [{"users": 2**i, "output_tok_s": v} for i, v in enumerate(values)]
    users, _ = throughput_saturation(steps)
    if users is not None:
        k = next(i for i, s in enumerate(steps) if s["users"] == users)
        assert all(s["output_tok_s"] <= 1.15 * values[k] for s in steps[k + 1 :])
        assert values[k] >= 0.85 * max(values) and k < len(values) - 1


def test_the_recommendation_never_comes_from_a_contradicted_saturation():
    # flat then rising: the old marginal-gain rule recommended 8 users, below the latency knee at 32
    a = analyze("m", steps([24, 29, 35, 1646, 3064], [1000, 1000, 1300, 1700, 1750]))
    assert a.throughput_saturation_users == 64 and a.recommended_users == 32


def test_linear_run_has_no_limit_within_the_sweep():
    a = analyze("m", steps([10, 20, 30, 40, 50], [100, 200, 400, 800, 1600]))
    assert a.latency_knee_users is None and a.throughput_saturation_users is None
    assert a.recommended_users == 128 and "no limit reached up to 128 users" in a.recommended_reason


def test_sla_capacity_with_interpolation_between_the_last_passing_and_first_failing_step():
    users, interp, note = sla_capacity(FLAT_THEN_BENDING, Sla(ttft_p99_ms=500))
    # 35 ms at 32 users, 1646 ms at 64: 500 ms is reached at 32 + 32 * (500 - 35) / (1646 - 35)
    assert users == 32 and interp == pytest.approx(32 + 32 * 465 / 1611, abs=0.05)
    assert note == "at 64 users TTFT p99 1646 ms > 500 ms"


def test_sla_failing_at_the_first_step():
    a = analyze("m", FLAT_THEN_BENDING, Sla(ttft_p99_ms=5))
    assert a.sla_max_users is None and a.recommended_users == 0
    assert a.recommended_reason == "no tested concurrency meets the SLA"


def test_error_rate_sla():
    run = steps([24, 29, 35, 40, 45], [650, 1130, 1830, 2500, 3000], errors=[0, 0, 1, 5, 9])
    users, interp, note = sla_capacity(run, Sla(max_error_rate=0.02))
    assert users == 32 and interp == 64.0 and "error rate 5.0% > 2%" in note


def test_only_429s_the_provider_is_the_wall():
    run = steps([24, 25, 26, 27, 28], [650, 1300, 2600, 3000, 3000], errors=[0, 0, 0, 40, 70], n429=[0, 0, 0, 40, 70])
    a = analyze("m", run)
    assert a.provider_cap_users == 64 and a.provider_cap_share == 0.4
    assert a.recommended_users == 32 and a.provider_is_the_wall


def test_all_failing_steps():
    run = steps([24] * 5, [0] * 5, errors=[100] * 5, n429=[100] * 5)
    for row in run:
        row.update(ttft_p99_ms=None, itl_p99_ms=None, ttft_p50_ms=None, ttft_p90_ms=None)
    a = analyze("m", run)
    assert a.latency_knee_users is None and a.provider_cap_users == 8 and a.recommended_users == 0


def test_provider_cap_ignores_a_small_share():
    assert provider_cap(steps([1] * 5, [1] * 5, n429=[0, 1, 0, 0, 0])) == (None, None)


def test_single_step():
    a = analyze("m", FLAT_THEN_BENDING[:1])
    assert a.latency_knee_users is None and a.throughput_saturation_users is None and a.recommended_users == 8


def test_cost_per_step():
    a = analyze("m", FLAT_THEN_BENDING, prices=Prices(2.0, 10.0))
    first = a.cost["steps"][0]
    usd = (1000 * 2.0 + 5000 * 10.0) / 1e6
    assert first["cost_usd"] == pytest.approx(usd)
    assert first["output_tokens_per_usd"] == pytest.approx(5000 / usd, rel=1e-3)
    assert first["usd_per_1k_responses"] == pytest.approx(1000 * usd / 100)


def test_goodput_exact_or_estimated_from_percentiles():
    exact = analyze("m", FLAT_THEN_BENDING, Sla(ttft_p99_ms=500), goodput_exact=True).goodput
    assert exact[0] == {"users": 8, "goodput_req_s": 9.0, "estimated": False}
    estimated = analyze("m", FLAT_THEN_BENDING, Sla(ttft_p99_ms=500)).goodput
    assert estimated[0]["goodput_req_s"] == pytest.approx(10.0) and estimated[0]["estimated"]
    # at 64 users: p50 823, p90 1317, p99 1646 ms: 500 ms is below p50 -> 0.5 * 500 / 823 of the requests
    assert estimated[3]["goodput_req_s"] == pytest.approx(10.0 * 0.5 * 500 / 823, rel=1e-3)


@pytest.mark.parametrize("scale", [0.001, 3.0, 1000.0])
def test_scaling_latencies_and_the_decode_step_moves_no_knee(scale):
    run = steps([v * scale for v in (24, 29, 35, 1646, 3064)], [650, 1130, 1830, 2070, 2060])
    for row in run:
        row["itl_p50_ms"] *= scale
    assert analyze("m", run).latency_knee_users == 32


def test_sla_capacity_judges_the_client_perceived_p99():
    rows = steps([24, 29, 35, 60, 90], [650, 1130, 1830, 2070, 2060], client_ttft_p99_ms=[30, 40, 50, 900, 4000])
    users, interp, note = sla_capacity(rows, Sla(ttft_p99_ms=500))
    assert users == 32 and note == "at 64 users TTFT p99 900 ms > 500 ms"
    assert interp == pytest.approx(32 + 32 * (500 - 50) / (900 - 50), abs=0.05)


def rate_steps(offered, completed, ttft_p99, dropped=None, duration=30.0):
    out = []
    for i, (rate, done, p99) in enumerate(zip(offered, completed, ttft_p99, strict=True)):
        out.append(
            {
                "step": i + 1,
                "users": 3 * (i + 1),
                "offered_req_s": rate,
                "model": "m",
                "requests": done,
                "ok": done,
                "client_ok": done,
                "client_requests": done,
                "errors": 0,
                "status_429": 0,
                "duration_s": duration,
                "req_s": done / duration,
                "output_tok_s": 64 * done / duration,
                "ttft_p50_ms": p99 / 2,
                "ttft_p90_ms": p99 * 0.8,
                "ttft_p99_ms": p99,
                "itl_p99_ms": 20.0,
                "e2e_p99_ms": 2000.0,
                "dropped": (dropped or [0] * len(offered))[i],
            }
        )
    return out


def test_an_open_loop_saturates_where_completions_fall_behind_the_offered_rate():
    # 2, 4, 8 req/s are kept up with (Poisson noise of a few requests); 16 req/s completes only 300 of 480
    steps = rate_steps([2, 4, 8, 16], [57, 124, 236, 300], [120, 130, 160, 9000])
    rate, note = rate_saturation(steps)
    assert rate == 8 and "fell behind at 16 req/s (300 client requests ended, a backlog growing by 180" in note
    a = analyze("m", steps)
    assert a.mode == "rate" and a.throughput_saturation_users == 8
    out = a.as_dict()
    assert out["throughput_saturation_rate_req_s"] == 8 and "throughput_saturation_users" not in out
    assert out["recommended_rate_req_s"] == 8 and out["users"] == [2, 4, 8, 16]


def test_retried_attempts_do_not_count_as_keeping_up():
    # 32 req/s for 30 s: 2,650 attempts (429s retried) but only 400 client requests served
    steps = rate_steps([16, 32], [480, 2650], [50, 3000])
    steps[1].update(ok=550, client_ok=400, client_requests=400, status_429=2100, errors=2100)
    rate, note = rate_saturation(steps)
    assert rate == 16 and "(400 client requests ended, a backlog growing by 560" in note


def test_dropped_arrivals_are_saturation_and_noise_is_not():
    assert rate_saturation(rate_steps([2, 4], [60, 100], [100, 100], dropped=[0, 5]))[0] == 2
    assert rate_saturation(rate_steps([2, 4], [50, 108], [100, 100]))[0] is None  # within 3 sigma of 60 and 120
    assert rate_saturation(rate_steps([2, 4], [20, 120], [100, 100]))[1].startswith("already behind at the lowest")


def test_a_backlog_that_keeps_growing_is_falling_behind_though_most_arrivals_were_served():
    """A llama.cpp server with 4 slots, swept at 4, 6, 8 and 12 req/s (25 s windows): at 6 req/s it served 5.24 (87 %:
    within the arrival noise) while its in-flight count rose by 19 over the window, against a stable queue's
    sqrt(2 x 11) = 4.7 (3 sigma: 14): it had fallen behind, and 6 req/s is no capacity to recommend."""
    steps = rate_steps([4, 6, 8, 12], [110, 131, 140, 100], [70, 90, 900, 20000], duration=25.0)
    for step, (growth, held) in zip(steps, [(-10, 4), (19, 11), (60, 50), (200, 170)], strict=True):
        step.update(backlog_growth=growth, in_flight_p50=held)
    rate, note = rate_saturation(steps)
    assert rate == 4 and "fell behind at 6 req/s" in note and "a backlog growing by 19 (noise 14)" in note
    assert analyze("m", steps).as_dict()["recommended_rate_req_s"] == 4
    steps[1].update(backlog_growth=13)  # within 3 sigma of a stable queue of 11: noise
    assert rate_saturation(steps)[0] == 6


def test_behind_already_at_the_lowest_rate_recommends_no_rate_whatever_the_429s_say():
    """A server behind at 2.2 req/s (25 of 66 served) that answers 429 from 8.7: the step below the provider cap is
    no rate to recommend, for it was not kept up with."""
    steps = rate_steps([2.2, 8.7], [25, 40], [10000, 17000])
    steps[1].update(status_429=300, requests=340, errors=300)
    out = analyze("m", steps).as_dict()
    assert out["recommended_rate_req_s"] == 0
    assert out["recommended_reason"].startswith("no offered rate was kept up with: already behind at the lowest")


def test_the_arrivals_a_window_held_are_what_it_must_serve_not_the_mean_rate():
    """A trace replayed in part: its first 30 s at speed 1 held 30 arrivals, not the 60 its mean 2 req/s would give;
    serving all 30 is keeping up. Without the count (an older CSV), the offered rate stands in."""
    steps = rate_steps([2, 4], [30, 118], [100, 120])
    steps[0]["arrivals"], steps[1]["arrivals"] = 30, 120
    assert rate_saturation(steps) == (None, "kept up with every offered rate, up to 4 req/s")
    del steps[0]["arrivals"]
    assert rate_saturation(steps)[1].startswith("already behind at the lowest rate, 2 req/s (30 client requests ended")


def test_a_sustained_server_queue_is_past_capacity_and_binds_the_recommendation():
    """llama.cpp with 4 slots, --steps 2,8: TTFT p50 31 -> 763 ms, and the server's own metrics showed 4 running and
    4 waiting at 8 users. 8 is not recommended, and the summary says which evidence bound it."""
    run = [
        {**steps([62, 1500, 0, 0, 0], [200, 210, 0, 0, 0])[i], "users": u, "step": i + 1} for i, u in enumerate([2, 8])
    ]
    run[0].update(server_scrapes=20, server_running_p50=2, server_waiting_p50=0)
    run[1].update(server_scrapes=20, server_running_p50=4, server_waiting_p50=4)
    a = analyze("m", run)
    assert a.server_queue_users == 8 and a.recommended_users == 2
    assert a.binding == "server_queue" and a.recommended_reason == "server queue: 4 waiting and 4 running at 8 users"
    assert a.rests_on["recommended"] == 8
    run[1].update(server_waiting_p50=1)  # one waiting at a step boundary is no queue; the latency still bends
    assert analyze("m", run).binding == "latency_knee" and analyze("m", run).recommended_users == 2


def test_two_waiting_at_a_step_boundary_far_below_the_knee_is_no_queue():
    """The simulator at 3 users (knee ~32) showed one waiting at half of a 4-scrape window, and two at times: a median
    of 1.5 waiting beside 2.5 running is requests waiting for the next engine step, not a queue. Three of three
    users waiting is one."""
    run = [{**steps([25, 0, 0, 0, 0], [120, 0, 0, 0, 0])[0], "users": 3, "step": 1}]
    run[0].update(server_scrapes=4, server_running_p50=2.5, server_waiting_p50=1.5)
    a = analyze("m", run)
    assert a.server_queue_users is None and a.recommended_users == 3, a.recommended_reason
    run[0].update(server_running_p50=0, server_waiting_p50=3)
    assert analyze("m", run).server_queue_users == 3 and analyze("m", run).recommended_users == 0


def test_two_steps_recommend_the_higher_only_when_nothing_argues_against_it():
    run = [{**steps([30, 36, 0, 0, 0], [200, 390, 0, 0, 0])[i], "users": u} for i, u in enumerate([2, 4])]
    a = analyze("m", run)
    assert a.recommended_users == 4 and a.binding == "none" and "no limit reached up to 4 users" in a.recommended_reason
    assert a.rests_on["recommended"] is None  # no limit reached: every step decides it


def test_the_error_budget_binds_where_failures_other_than_429_exceed_it():
    """The simulator with --fault 500:0.09: about 9 % of client requests fail at every step; none is recommended."""
    run = steps([24, 29, 35, 40, 45], [650, 1130, 1830, 2500, 3000], client_requests=[400] * 5, client_ok=[364] * 5)
    a = analyze("m", run)
    assert a.error_budget_users == 8 and a.recommended_users == 0 and a.binding == "error_budget"
    assert a.recommended_reason.startswith("every tested concurrency is past capacity: error budget: 9.0% of")
    assert analyze("m", run, error_budget=0.10).error_budget_users is None  # a budget of 10 % allows them


def test_one_stray_failure_is_no_evidence_against_the_budget():
    run = steps([24, 29, 35, 40, 45], [650, 1130, 1830, 2500, 3000], client_requests=[50] * 5, client_ok=[49] * 5)
    assert analyze("m", run).error_budget_users is None  # 2 % of 50: a binomial p of 0.39 against 1 %


def test_429s_are_the_provider_caps_never_the_error_budgets():
    run = steps(
        [24, 25, 26, 27, 28],
        [650, 1300, 2600, 3000, 3000],
        errors=[0, 0, 0, 40, 70],
        n429=[0, 0, 0, 40, 70],
        client_requests=[100] * 5,
        client_ok=[100, 100, 100, 60, 30],
        client_429=[0, 0, 0, 40, 70],
    )
    a = analyze("m", run)
    assert a.error_budget_users is None and a.binding == "provider_cap" and a.recommended_users == 32


def test_each_answer_says_the_highest_load_it_rests_on():
    a = analyze("m", FLAT_THEN_BENDING)
    assert a.rests_on["latency_knee"] == 64 and a.rests_on["recommended"] == 64  # the bend's bracket: 32 .. 64
    assert a.rests_on["throughput_saturation"] is None  # a plateau is judged on every step after it
