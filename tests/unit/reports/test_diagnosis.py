"""The wall, from the rows: each rule on steps whose answer is known, and "not sure" where the rows cannot tell."""

from locust_llm.reports.diagnosis import diagnose


def step(users, *, itl=12.0, kv=None, running=None, waiting=None, r429=0, requests=400, reasons="", scrapes=None):
    scraped = kv is not None or running is not None or waiting is not None
    return {
        "users": users,
        "offered_req_s": None,
        "requests": requests,
        "status_429": r429,
        "itl_p50_ms": itl,
        "invalid_reasons": reasons,
        "server_scrapes": (20 if scraped else 0) if scrapes is None else scrapes,
        "server_kv_usage_p50": kv,
        "server_kv_usage_max": kv,
        "server_waiting_p50": waiting,
        "server_running_p50": running,
        "server_running_max": running,
    }


def at(recommended, binding="latency_knee", confidence="high"):
    """What the analysis said: the load it allows and the limit that bound it."""
    return {"recommended_users": recommended, "binding": binding, "latency_knee_confidence": confidence}


def test_a_full_kv_cache_with_a_queue_is_the_kv_wall():
    steps = [
        step(8, kv=0.3, running=8, waiting=0),
        step(16, itl=14, kv=0.5, running=16, waiting=0),
        step(32, itl=17, kv=0.9, running=32, waiting=0.5),
        step(64, itl=19.8, kv=1.0, running=32.5, waiting=29.5),
    ]
    d = diagnose(steps, at(32))
    assert d["wall"] == "kv_cache" and d["confidence"] == "high"
    assert d["sentence"] == (
        "the wall is KV-cache memory: 29.5 requests waiting and 32.5 running at 64 users (0.5 at 32 users); "
        "KV usage 1.00"
    )


def test_the_median_gauge_decides_not_a_spike():
    """KV usage touched 1.0 once (its maximum) but its median was 0.4: the cache was not the wall."""
    steps = [step(16, kv=0.3, running=16, waiting=0), step(32, kv=0.4, running=16, waiting=16)]
    steps[1]["server_kv_usage_max"] = 1.0
    d = diagnose(steps, at(16))
    assert d["wall"] == "batch_limit" and "KV usage only 0.40" in d["sentence"]


def test_rising_preemptions_are_kv_evidence_even_without_a_kv_gauge():
    steps = [step(16, running=16, waiting=0), step(32, running=24, waiting=8)]
    steps[0]["server_preemptions"], steps[1]["server_preemptions"] = 0, 37
    d = diagnose(steps, at(16))
    assert d["wall"] == "kv_cache" and "37 preemptions" in d["sentence"]


def test_a_flat_running_count_with_a_queue_is_a_batch_limit_also_without_a_kv_gauge():
    """llama.cpp with 4 slots at 2 and 8 users (no KV gauge): 4 running at both... and 4 waiting: a limit on
    running requests, its cause not known."""
    steps = [step(4, running=4, waiting=0), step(8, running=4, waiting=4)]
    d = diagnose(steps, at(4, "server_queue"))
    assert d["wall"] == "batch_limit" and "held at 4" in d["sentence"] and "slots or memory" in d["sentence"]
    steps[1]["server_running_p50"] = 7  # the running count still grew: the queue alone does not say why
    assert diagnose(steps, at(4, "server_queue"))["wall"] == "unknown"


def test_more_running_and_slower_decode_without_a_queue_is_the_batch():
    steps = [
        step(4, itl=25, kv=0.1, running=4, waiting=0),
        step(8, itl=28, kv=0.2, running=8, waiting=0),
        step(16, itl=35, kv=0.4, running=16, waiting=0),
    ]
    d = diagnose(steps, at(8))
    assert d["wall"] == "batch_decode" and d["confidence"] == "high" and "ITL p50 +25%" in d["sentence"]
    assert diagnose(steps, at(8, confidence="low"))["confidence"] == "low"  # a knee in doubt: so is its wall


def test_no_wall_is_named_where_no_limit_was_reached():
    """The issue's run: --steps 4,8,16 with throughput still growing and no knee: decode slowed as the batch grew,
    but nothing bound the capacity, so no wall is named."""
    steps = [
        step(4, itl=25, kv=0.1, running=4, waiting=0),
        step(8, itl=28, kv=0.2, running=8, waiting=0),
        step(16, itl=35, kv=0.4, running=16, waiting=0),
    ]
    d = diagnose(steps, at(16, "none"))
    assert d["wall"] == "unknown" and d["evidence"] == ["no limit reached up to 16 users: no wall to name"]


