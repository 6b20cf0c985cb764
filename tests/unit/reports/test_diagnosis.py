"""The wall, from the rows: each rule on steps whose answer is known, and "not sure" where the rows cannot tell."""

from locust_llm.reports.diagnosis import diagnose


def step(users, *, itl=12.0, kv=None, running=None, waiting=None, r429=0, requests=400, reasons=""):
    scraped = kv is not None or running is not None or waiting is not None
    return {
        "users": users,
        "offered_req_s": None,
        "requests": requests,
        "status_429": r429,
        "itl_p50_ms": itl,
        "invalid_reasons": reasons,
        "server_scrapes": 20 if scraped else 0,
        "server_kv_usage_max": kv,
        "server_waiting_p50": waiting,
        "server_running_p50": running,
        "server_running_max": running,
    }


def test_a_full_kv_cache_with_a_growing_queue_is_the_kv_wall():
    steps = [
        step(8, kv=0.3, running=8, waiting=0),
        step(16, itl=14, kv=0.5, running=16, waiting=0),
        step(32, itl=17, kv=0.9, running=32, waiting=0.5),
        step(64, itl=19.8, kv=1.0, running=32.5, waiting=29.5),
    ]
    d = diagnose(steps, 32)
    assert d["wall"] == "kv_cache" and d["confidence"] == "high"
    assert d["sentence"] == (
        "the wall is KV-cache memory: KV usage 1.00 and 29.5 requests waiting at 64 users (0.5 at 32 users); "
        "ITL p50 +16%"
    )


def test_a_queue_while_the_cache_has_room_is_the_servers_batch_limit():
    steps = [
        step(8, kv=0.2, running=8, waiting=0),
        step(16, kv=0.3, running=16, waiting=0),
        step(32, kv=0.35, running=16, waiting=16),
    ]
    d = diagnose(steps, 16)
    assert d["wall"] == "batch_limit" and "while KV usage stayed at 0.35" in d["sentence"]


def test_more_running_and_slower_decode_without_a_queue_is_the_batch():
    steps = [
        step(4, itl=25, kv=0.1, running=4, waiting=0),
        step(8, itl=28, kv=0.2, running=8, waiting=0),
        step(16, itl=35, kv=0.4, running=16, waiting=0),
    ]
    d = diagnose(steps, 8)
    assert d["wall"] == "batch_decode" and d["confidence"] == "high" and "ITL p50 +25%" in d["sentence"]
    assert diagnose(steps, None)["confidence"] == "low"  # no bend inside the sweep: what its top shows, unsure


def test_429s_are_the_provider_cap_before_anything_the_server_says():
    steps = [
        step(16, kv=0.3, running=16, waiting=0),
        step(32, kv=0.4, running=32, waiting=0),
        step(64, kv=1.0, running=48, waiting=20, r429=40),
    ]
    d = diagnose(steps, 32)
    assert d["wall"] == "provider_cap" and d["evidence"] == ["HTTP 429 on 10.0% of requests at 64 users"]


def test_a_saturated_generator_is_named_first():
    steps = [step(8), step(16, reasons="generator saturated: worker-1 CPU 97% > 80%", r429=100)]
    assert diagnose(steps, 8)["wall"] == "generator"


def test_without_server_metrics_or_429s_it_is_not_sure():
    d = diagnose([step(8), step(16, itl=20), step(32, itl=40)], 16)
    assert d["wall"] == "unknown" and d["evidence"] == ["no server metrics, and no HTTP 429 to go on"]
    assert diagnose([step(8)], None)["wall"] == "unknown"
    # a queue the server reports without its KV usage cannot tell memory from a batch limit
    d = diagnose([step(8, running=8, waiting=0), step(16, running=8, waiting=8)], 8)
    assert d["wall"] == "unknown" and d["confidence"] == "low"


def test_nothing_left_of_a_stated_cap_is_the_provider_cap_without_a_single_429():
    steps = [step(16), step(32), step(48)]
    steps[2].update(ratelimit_limit_requests=48, ratelimit_remaining_requests_min=0)
    d = diagnose(steps, 32)
    assert d["wall"] == "provider_cap" and d["evidence"] == [
        "no requests left of the provider's limit of 48 at 48 users"
    ]
    steps[2].update(ratelimit_remaining_requests_min=3)
    assert diagnose(steps, 32)["wall"] == "unknown"
