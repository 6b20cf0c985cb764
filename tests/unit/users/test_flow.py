import random
import time
from collections import Counter

import gevent

from locust_llm.protocol.metrics import Outcome, RequestResult
from locust_llm.protocol.retry import RetryPolicy
from locust_llm.users.flow import Flow, FlowConfig


class Recorder:
    def __init__(self):
        self.results, self.counts, self.clients, self.client_starts = [], Counter(), [], []

    def record(self, result):
        self.results.append(result)

    def count(self, name, model, n=1, at_ns=None):
        self.counts[(name, model)] += n

    def record_client(self, model, intended_ns, final):
        """(primary model, client-perceived latency from the intended start, ok)"""
        self.clients.append((model, final.end_ns - intended_ns, final.ok))
        self.client_starts.append(intended_ns)


def recorder():
    return Recorder()


def answer(model, status=200, retry_after=None, intended_ns=None):
    now = time.perf_counter_ns()
    ok = status == 200
    return RequestResult(
        model,
        now if intended_ns is None else intended_ns,
        now,
        now + 1000,
        outcome=Outcome.OK if ok else Outcome.for_http_status(status),
        http_status=status,
        token_ns=[now + 500] if ok else [],
        retry_after_s=retry_after,
    )


def scripted(script):
    """A sender answering each model from its own list of statuses, recording the calls; its results keep the
    intended start they were given."""
    calls = []

    def send(model, messages, max_tokens, intended_ns, on_first_token):
        calls.append((model, intended_ns, time.perf_counter_ns()))
        status = script[model].pop(0)
        status = status if isinstance(status, tuple) else (status,)
        return answer(model, *status, intended_ns=intended_ns)

    return send, calls


def flow(send, recorder, **kw):
    return Flow(send, recorder, FlowConfig(**kw), random.Random(0))


def test_fallback_goes_to_the_next_model_on_429_and_503():
    send, calls = scripted({"a": [429], "b": [503], "c": [200]})
    rec = recorder()
    result = flow(send, rec, fallbacks=("b", "c")).request("a", [], 8, time.perf_counter_ns())
    assert result.ok and result.model == "c"
    assert [c[0] for c in calls] == ["a", "b", "c"]
    assert rec.counts[("fallbacks", "b")] == 1 and rec.counts[("fallbacks", "c")] == 1
    assert [r.model for r in rec.results] == ["a", "b", "c"]  # every attempt recorded, per model
    assert rec.clients[0][0] == "a" and rec.clients[0][2] is True  # one client request, on the primary
    assert rec.clients[0][1] == rec.results[-1].end_ns - rec.client_starts[0]  # from the intended start on


def test_fallback_on_other_statuses_is_not_taken():
    send, calls = scripted({"a": [500], "b": [200]})
    result = flow(send, recorder(), fallbacks=("b",), policy=RetryPolicy("none")).request("a", [], 8, 0)
    assert result.http_status == 500 and [c[0] for c in calls] == ["a"]


def test_honor_waits_retry_after_before_the_next_attempt():
    send, calls = scripted({"a": [(429, 0.05), 200]})
    rec = recorder()
    result = flow(send, rec).request("a", [], 8, time.perf_counter_ns())
    assert result.ok and len(calls) == 2
    first_end = rec.results[0].end_ns
    assert calls[1][2] - first_end >= 50_000_000  # sent no earlier than Retry-After allowed
    assert calls[1][1] >= first_end + 50_000_000  # and its intended start is the end of the wait
    assert rec.counts[("retries", "a")] == 1 and rec.counts[("retry_wait_ms", "a")] >= 45
    assert rec.clients[0][1] >= 50_000_000  # client-perceived latency includes the wait


def test_honor_after_the_last_retry_still_delays_the_users_next_request():
    send, calls = scripted({"a": [(429, 0.05), 200]})
    f = flow(send, recorder(), policy=RetryPolicy("honor", max_retries=0))
    assert not f.request("a", [], 8, 0).ok
    before = time.perf_counter_ns()
    f.request("a", [], 8, 0)
    assert calls[1][2] - before >= 40_000_000


def test_naive_retries_at_once_and_none_moves_on():
    send, calls = scripted({"a": [429, 429, 429, 200]})
    rec = recorder()
    assert flow(send, rec, policy=RetryPolicy("naive", max_retries=3)).request("a", [], 8, 0).ok
    assert len(calls) == 4 and rec.counts[("retries", "a")] == 3 and rec.counts[("retry_wait_ms", "a")] == 0
    send, calls = scripted({"a": [429, 200]})
    assert not flow(send, recorder(), policy=RetryPolicy("none")).request("a", [], 8, 0).ok
    assert len(calls) == 1


