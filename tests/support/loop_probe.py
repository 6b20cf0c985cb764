"""Run by tests/unit/users/test_task_loop.py in its own process (importing Locust monkey-patches the interpreter).

Runs users that mix in :class:`~locust_llm.users.base.LLMUserMixin` through Locust's own task loop (``User.run``,
``TaskSet.run`` and ``TaskSet.wait``), each for a bounded number of requests, and prints one JSON line with, for each
kind of user: how many requests it made, in how many calls of its task, how many times Locust's ``TaskSet.wait`` ran,
how many ``gevent.sleep`` calls of zero seconds and of the think time there were, how many think times were drawn,
between how many two requests another greenlet ran, and whether the user ended. The kinds: a request that waits on
the event loop, one that never yields, a graceful stop during the third request, a think time above zero, a class
with a task list of its own, and one with Locust's ``wait_time`` of its own.
"""

import json
import logging
import random
from types import SimpleNamespace

import gevent
from locust import User, constant
from locust.env import Environment
from locust.exception import StopUser
from locust.user.task import DefaultTaskSet, TaskSet
from locust.user.users import LOCUST_STATE_RUNNING

from locust_llm.users import base
from locust_llm.users.base import LLMUserMixin

REQUESTS = 50
THINK_S = 0.002
logging.disable(logging.CRITICAL)  # a failing probe shows in its counts, not in a log per task
counts = {}
others = [0]  # how many times another greenlet has run
real_sleep = gevent.sleep
real_wait = TaskSet.wait
real_execute = DefaultTaskSet.execute_task


def counted_sleep(seconds=0, ref=True):
    key = "zero_sleeps" if seconds == 0 else "think_sleeps" if seconds == THINK_S else "other_sleeps"
    counts[key] += 1
    real_sleep(seconds, ref)


def counted_wait(taskset):
    counts["locust_waits"] += 1
    real_wait(taskset)


def counted_task(taskset, task):
    counts["tasks"] += 1
    real_execute(taskset, task)


class Probe(LLMUserMixin, User):
    """Set up as ``setup_llm`` would, with a flow whose request is the class's ``work``."""

    abstract = True
    first_request_spread_s = 0.001  # on_start's sleep is not a zero one, so only the pauses' are counted

    def __init__(self, environment):
        super().__init__(environment)
        self.rng, self.open_loop, self.seen = random.Random(0), None, []
        self.llm = SimpleNamespace(fatal_message="", model="m", collector=SimpleNamespace(holds={}))
        self.workload = SimpleNamespace(messages=lambda rng: ([], 1), tool_call_share=None)
        self.flow = SimpleNamespace(request=self.request)

    def request(self, model, messages, max_tokens, intended_ns):
        self.seen.append(others[0])
        counts["requests"] += 1
        self.work()
        if counts["requests"] >= REQUESTS:
            raise StopUser()

    def work(self):
        gevent.get_hub().wait(gevent.get_hub().loop.timer(0.0005))  # the request waits for the loop, as one does


class Waits(Probe):
    pass


class NeverYields(Probe):
    def work(self):
        pass


class StopsItself(Probe):
    def work(self):
        if counts["requests"] == 3:
            self.stop(force=False)  # a graceful stop while a request runs: the user must end after it
        super().work()

    def think_time_s(self):
        counts["think_draws"] += 1  # none is drawn for a request that will not be sent
        return 0.0


class Thinks(Probe):
    def think_time_s(self):
        counts["think_draws"] += 1
        return THINK_S


class TwoTasks(Probe):
    tasks = [LLMUserMixin.chat_once, LLMUserMixin.chat_once]  # a list of its own: Locust chooses every time


class OwnWaitTime(Probe):
    wait_time = constant(0)


def run(cls):
    env = Environment(user_classes=[cls])
    user = cls(env)

    def other():
        while True:
            others[0] += 1
            real_sleep(0)

    bystander = gevent.spawn(other)
    counts.clear()
    counts.update(
        dict.fromkeys(
            ("requests", "tasks", "locust_waits", "zero_sleeps", "think_sleeps", "other_sleeps", "think_draws"), 0
        )
    )
    gevent.sleep, TaskSet.wait, DefaultTaskSet.execute_task = counted_sleep, counted_wait, counted_task
    try:
        greenlet = gevent.spawn(user.run)
        user._greenlet = greenlet
        greenlet.join(timeout=30)
    finally:
        gevent.sleep, TaskSet.wait, DefaultTaskSet.execute_task = real_sleep, real_wait, real_execute
        bystander.kill()
    between = sum(1 for before, after in zip(user.seen, user.seen[1:], strict=False) if after > before)
    got = {
        key: counts[key] for key in ("requests", "tasks", "locust_waits", "zero_sleeps", "think_sleeps", "think_draws")
    }
    return {**got, "others_ran_between": between, "ended": greenlet.dead}


print(
    json.dumps(
        {
            "running": base._RUNNING == LOCUST_STATE_RUNNING,
            **{cls.__name__: run(cls) for cls in (Waits, NeverYields, StopsItself, Thinks, TwoTasks, OwnWaitTime)},
        }
    )
)
