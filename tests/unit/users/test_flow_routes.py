"""The flow across routes (--routes): a weighted primary, fallback on a failed connection, a route's own cool-down
(a route that is down is not hammered), the policy's hedge target, and which attempts are another route's extra."""

import random
from collections import Counter

from locust_llm.protocol.metrics import Outcome, RequestResult
from locust_llm.protocol.retry import RetryPolicy
from locust_llm.users.flow import Flow, FlowConfig
from tests.unit.users.test_flow import Recorder


class Clock:
    """A fake clock each attempt advances by its length: the flow's cool-downs are judged on it, never slept."""

    def __init__(self):
        self.now = 1_000_000_000

    def __call__(self):
        return self.now


def sender(clock, outcomes, length_ns=10_000_000):
    """Answers each route with its outcome (OK streams one token), each attempt taking ``length_ns``."""
    calls = []

    def send(model, messages, max_tokens, intended_ns, on_first_token):
        start = clock.now
        clock.now += length_ns
        calls.append((model, start))
        outcome = outcomes[model]
        result = RequestResult(model, intended_ns, start, clock.now, outcome=outcome)
        if outcome is Outcome.OK:
            result.http_status, result.token_ns = 200, [start + 1000]
        else:
            result.cause = "refused" if outcome is Outcome.CONNECTION else ""
            result.http_status = 500 if outcome is Outcome.HTTP_5XX else 0
        return result

    return send, calls


def routes_flow(send, rec, clock, **kw):
    config = FlowConfig(policy=kw.pop("policy", RetryPolicy("honor")), **kw)
    return Flow(send, rec, config, random.Random(7), clock=clock)


def test_the_primary_is_drawn_by_weight_per_client_request():
    clock = Clock()
    send, calls = sender(clock, {"a": Outcome.OK, "b": Outcome.OK})
    f = routes_flow(send, Recorder(), clock, primaries=(("a", 3.0), ("b", 1.0)))
    for _ in range(4000):
        f.request("ignored", [], 8, clock.now)
    share = Counter(model for model, _ in calls)["a"] / 4000
    assert abs(share - 0.75) < 0.03  # 3 sigma of a binomial share at n=4000 is 0.02


def test_a_route_that_refuses_connections_is_fallen_back_from_and_never_tried_while_it_cools_down():
    clock = Clock()
    send, calls = sender(clock, {"down": Outcome.CONNECTION, "up": Outcome.OK})
    rec = Recorder()
    f = routes_flow(
        send, rec, clock, primaries=(("down", 1.0),), fallbacks=("up",), fallback_causes=frozenset({"connect_error"})
    )
    tried = []
    for _ in range(300):  # 3 s of client requests on the fake clock
        cooling_until = f.cooldown_ns.get("down", 0)
        before = len(calls)
        result = f.request("down", [], 8, clock.now)
        assert result.ok and result.model == "up"  # every client request was served by the fallback
        if calls[before][0] == "down":
            tried.append(calls[before][1])
            assert calls[before][1] >= cooling_until  # never while it cools down
    assert len(tried) == rec.counts[("route_cooldowns", "down")]  # each failure cooled it down again
    assert 1 <= len(tried) < 30  # not hammered: one attempt per client request would be 300
    assert all(r.secondary for r in rec.results if r.model == "up")  # the fallback's attempts are the chain's extra
    assert not any(r.secondary for r in rec.results if r.model == "down")


def test_without_the_cause_in_fallback_on_a_failed_connection_is_the_client_requests_answer():
    clock = Clock()
    send, _ = sender(clock, {"down": Outcome.CONNECTION, "up": Outcome.OK})
    f = routes_flow(send, Recorder(), clock, primaries=(("down", 1.0),), fallbacks=("up",), policy=RetryPolicy("none"))
    assert f.request("down", [], 8, clock.now).outcome is Outcome.CONNECTION


def test_a_route_that_answers_again_is_reset():
    clock = Clock()
    outcomes = {"a": Outcome.HTTP_5XX, "b": Outcome.OK}
    send, _ = sender(clock, outcomes)
    f = routes_flow(send, Recorder(), clock, primaries=(("a", 1.0),), fallbacks=("b",), fallback_on=frozenset({500}))
    assert f.request("a", [], 8, clock.now).model == "b"
    assert f.route_failures["a"] == 1 and f.cooldown_ns["a"] > clock.now - 20_000_000
    outcomes["a"] = Outcome.OK
    clock.now += 60_000_000_000  # past any backoff (--max-retry-wait caps it at 60 s)
    assert f.request("a", [], 8, clock.now).model == "a"
    assert f.route_failures["a"] == 0


def test_the_hedge_goes_to_the_policys_route_unless_it_cools_down():
    f = routes_flow(lambda *a: None, Recorder(), Clock(), primaries=(("a", 1.0),), hedge_to="c")
    assert f._hedge_target("a", "b", 0) == "c"
    assert f._hedge_target("c", "b", 0) == "b"  # never to itself
    f.cooldown_ns["c"] = 10
    assert f._hedge_target("a", "b", 5) == "b"