def test_margins_decide_the_confidence():
    """A queue just over its threshold, or a step with too few scrapes, is a wall named with low confidence."""
    thin = [step(16, kv=0.95, running=16, waiting=0), step(32, kv=0.95, running=16, waiting=4.5)]
    assert diagnose(thin, at(16))["confidence"] == "low"  # 4.5 waiting against a threshold of 4: no margin
    wide = [step(16, kv=0.95, running=16, waiting=0), step(32, kv=0.95, running=16, waiting=16)]
    assert diagnose(wide, at(16))["confidence"] == "high"
    wide[1]["server_scrapes"] = 2
    assert diagnose(wide, at(16))["confidence"] == "low"


def test_429s_are_the_provider_cap_before_anything_the_server_says():
    steps = [
        step(16, kv=0.3, running=16, waiting=0),
        step(32, kv=0.4, running=32, waiting=0),
        step(64, kv=1.0, running=48, waiting=20, r429=40),
    ]
    d = diagnose(steps, at(32, "provider_cap"))
    assert d["wall"] == "provider_cap" and d["evidence"] == ["HTTP 429 on 10.0% of requests at 64 users"]


def test_a_saturated_generator_is_named_first():
    steps = [step(8), step(16, reasons="generator saturated: worker-1 CPU 97% > 80%", r429=100)]
    assert diagnose(steps, at(8))["wall"] == "generator"


def test_without_server_metrics_or_429s_it_is_not_sure():
    d = diagnose([step(8), step(16, itl=20), step(32, itl=40)], at(16))
    assert d["wall"] == "unknown" and d["evidence"] == ["no server metrics, and no HTTP 429 to go on"]
    assert diagnose([], at(None))["wall"] == "unknown"


def test_every_tested_load_past_capacity_reads_the_first_step():
    d = diagnose(
        [step(8, kv=1.0, running=8, waiting=40), step(16, kv=1.0, running=8, waiting=80)], at(0, "server_queue")
    )
    assert d["wall"] == "kv_cache" and "at 8 users" in d["sentence"] and d["confidence"] == "low"


def test_nothing_left_of_a_stated_cap_is_the_provider_cap_without_a_single_429():
    steps = [step(16), step(32), step(48)]
    steps[2].update(ratelimit_limit_requests=48, ratelimit_remaining_requests_min=0)
    d = diagnose(steps, at(32))
    assert d["wall"] == "provider_cap" and d["evidence"] == [
        "no requests left of the provider's limit of 48 at 48 users"
    ]
    steps[2].update(ratelimit_remaining_requests_min=3)
    assert diagnose(steps, at(32))["wall"] == "unknown"


def replicas(row, n, busiest, kv_median):
    row.update(server_replicas=n, server_busiest_share_p50=busiest, server_kv_usage_median_p50=kv_median)
    return row


def test_a_queue_on_one_of_several_replicas_with_room_on_the_rest_is_an_unbalanced_router():
    """KV full on 1 of 4 replicas and the queue on that one: the router, not a full fleet."""
    steps = [
        replicas(step(16, kv=0.5, running=16, waiting=0), 4, None, 0.1),
        replicas(step(32, kv=0.97, running=20, waiting=12), 4, 1.0, 0.2),
    ]
    d = diagnose(steps, at(16))
    assert d["wall"] == "unbalanced_router" and d["confidence"] == "high"
    assert (
        "100% of the waiting on one of 4 replicas (KV usage 0.97 on the fullest replica, 0.20 on the median)"
        in (d["sentence"])
    )


def test_a_queue_spread_over_the_replicas_or_a_full_median_is_the_fleets_own_wall():
    balanced = replicas(step(32, kv=0.97, running=20, waiting=12), 4, 0.3, 0.95)
    assert diagnose([step(16, kv=0.5, running=16, waiting=0), balanced], at(16))["wall"] == "kv_cache"
    # all of the waiting on one replica, but every replica's cache is full: the fleet is full, the router is not it
    full = replicas(step(32, kv=0.97, running=20, waiting=12), 4, 1.0, 0.95)
    assert diagnose([step(16, kv=0.5, running=16, waiting=0), full], at(16))["wall"] == "kv_cache"
    # a 3:1 split of four waiting on two replicas is chance (UNBALANCED): not the router
    even = replicas(step(32, kv=0.97, running=20, waiting=12), 2, 0.75, 0.5)
    assert diagnose([step(16, kv=0.5, running=16, waiting=0), even], at(16))["wall"] == "kv_cache"
    # one replica (or none said): the rule does not apply
    one = replicas(step(32, kv=0.97, running=20, waiting=12), 1, 1.0, 0.97)
    assert diagnose([step(16, kv=0.5, running=16, waiting=0), one], at(16))["wall"] == "kv_cache"