def slow_then_fast(delays, fail=None):
    """Per model: seconds before the first token (or, for the models in ``fail``, before failing with that
    status). Results keep the intended start they were given, and are sent now."""
    finished = []

    def send(model, messages, max_tokens, intended_ns, on_first_token):
        sent = time.perf_counter_ns()
        gevent.sleep(delays[model])
        if fail and model in fail:
            finished.append(model)
            status, retry_after = fail[model]
            end = time.perf_counter_ns()
            return RequestResult(
                model,
                intended_ns,
                sent,
                end,
                outcome=Outcome.for_http_status(status),
                http_status=status,
                retry_after_s=retry_after,
            )
        first = time.perf_counter_ns()
        if on_first_token:
            on_first_token()
        gevent.sleep(0.01)
        finished.append(model)
        return RequestResult(model, intended_ns, sent, time.perf_counter_ns(), token_ns=[first], http_status=200)

    return send, finished


def test_hedge_fires_after_the_threshold_and_the_first_to_stream_wins():
    send, finished = slow_then_fast({"a": 0.5, "b": 0.0})
    rec = recorder()
    result = flow(send, rec, fallbacks=("b",), hedge_after_s=0.05).request("a", [], 8, 0)
    assert result.model == "b" and finished == ["b"]  # the slow primary was cancelled
    assert rec.counts[("hedges", "a")] == 1 and rec.counts[("hedge_wins", "a")] == 1
    assert [r.model for r in rec.results] == ["b"]


def test_no_hedge_when_the_first_token_comes_in_time():
    send, finished = slow_then_fast({"a": 0.0, "b": 0.0})
    rec = recorder()
    result = flow(send, rec, fallbacks=("b",), hedge_after_s=0.5).request("a", [], 8, 0)
    assert result.model == "a" and finished == ["a"] and rec.counts[("hedges", "a")] == 0


def test_hedge_without_fallbacks_goes_to_the_same_model_and_the_primary_can_still_win():
    calls = []

    def send(model, messages, max_tokens, intended_ns, on_first_token):
        calls.append(model)
        gevent.sleep(0.1 if len(calls) == 1 else 1.0)  # the primary answers first after all
        on_first_token()
        return answer(model)

    rec = recorder()
    result = flow(send, rec, hedge_after_s=0.02).request("a", [], 8, 0)
    assert calls == ["a", "a"] and result.model == "a"
    assert rec.counts[("hedges", "a")] == 1 and rec.counts[("hedge_wins", "a")] == 0


def test_honor_with_fallback_routes_around_a_cooling_model_instead_of_coming_back_early():
    send, calls = scripted({"a": [(429, 0.2), 200], "b": [200, 200]})
    rec = recorder()
    f = flow(send, rec, fallbacks=("b",))
    assert f.request("a", [], 8, 0).model == "b"  # a refused: fell back at once
    assert f.request("a", [], 8, 0).model == "b"  # a still cools down: straight to b, a is not asked again early
    assert [c[0] for c in calls] == ["a", "b", "b"]
    gevent.sleep(0.25)
    assert f.request("a", [], 8, 0).model == "a"  # its Retry-After has passed


MS = 1_000_000


def test_a_hedges_lag_is_its_own_and_the_client_latency_counts_from_the_intended_start():
    send, _ = slow_then_fast({"a": 0.5, "b": 0.0})
    rec = recorder()
    ready = time.perf_counter_ns() - 200 * MS  # the user was ready 200 ms ago: a scheduling lag of 200 ms
    result = flow(send, rec, fallbacks=("b",), hedge_after_s=0.05).request("a", [], 8, ready)
    assert result.model == "b" and [r.model for r in rec.results] == ["b"]
    assert result.lag_ns < 20 * MS  # the hedge was sent when it was meant to be, not 250 ms late
    assert result.intended_ns >= ready + 240 * MS
    (_, client_ms, ok), start = rec.clients[0], rec.client_starts[0]
    assert ok and start == ready and client_ms >= 250 * MS  # the 200 ms lag and the 50 ms before the hedge fired


def test_the_hedge_never_fires_early_when_the_loop_has_not_turned_for_a_while():
    send, _ = slow_then_fast({"a": 0.5, "b": 0.0})
    gevent.sleep(0.001)  # a turn of the loop on a timer: its cached time is now
    spin_until = time.perf_counter_ns() + 30 * MS  # work without yielding: the loop's cached time falls behind
    while time.perf_counter_ns() < spin_until:
        pass
    start = time.perf_counter_ns()
    result = flow(send, recorder(), fallbacks=("b",), hedge_after_s=0.05).request("a", [], 8, start)
    assert result.model == "b"
    assert result.intended_ns - start >= 50 * MS  # a timeout counted from the loop's stale time fired at ~20 ms


def test_a_primary_failing_after_the_hedge_fired_is_recorded_once_and_cools_down():
    send, finished = slow_then_fast({"a": 0.1, "b": 0.2}, fail={"a": (429, 5.0)})
    rec = recorder()
    f = flow(send, rec, fallbacks=("b",), hedge_after_s=0.05)
    result = f.request("a", [], 8, time.perf_counter_ns())
    assert result.ok and result.model == "b" and finished == ["a", "b"]
    assert [(r.model, r.http_status) for r in rec.results] == [("a", 429), ("b", 200)]  # each attempt once
    assert f.cooldown_ns["a"] > time.perf_counter_ns() + 4_000 * MS  # a honours its Retry-After
    assert rec.counts[("hedges", "a")] == 1 and rec.counts[("hedge_wins", "a")] == 1


