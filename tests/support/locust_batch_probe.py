"""Run by tests/unit/test_locust_batch.py in its own process (importing Locust monkey-patches the interpreter).

Prints one JSON line: for seeded random requests of ITL gaps, whether :func:`log_gaps` left Locust's stats entries
equal, field for field, to one ``request`` event per gap; the same with one gap left out (the check can fail); and
whether batching is allowed with the runner alone, with a plugin listener, and with no runner.
"""

import json
import random
import sys

import locust.stats
from locust import User
from locust.env import Environment
from locust.event import Events

from locust_llm.locust_batch import log_gaps, sole_runner_listener

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
        "runner_alone": alone,
        "with_a_plugin": sole_runner_listener(env.events),
        "no_runner": sole_runner_listener(Events()),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
