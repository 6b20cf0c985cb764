import pytest

from locust_llm.measure.sla import Prices, Sla, error_rate
from locust_llm.protocol.metrics import Outcome, RequestResult

MS = 1_000_000


def request(ttft_ms=100, gaps_ms=(10, 10, 10), ok=True):
    tokens = [ttft_ms * MS]
    for gap in gaps_ms:
        tokens.append(tokens[-1] + gap * MS)
    return RequestResult("m", 0, 0, tokens[-1], outcome=Outcome.OK if ok else Outcome.HTTP_5XX, token_ns=tokens)


def test_no_limit_means_every_success_is_good():
    assert not Sla().given
    assert Sla().good(request()) and not Sla().good(request(ok=False))


@pytest.mark.parametrize(
    ("sla", "good"),
    [
        (Sla(ttft_p99_ms=100), True),  # at the limit is within it
        (Sla(ttft_p99_ms=99), False),
        (Sla(e2e_p99_ms=130), True),  # 100 + 3 * 10
        (Sla(e2e_p99_ms=129), False),
        (Sla(itl_p99_ms=10), True),
        (Sla(itl_p99_ms=9.9), False),
    ],
)
def test_one_request_against_each_limit(sla, good):
    assert sla.given and sla.good(request()) is good


def test_itl_limit_uses_the_requests_own_p99_gap_by_nearest_rank():
    # 100 gaps: 99 of 10 ms and one of 500 ms; the 99th of 100 (nearest rank) is 10 ms
    assert Sla(itl_p99_ms=10).good(request(gaps_ms=[10] * 99 + [500]))
    # a short stream's p99 is its largest gap
    assert not Sla(itl_p99_ms=10).good(request(gaps_ms=(10, 500)))


def test_a_request_without_a_first_token_fails_a_ttft_limit():
    no_token = RequestResult("m", 0, 0, 5 * MS)
    assert Sla(e2e_p99_ms=100).good(no_token) and not Sla(ttft_p99_ms=100).good(no_token)


def test_step_failures_name_each_broken_limit():
    sla = Sla(ttft_p99_ms=500, itl_p99_ms=20, max_error_rate=0.01)
    step = {"ttft_p99_ms": 812.4, "itl_p99_ms": 20.0, "requests": 200, "errors": 4}
    assert sla.failures(step) == ["TTFT p99 812 ms > 500 ms", "error rate 2.0% > 1%"]
    assert sla.failures({**step, "ttft_p99_ms": None, "errors": 2}) == ["TTFT p99 unknown (no successful request)"]


def test_error_rate_of_an_empty_step_is_zero():
    assert error_rate({"requests": 0, "errors": 0}) == 0.0
    assert error_rate({"requests": 8, "errors": 2}) == 0.25


def test_prices():
    assert not Prices().given and Prices(output_usd_per_mtok=2.0).given
    # 1,000 prompt tokens at $0.20/M and 500 completion tokens at $0.50/M
    assert Prices(0.20, 0.50).cost_usd(1000, 500) == pytest.approx((1000 * 0.20 + 500 * 0.50) / 1e6)
    assert Prices(None, 2.0).cost_usd(10**6, 10**6) == pytest.approx(2.0)


def test_cached_prompt_tokens_cost_the_cached_price_or_the_input_price():
    # 1,000 prompt tokens of which 800 cached: 200 at $3/M, 800 at $0.75/M, 100 completion tokens at $15/M
    assert Prices(3.0, 15.0, 0.75).cost_usd(1000, 100, 800) == pytest.approx((200 * 3 + 800 * 0.75 + 100 * 15) / 1e6)
    assert Prices(3.0, 15.0).cost_usd(1000, 100, 800) == Prices(3.0, 15.0).cost_usd(1000, 100)  # no cached price
    assert Prices(3.0, 0.0, 0.0).cost_usd(10, 0, 50) == 0.0  # never more cached than prompt tokens


def test_latency_limits_judge_what_users_felt_when_the_row_has_client_figures():
    sla = Sla(ttft_p99_ms=3000, e2e_p99_ms=5000)
    # attempts were quick, but retries after 429s made users wait: client p99s over the limits
    step = {
        "ttft_p99_ms": 800,
        "e2e_p99_ms": 1700,
        "client_ttft_p99_ms": 6400,
        "client_e2e_p99_ms": 7600,
        "requests": 300,
        "errors": 60,
        "client_requests": 240,
        "client_ok": 240,
    }
    assert sla.failures(step) == ["TTFT p99 6400 ms > 3000 ms", "E2E p99 7600 ms > 5000 ms"]
    plain = {"ttft_p99_ms": 800, "e2e_p99_ms": 1700, "requests": 300, "errors": 0}  # plain Locust CSVs
    assert sla.failures(plain) == []


def test_the_error_limit_counts_client_requests_that_got_no_answer():
    step = {"ttft_p99_ms": 100, "requests": 300, "errors": 100, "client_requests": 240, "client_ok": 193}
    assert error_rate(step) == pytest.approx(47 / 240)
    assert Sla(ttft_p99_ms=3000).failures(step) == ["error rate 19.6% > 1%"]  # the default limit applies


def test_the_default_error_limit_and_its_description():
    assert Sla().error_limit is None and Sla(max_error_rate=0.05).error_limit == 0.05
    assert Sla(ttft_p99_ms=500).error_limit == 0.01
    assert Sla(ttft_p99_ms=500).describe() == "TTFT p99 <= 500 ms, error rate <= 1% (default)"
    assert Sla(itl_p99_ms=20, max_error_rate=0.1).describe() == "ITL p99 <= 20 ms, error rate <= 10%"


def test_a_client_request_is_judged_from_its_intended_start():
    retried = request(ttft_ms=100)  # the final attempt's first token 100 ms after its send
    assert Sla(ttft_p99_ms=150).good(retried)
    assert not Sla(ttft_p99_ms=150).good(retried, start_ns=-200 * MS)  # the client asked 200 ms before the send