def test_when_both_fail_before_a_token_each_is_recorded_once():
    send, _ = slow_then_fast({"a": 0.1, "b": 0.15}, fail={"a": (500, None), "b": (503, None)})
    rec = recorder()
    result = flow(send, rec, fallbacks=("b",), hedge_after_s=0.05, policy=RetryPolicy("none")).request("a", [], 8, 0)
    assert not result.ok and sorted(r.model for r in rec.results) == ["a", "b"] and len(rec.results) == 2


def test_a_retry_is_meant_to_start_when_its_wait_ends_and_each_refusal_draws_its_wait_once():
    draws = []

    class CountingRandom(random.Random):
        def uniform(self, a, b):
            draws.append((a, b))
            return super().uniform(a, b)

    send, calls = scripted({"a": [429, 200]})  # no Retry-After: the jittered backoff
    rec = recorder()
    f = Flow(send, rec, FlowConfig(policy=RetryPolicy("honor", backoff_base_s=0.05)), CountingRandom(1))
    assert f.request("a", [], 8, time.perf_counter_ns()).ok
    assert len(draws) == 1  # the cooldown and the retry's delay are the same draw
    assert calls[1][1] == f.cooldown_ns["a"]  # the retry is meant to start exactly when the cooldown ends


def test_a_capped_wait_is_counted():
    send, _ = scripted({"a": [(429, 10**6), 200]})
    rec = recorder()
    f = flow(send, rec, policy=RetryPolicy("honor", max_wait_s=0.05))
    assert f.request("a", [], 8, time.perf_counter_ns()).ok
    assert rec.counts[("retry_waits_capped", "a")] == 1 and rec.counts[("retry_wait_ms", "a")] <= 60


def test_a_systematic_failure_pauses_the_user_before_its_next_request(monkeypatch):
    import locust_llm.users.flow as flow_module

    monkeypatch.setattr(flow_module, "SYSTEMATIC_PAUSE_S", 0.1)
    refused = answer("a", 401)
    refused.cause = "http_401"
    f = flow(lambda *args: refused, recorder(), policy=RetryPolicy("honor"))
    started = time.perf_counter()
    f.request("a", [], 8, 0)
    assert time.perf_counter() - started >= 0.1


def test_honor_backs_off_after_server_side_failures_with_growing_jitter_and_a_success_resets_it():
    """After the k-th client request in a row that failed on the server's side, the next one is sent no earlier than
    the policy's draw ``uniform(0, min(backoff_max, backoff_base * 2 ** (k - 1)))`` after it ended, from the flow's
    own seeded stream (no other draw is made for a 500); that wait is part of the next client request's latency."""
    statuses = [500, 502, 500, 200, 500, 200]
    send, calls = scripted({"a": list(statuses)})
    rec = recorder()
    policy = RetryPolicy("honor", backoff_base_s=0.02, backoff_max_s=0.05)
    f = flow(send, rec, policy=policy)
    for _ in statuses:
        f.request("a", [], 8, time.perf_counter_ns())
    draws = random.Random(0)
    expected = [draws.uniform(0, min(0.05, 0.02 * 2**k)) for k in range(3)] + [0.0, draws.uniform(0, 0.02), 0.0]
    for i in range(1, len(statuses)):
        waited_s = (calls[i][2] - rec.results[i - 1].end_ns) / 1e9
        assert waited_s >= expected[i - 1], (i, waited_s, expected)
        if expected[i - 1]:
            assert rec.clients[i][1] >= expected[i - 1] * 1e9  # the pause is in the client-perceived latency
    assert rec.counts[("error_backoffs", "a")] == 4  # after 500, 502, 500 and the last 500, never after a 200
    assert rec.counts[("error_backoff_ms", "a")] <= 1000 * sum(expected)


def test_no_error_backoff_under_naive_or_none_or_in_open_loop():
    for policy, open_loop in ((RetryPolicy("naive"), False), (RetryPolicy("none"), False), (RetryPolicy(), True)):
        send, calls = scripted({"a": [500] * 3})
        rec = recorder()
        f = Flow(send, rec, FlowConfig(policy=policy), random.Random(0), error_backoff=not open_loop)
        for _ in range(3):
            f.request("a", [], 8, time.perf_counter_ns())
        assert rec.counts[("error_backoffs", "a")] == 0 and len(calls) == 3, policy


def test_a_hold_keeps_the_first_request_back_under_honor_only():
    send, calls = scripted({"a": [200]})
    f = flow(send, recorder())
    until = time.perf_counter_ns() + 50_000_000
    f.hold("a", until)
    f.request("a", [], 8, time.perf_counter_ns())
    assert calls[0][2] >= until
    send, calls = scripted({"a": [200]})
    f = flow(send, recorder(), policy=RetryPolicy("naive"))
    f.hold("a", time.perf_counter_ns() + 10_000_000_000)
    f.request("a", [], 8, time.perf_counter_ns())
    assert len(calls) == 1  # sent at once: naive keeps no hold
