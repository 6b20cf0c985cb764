import pytest

from locust_llm.sim.limits import LimitParams, RateLimiter

S = 1_000_000_000


def test_concurrency_cap_refuses_with_retry_after_and_release_frees_a_slot():
    limiter = RateLimiter(LimitParams(max_concurrent=2, retry_after_s=1.5))
    assert limiter.acquire("k", "a", 10, 0) is None
    assert limiter.acquire("k", "b", 10, 0) is None
    refused = limiter.acquire("k", "c", 10, 0)
    assert refused is not None and refused.reason == "concurrency" and refused.retry_after_s == 1.5
    assert "2 concurrent requests" in refused.message
    limiter.release("k")
    assert limiter.acquire("k", "c", 10, 2 * S) is None
    assert (limiter.accepted, limiter.rejected_concurrency) == (3, 1)


def test_keys_are_limited_separately():
    limiter = RateLimiter(LimitParams(max_concurrent=1))
    assert limiter.acquire("k1", "a", 1, 0) is None
    assert limiter.acquire("k2", "a", 1, 0) is None
    assert limiter.in_flight("k1") == 1


def test_tpm_bucket_refills_at_tpm_per_minute_and_says_when_to_return():
    limiter = RateLimiter(LimitParams(tpm=600))  # 10 tokens per second
    assert limiter.acquire("k", "a", 500, 0) is None
    refused = limiter.acquire("k", "a", 200, 0)  # 100 left: 100 more needed = 10 s
    assert refused is not None and refused.reason == "tpm" and refused.retry_after_s == pytest.approx(10.0, abs=0.01)
    assert limiter.acquire("k", "b", 200, 9 * S) is not None  # 190 available after 9 s
    assert limiter.acquire("k", "c", 200, 11 * S) is None
    assert limiter.rejected_tpm == 2


def test_a_request_larger_than_the_tpm_is_told_to_wait_a_minute():
    refused = RateLimiter(LimitParams(tpm=100)).acquire("k", "a", 1000, 0)
    assert refused is not None and refused.retry_after_s == 60.0


def test_early_returns_are_counted_per_client():
    limiter = RateLimiter(LimitParams(max_concurrent=1, retry_after_s=1.0))
    limiter.acquire("k", "a", 1, 0)
    assert limiter.acquire("k", "b", 1, 0) is not None  # b told to come back at 1 s
    limiter.acquire("k", "b", 1, S // 2)  # too early
    limiter.acquire("k", "c", 1, S // 2)  # c was never told anything
    assert limiter.early_returns == 1
    limiter.release("k")
    assert limiter.acquire("k", "b", 1, 3 * S) is None and limiter.early_returns == 1


@pytest.mark.parametrize("kwargs", [{"max_concurrent": 0}, {"tpm": 0}, {"retry_after_s": -1}])
def test_invalid_limits(kwargs):
    with pytest.raises(ValueError):
        LimitParams(**kwargs)
