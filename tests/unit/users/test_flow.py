import random
import time
from collections import Counter

import gevent

from locust_llm.metrics import Outcome, RequestResult
from locust_llm.users.discipline import FlowConfig, RetryPolicy
from locust_llm.users.flow import Flow


class Recorder:
    def __init__(self):
        self.results, self.counts, self.clients = [], Counter(), []

    def record(self, result):
        self.results.append(result)

    def count(self, name, model, n=1, at_ns=None):
        self.counts[(name, model)] += n

    def record_client(self, model, sent_ns, end_ns, ok):
        self.clients.append((model, end_ns - sent_ns, ok))


def answer(model, status=200, retry_after=None):
    now = time.perf_counter_ns()
    ok = status == 200
    return RequestResult(model, now, now, now + 1000, outcome=Outcome.OK if ok else Outcome.for_http_status(status),
                         http_status=status, token_ns=[now + 500] if ok else [], retry_after_s=retry_after)  # fmt: skip


def scripted(script):
    """A sender answering each model from its own list of statuses, recording the calls."""
    calls = []

    def send(model, messages, max_tokens, intended_ns, on_first_token):
        calls.append((model, intended_ns, time.perf_counter_ns()))
        status = script[model].pop(0)
        return answer(model, *status) if isinstance(status, tuple) else answer(model, status)

    return send, calls


def flow(send, recorder, **kw):
    return Flow(send, recorder, FlowConfig(**kw), random.Random(0))


def test_fallback_goes_to_the_next_model_on_429_and_503():
    send, calls = scripted({"a": [429], "b": [503], "c": [200]})
    rec = Recorder()
    result = flow(send, rec, fallbacks=("b", "c")).request("a", [], 8, time.perf_counter_ns())
    assert result.ok and result.model == "c"
    assert [c[0] for c in calls] == ["a", "b", "c"]
    assert rec.counts[("fallbacks", "b")] == 1 and rec.counts[("fallbacks", "c")] == 1
    assert [r.model for r in rec.results] == ["a", "b", "c"]  # every attempt recorded, per model
    assert rec.clients[0][0] == "a" and rec.clients[0][2] is True  # one client request, on the primary
    assert rec.clients[0][1] == rec.results[-1].end_ns - rec.results[0].sent_ns  # from the first attempt on


def test_fallback_on_other_statuses_is_not_taken():
    send, calls = scripted({"a": [500], "b": [200]})
    result = flow(send, Recorder(), fallbacks=("b",), policy=RetryPolicy("none")).request("a", [], 8, 0)
    assert result.http_status == 500 and [c[0] for c in calls] == ["a"]


def test_honor_waits_retry_after_before_the_next_attempt():
    send, calls = scripted({"a": [(429, 0.05), 200]})
    rec = Recorder()
    result = flow(send, rec).request("a", [], 8, time.perf_counter_ns())
    assert result.ok and len(calls) == 2
    first_end = rec.results[0].end_ns
    assert calls[1][2] - first_end >= 50_000_000  # sent no earlier than Retry-After allowed
    assert calls[1][1] >= first_end + 50_000_000  # and its intended start is the end of the wait
    assert rec.counts[("retries", "a")] == 1 and rec.counts[("retry_wait_ms", "a")] >= 45
    assert rec.clients[0][1] >= 50_000_000  # client-perceived latency includes the wait


def test_honor_after_the_last_retry_still_delays_the_users_next_request():
    send, calls = scripted({"a": [(429, 0.05), 200]})
    f = flow(send, Recorder(), policy=RetryPolicy("honor", max_retries=0))
    assert not f.request("a", [], 8, 0).ok
    before = time.perf_counter_ns()
    f.request("a", [], 8, 0)
    assert calls[1][2] - before >= 40_000_000


def test_naive_retries_at_once_and_none_moves_on():
    send, calls = scripted({"a": [429, 429, 429, 200]})
    rec = Recorder()
    assert flow(send, rec, policy=RetryPolicy("naive", max_retries=3)).request("a", [], 8, 0).ok
    assert len(calls) == 4 and rec.counts[("retries", "a")] == 3 and rec.counts[("retry_wait_ms", "a")] == 0
    send, calls = scripted({"a": [429, 200]})
    assert not flow(send, Recorder(), policy=RetryPolicy("none")).request("a", [], 8, 0).ok
    assert len(calls) == 1


def slow_then_fast(delays):
    """Per model: seconds before the first token."""
    finished = []

    def send(model, messages, max_tokens, intended_ns, on_first_token):
        gevent.sleep(delays[model])
        if on_first_token:
            on_first_token()
        gevent.sleep(0.01)
        finished.append(model)
        return answer(model)

    return send, finished


def test_hedge_fires_after_the_threshold_and_the_first_to_stream_wins():
    send, finished = slow_then_fast({"a": 0.5, "b": 0.0})
    rec = Recorder()
    result = flow(send, rec, fallbacks=("b",), hedge_after_s=0.05).request("a", [], 8, 0)
    assert result.model == "b" and finished == ["b"]  # the slow primary was cancelled
    assert rec.counts[("hedges", "a")] == 1 and rec.counts[("hedge_wins", "a")] == 1
    assert [r.model for r in rec.results] == ["b"]


def test_no_hedge_when_the_first_token_comes_in_time():
    send, finished = slow_then_fast({"a": 0.0, "b": 0.0})
    rec = Recorder()
    result = flow(send, rec, fallbacks=("b",), hedge_after_s=0.5).request("a", [], 8, 0)
    assert result.model == "a" and finished == ["a"] and rec.counts[("hedges", "a")] == 0


def test_hedge_without_fallbacks_goes_to_the_same_model_and_the_primary_can_still_win():
    calls = []

    def send(model, messages, max_tokens, intended_ns, on_first_token):
        calls.append(model)
        gevent.sleep(0.1 if len(calls) == 1 else 1.0)  # the primary answers first after all
        on_first_token()
        return answer(model)

    rec = Recorder()
    result = flow(send, rec, hedge_after_s=0.02).request("a", [], 8, 0)
    assert calls == ["a", "a"] and result.model == "a"
    assert rec.counts[("hedges", "a")] == 1 and rec.counts[("hedge_wins", "a")] == 0


def test_honor_with_fallback_routes_around_a_cooling_model_instead_of_coming_back_early():
    send, calls = scripted({"a": [(429, 0.2), 200], "b": [200, 200]})
    rec = Recorder()
    f = flow(send, rec, fallbacks=("b",))
    assert f.request("a", [], 8, 0).model == "b"  # a refused: fell back at once
    assert f.request("a", [], 8, 0).model == "b"  # a still cools down: straight to b, a is not asked again early
    assert [c[0] for c in calls] == ["a", "b", "b"]
    gevent.sleep(0.25)
    assert f.request("a", [], 8, 0).model == "a"  # its Retry-After has passed
