from locust_llm.measure.failfast import FailFast
from locust_llm.protocol.metrics import Outcome, RequestResult


def failed(cause, status=401):
    result = RequestResult(
        "m", 0, 0, 1, outcome=Outcome.for_http_status(status), http_status=status, error=f"HTTP {status}: nope"
    )
    result.cause = cause
    return result


OK = RequestResult("m", 0, 0, 1, token_ns=[1])


def test_it_fires_once_after_the_threshold_of_same_systematic_failures():
    rule = FailFast(threshold=3)
    assert [rule.feed(failed("http_401")) for _ in range(2)] == [None, None]
    message = rule.feed(failed("http_401"))
    assert message.startswith("the last 3 requests all failed: HTTP 401") and "OPENAI_API_KEY" in message
    assert "HTTP 401: nope" in message and "\n" not in message
    assert rule.feed(failed("http_401")) is None  # once


def test_a_success_or_another_outcome_starts_again():
    rule = FailFast(threshold=3)
    for interruption in (OK, failed("", 429), failed("refused")):
        rule.feed(failed("http_401"))
        rule.feed(failed("http_401"))
        assert rule.feed(interruption) is None
    assert rule.count == 1 and rule.cause == "refused"


def test_non_systematic_failures_never_fire():
    rule = FailFast(threshold=2)
    assert all(rule.feed(failed("", 500)) is None for _ in range(10))
