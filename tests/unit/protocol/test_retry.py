import random
from datetime import UTC, datetime
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from locust_llm.protocol.retry import RetryPolicy, Wait, retry_after_s


def test_retry_after_ms_wins_then_seconds_then_http_date():
    now = 1_800_000_000.0
    assert retry_after_s("1500", "9", now) == 1.5
    assert retry_after_s(None, "2", now) == 2.0
    date = format_datetime(datetime.fromtimestamp(now + 30, UTC), usegmt=True)
    assert retry_after_s(None, date, now) == pytest.approx(30.0)
    assert retry_after_s(None, "soon", now) is None and retry_after_s(None, None, now) is None
    assert retry_after_s(None, "0", now) == 0.0  # the server's explicit "now"


@pytest.mark.parametrize(
    ("ms", "seconds"),
    [
        ("-1500", None),
        ("nan", None),
        ("inf", None),
        ("1e400", None),
        (None, "-5"),
        (None, "NaN"),
        (None, "inf"),
        (None, "1e999"),
        (None, "-inf"),
        ("", "Thu, 01 Jan 1970 00:00:00 GMT"),
        ("abc", "never"),
    ],
)
def test_unusable_server_values_are_none_never_retry_now(ms, seconds):
    assert retry_after_s(ms, seconds, 1_800_000_000.0) is None


def test_an_unusable_ms_value_falls_back_to_the_seconds_header():
    assert retry_after_s("nan", "3", 0.0) == 3.0


@given(st.one_of(st.none(), st.text(max_size=30)), st.one_of(st.none(), st.text(max_size=40)))
def test_any_header_text_gives_none_or_a_finite_non_negative_wait(ms, seconds):
    wait = retry_after_s(ms, seconds, 1_800_000_000.0)
    assert wait is None or (wait >= 0 and wait < float("inf"))


def test_waits_are_capped_and_say_so():
    policy = RetryPolicy("honor", max_wait_s=60.0)
    assert policy.wait(10**9, 0, random.Random(0)) == Wait(60.0, True)
    assert policy.wait(5.0, 0, random.Random(0)) == Wait(5.0, False)
    assert policy.delay_s(429, policy.wait(10**9, 0, random.Random(0)), 0) == 60.0


def test_unusable_values_take_the_jittered_backoff_never_zero():
    policy = RetryPolicy("honor", backoff_base_s=1.0)
    waits = [policy.wait(retry_after_s(None, "-5", 0.0), 0, random.Random(i)).seconds for i in range(200)]
    assert len(set(waits)) == 200 and 0 < sum(waits) / len(waits) < 1.0  # spread over (0, 1): no storm


def test_honor_waits_what_the_server_asked():
    policy = RetryPolicy("honor")
    rng = random.Random(0)
    assert policy.delay_s(429, policy.wait(2.5, 0, rng), 0) == 2.5
    assert policy.delay_s(503, policy.wait(1.0, 2, rng), 2) == 1.0
    assert policy.delay_s(429, policy.wait(2.5, 3, rng), 3) is None  # max_retries = 3
    assert policy.delay_s(500, policy.wait(2.5, 0, rng), 0) is None  # only 429 and 503 are retried


@given(st.integers(min_value=0, max_value=20), st.integers())
def test_backoff_without_retry_after_is_full_jitter_within_bounds(attempt, seed):
    policy = RetryPolicy("honor", max_retries=100, backoff_base_s=0.5, backoff_max_s=30.0)
    delay = policy.delay_s(429, policy.wait(None, attempt, random.Random(seed)), attempt)
    assert 0.0 <= delay <= min(30.0, 0.5 * 2**attempt)


def test_backoff_spreads_over_the_whole_window():
    policy = RetryPolicy("honor", backoff_base_s=1.0)
    delays = [policy.wait(None, 2, random.Random(i)).seconds for i in range(2000)]
    assert min(delays) < 0.2 and max(delays) > 3.8 and sum(delays) / len(delays) == pytest.approx(2.0, rel=0.05)


def test_none_and_naive():
    assert RetryPolicy("none").delay_s(429, Wait(1.0), 0) is None
    assert RetryPolicy("naive").delay_s(429, Wait(5.0), 0) == 0.0  # at once, whatever the server asked
    assert RetryPolicy("naive", max_retries=1).delay_s(429, Wait(5.0), 1) is None


def test_unknown_policy():
    with pytest.raises(ValueError, match="honor, none, naive"):
        RetryPolicy("polite")
