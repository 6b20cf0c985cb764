"""The intended start of each request: when the user was ready, not when the (possibly busy) generator sent it."""

import time
from types import SimpleNamespace

import gevent

from locust_llm.users.base import LLMUserMixin
from locust_llm.workload.prompts import Workload

MS = 1_000_000


class FakeFlow:
    def __init__(self):
        self.intended = []

    def request(self, model, messages, max_tokens, intended_ns):
        self.intended.append(intended_ns)


def user(think_s=0.0):
    class User(LLMUserMixin):
        def think_time_s(self):
            return think_s

    u = User()
    u.llm = SimpleNamespace(model="m", fatal_message="")
    u.workload, u.flow, u._intended_ns = Workload(), FakeFlow(), 0
    import random

    u.rng = random.Random(0)
    return u


def test_a_request_sent_late_keeps_the_moment_the_user_was_ready():
    u = user()
    u.wait_time()  # the request ends: the user is ready for the next one now
    ready = time.perf_counter_ns()
    gevent.sleep(0.05)  # ... but the generator gets to it 50 ms later
    u.chat_once()
    (intended,) = u.flow.intended
    assert intended <= ready and time.perf_counter_ns() - intended >= 50 * MS


def test_think_time_moves_the_intended_start_later():
    u = user(think_s=0.2)
    before = time.perf_counter_ns()
    assert u.wait_time() == 0.2
    u.chat_once()
    assert u.flow.intended[0] >= before + 200 * MS


def test_the_first_request_is_meant_for_the_end_of_its_random_spread():
    u = user()
    u.first_request_spread_s = 0.05
    before = time.perf_counter_ns()
    u.on_start()
    u.chat_once()
    assert before <= u.flow.intended[0] <= time.perf_counter_ns()
    assert u.flow.intended[0] <= before + 50 * MS + 5 * MS
