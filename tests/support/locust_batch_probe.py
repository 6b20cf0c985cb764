"""Run by tests/unit/test_locust_batch.py in its own process (importing Locust monkey-patches the interpreter).

Prints one JSON line: for seeded random requests of ITL gaps, whether :func:`log_gaps` left Locust's stats entries
equal, field for field, to one ``request`` event per gap; the same with one gap left out (the check can fail); the
same for :func:`log_one` against single events, some failed (the error table too), and with the errors left out; and
whether batching is allowed with the runner alone, with a plugin listener, and with no runner.
"""

import json
import random
import sys

import locust.stats
from locust import User
from locust.env import Environment
from locust.event import Events

from locust_llm.locust_batch import log_gaps, log_one, sole_runner_listener

FIELDS = ("num_requests", "num_none_requests", "num_failures", "total_response_time", "min_response_time",
          "max_response_time", "response_times", "total_content_length")  # fmt: skip


class Idle(User):
    pass


def runner_env():
    env = Environment(user_classes=[Idle], events=Events())
    env.create_local_runner()
    return env


def entries(stats):
    out = {}
    for key, entry in [("total", stats.total), *stats.entries.items()]:
        fields = {f: getattr(entry, f) for f in FIELDS}
        fields["response_times"] = sorted(fields["response_times"].items())
        fields["requests_per_second_total"] = sum(entry.num_reqs_per_sec.values())
        out[str(key)] = fields
    return out


def compare(seed, drop_one):
    rng = random.Random(seed)
    fired, batched = runner_env(), runner_env()
    for _ in range(rng.randint(1, 5)):
        gaps = [rng.choice([rng.uniform(0.001, 5), rng.uniform(5, 500), rng.uniform(500, 120_000)])
                for _ in range(rng.randint(0, 80))]  # fmt: skip
        for gap in gaps:
            fired.events.request.fire(request_type="ITL", name="m", response_time=gap, response_length=0,
                                      exception=None, context={})  # fmt: skip
        log_gaps(batched.runner.stats, "ITL", "m", gaps[1:] if drop_one and gaps else gaps)
    return entries(batched.runner.stats) == entries(fired.runner.stats)


def compare_one(seed, drop_error):
    """Random single events (some failed) fired, against :func:`log_one`: the entries and the error table."""
    rng = random.Random(seed)
    fired, direct = runner_env(), runner_env()
    for _ in range(rng.randint(1, 20)):
        method, ms, length = rng.choice(["TTFT", "E2E"]), rng.uniform(0.01, 90_000), rng.randint(0, 5000)
        error = RuntimeError(rng.choice(["HTTP 429: slow down", "timeout"])) if rng.random() < 0.3 else None
        fired.events.request.fire(request_type=method, name="m", response_time=ms, response_length=length,
                                  exception=error, context={})  # fmt: skip
        log_one(direct.runner.stats, method, "m", ms, length, None if drop_error else error)
    errors = [sorted((k, e.occurrences) for k, e in env.runner.stats.errors.items()) for env in (fired, direct)]
    return entries(direct.runner.stats) == entries(fired.runner.stats) and errors[0] == errors[1]


def recorder_runs():
    """The same two results recorded by a :class:`Recorder` with the runner alone and with a plugin listening:
    whether the runner's stats are equal, and the (method, count) of the events the plugin received."""
    from locust_llm.collect.collector import Collector
    from locust_llm.metrics import Outcome, RequestResult
    from locust_llm.recorder import Recorder

    results = []
    for outcome in (Outcome.OK, Outcome.TIMEOUT):
        result = RequestResult(model="m", intended_ns=0, sent_ns=1_000, end_ns=900_000_000)
        result.token_ns = [200_000_000 + i * 20_123_457 for i in range(30)]
        if outcome is not Outcome.OK:
            result.fail(outcome, "timeout: no byte for 30 s")
        results.append(result)
    stats, seen = [], []
    for plugin in (False, True):
        env = runner_env()
        if plugin:
            env.events.request.add_listener(lambda request_type, **_kw: seen.append(request_type))
        recorder = Recorder(env.events, Collector(env, "local"), print, lambda env=env: env.runner.stats)
        for result in results:
            recorder.record(result)
        errors = sorted((k, e.occurrences) for k, e in env.runner.stats.errors.items())
        stats.append((entries(env.runner.stats), errors))
    return stats[0] == stats[1], sorted((m, seen.count(m)) for m in set(seen))


def main():
    seeds = range(int(sys.argv[1]))
    equal = all(compare(s, False) for s in seeds)
    original = locust.stats.bucket_response_time
    locust.stats.bucket_response_time = lambda t: int(t * 7) // 3  # a run may replace Locust's rounding
    equal_replaced = all(compare(s, False) for s in seeds)
    locust.stats.bucket_response_time = original
    env = runner_env()
    alone = sole_runner_listener(env.events)
    env.events.request.add_listener(lambda **_kw: None)
    print(json.dumps({
        "equal": equal,
        "equal_with_rounding_replaced": equal_replaced,
        "equal_with_a_gap_dropped": all(compare(s, True) for s in seeds),
        "one_equal": all(compare_one(s, False) for s in seeds),
        "one_equal_with_errors_dropped": all(compare_one(s, True) for s in seeds),
        "recorder": recorder_runs(),
        "runner_alone": alone,
        "with_a_plugin": sole_runner_listener(env.events),
        "no_runner": sole_runner_listener(Events()),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
