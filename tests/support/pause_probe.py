"""Run by tests/unit/users/test_pause.py in its own process (importing Locust monkey-patches the interpreter).

Runs users that mix in :class:`~locust_llm.users.base.LLMUserMixin` through Locust's own task loop (``User.run``,
``TaskSet.run`` and ``TaskSet.wait``), each for a bounded number of tasks, and prints one JSON line: for a task that
waits on the event loop and for one that never yields, how many tasks ran, how many of Locust's pauses between them
slept (``gevent.sleep(0)``), and between how many two tasks another greenlet ran; and whether a graceful stop (``stop()``
while a task runs) still ends the user at its next pause.
"""

import json
import logging
import random
from types import SimpleNamespace

import gevent
from locust import User
from locust.env import Environment
from locust.exception import StopUser

from locust_llm.users.base import LLMUserMixin

TASKS = 50
logging.disable(logging.CRITICAL)  # a failing probe shows in its counts, not in a log per task
slept = []  # the seconds of every gevent.sleep called from a pause
others = [0]  # how many times another greenlet has run
real_sleep = gevent.sleep


def counted_sleep(seconds=0, ref=True):
    slept.append(seconds)
    real_sleep(seconds, ref)


class Probe(LLMUserMixin, User):
    """Set up as ``setup_llm`` would, with a flow whose request is the class's ``work``."""

    abstract = True
    first_request_spread_s = 0.001  # on_start's sleep is not a zero one, so only the pauses' are counted

    def __init__(self, environment):
        super().__init__(environment)
        self.rng, self.open_loop, self._paused_at, self.done, self.seen = random.Random(0), None, -1, 0, []
        self.llm = SimpleNamespace(fatal_message="", model="m")
        self.workload = SimpleNamespace(messages=lambda rng: ([], 1))
        self.flow = SimpleNamespace(request=self.request)

    def request(self, model, messages, max_tokens, intended_ns):
        self.seen.append(others[0])
        self.work()
        self.done += 1
        if self.done >= TASKS:
            raise StopUser()


class Waits(Probe):
    def work(self):
        gevent.get_hub().wait(gevent.get_hub().loop.timer(0.0005))  # the task waits for the loop, as a request does


class NeverYields(Probe):
    def work(self):
        pass


class StopsItself(Probe):
    def work(self):
        if self.done == 2:
            self.stop(force=False)  # a graceful stop while the task runs: the next pause must end the user
        gevent.get_hub().wait(gevent.get_hub().loop.timer(0.0005))


def run(cls):
    env = Environment(user_classes=[cls])
    user = cls(env)

    def other():
        while True:
            others[0] += 1
            real_sleep(0)

    bystander = gevent.spawn(other)
    del slept[:]
    gevent.sleep = counted_sleep
    try:
        greenlet = gevent.spawn(user.run)
        user._greenlet = greenlet
        greenlet.join(timeout=30)
    finally:
        gevent.sleep = real_sleep
        bystander.kill()
    between = sum(1 for before, after in zip(user.seen, user.seen[1:], strict=False) if after > before)
    return {
        "tasks": user.done,
        "pauses_slept": sum(1 for s in slept if s == 0),
        "others_ran_between": between,
        "ended": greenlet.dead,
    }


print(json.dumps({cls.__name__: run(cls) for cls in (Waits, NeverYields, StopsItself)}))
