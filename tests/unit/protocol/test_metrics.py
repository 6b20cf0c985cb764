from locust_llm.protocol.metrics import Outcome, RequestResult, StatusClass

MS = 1_000_000


def result(**kw):
    base = dict(model="m", intended_ns=0, sent_ns=5 * MS, end_ns=505 * MS, token_ns=[205 * MS, 225 * MS, 255 * MS])
    base.update(kw)
    return RequestResult(**base)


def test_derived_metrics_follow_their_formulas():
    r = result(completion_tokens=3)
    assert r.ttft_ns == 200 * MS
    assert r.itl_gaps_ns() == [20 * MS, 30 * MS]
    assert r.e2e_ns == 500 * MS
    assert r.tpot_ns == (500 - 200) * MS // 2
    assert r.lag_ns == 5 * MS


def test_no_tokens_means_no_ttft_or_tpot():
    r = result(token_ns=[], completion_tokens=0)
    assert (r.ttft_ns, r.tpot_ns, r.itl_gaps_ns()) == (None, None, [])


def test_lag_is_never_negative():
    assert result(intended_ns=10 * MS).lag_ns == 0


def test_http_status_classification():
    assert Outcome.for_http_status(429).status_class is StatusClass.HTTP_429
    assert Outcome.for_http_status(401).status_class is StatusClass.HTTP_4XX_OTHER
    assert Outcome.for_http_status(503).status_class is StatusClass.HTTP_5XX
    assert Outcome.for_http_status(302).status_class is StatusClass.PROTOCOL


def test_every_outcome_has_a_status_class():
    assert {o.status_class for o in Outcome} <= set(StatusClass)
