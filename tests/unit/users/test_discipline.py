import random
from datetime import UTC, datetime
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from locust_llm.users.discipline import RetryPolicy, retry_after_s


def test_retry_after_ms_wins_then_seconds_then_http_date():
    now = 1_800_000_000.0
    assert retry_after_s("1500", "9", now) == 1.5
    assert retry_after_s(None, "2", now) == 2.0
    date = format_datetime(datetime.fromtimestamp(now + 30, UTC), usegmt=True)
    assert retry_after_s(None, date, now) == pytest.approx(30.0)
    assert retry_after_s(None, "soon", now) is None and retry_after_s(None, None, now) is None
    assert retry_after_s(None, "-5", now) == 0.0


def test_honor_waits_what_the_server_asked():
    policy = RetryPolicy("honor")
    assert policy.delay_s(429, 2.5, 0, random.Random(0)) == 2.5
    assert policy.delay_s(503, 1.0, 2, random.Random(0)) == 1.0
    assert policy.delay_s(429, 2.5, 3, random.Random(0)) is None  # max_retries = 3
    assert policy.delay_s(500, 2.5, 0, random.Random(0)) is None  # only 429 and 503 are retried


@given(st.integers(min_value=0, max_value=20), st.integers())
def test_backoff_without_retry_after_is_full_jitter_within_bounds(attempt, seed):
    policy = RetryPolicy("honor", max_retries=100, backoff_base_s=0.5, backoff_max_s=30.0)
    delay = policy.delay_s(429, None, attempt, random.Random(seed))
    assert 0.0 <= delay <= min(30.0, 0.5 * 2**attempt)


def test_backoff_spreads_over_the_whole_window():
    policy = RetryPolicy("honor", backoff_base_s=1.0)
    delays = [policy.wait_s(None, 2, random.Random(i)) for i in range(2000)]
    assert min(delays) < 0.2 and max(delays) > 3.8 and sum(delays) / len(delays) == pytest.approx(2.0, rel=0.05)


def test_none_and_naive():
    assert RetryPolicy("none").delay_s(429, 1.0, 0, random.Random()) is None
    assert RetryPolicy("naive").delay_s(429, 5.0, 0, random.Random()) == 0.0
    assert RetryPolicy("naive", max_retries=1).delay_s(429, 5.0, 1, random.Random()) is None


def test_unknown_policy():
    with pytest.raises(ValueError, match="honor, none, naive"):
        RetryPolicy("polite")
