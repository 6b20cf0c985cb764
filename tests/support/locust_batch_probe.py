"""Run by tests/unit/runtime/test_locust_stats.py in its own process (importing Locust monkey-patches the interpreter).

Prints one JSON line: for seeded random requests of ITL gaps, whether :func:`log_gaps` left Locust's stats entries
equal, field for field, to one ``request`` event per gap; the same with one gap left out (the check can fail); the
same for :func:`log_one` against single events, some failed (the error table too), and with the errors left out; and
whether batching is allowed with the runner alone, with a plugin listener, and with no runner.
"""

import itertools
import json
import random
import sys

import locust.stats
import numpy as np
from locust import User
from locust.env import Environment
from locust.event import Events

from locust_llm.runtime.locust_stats import gaps_ms, log_gaps, log_one, log_rows, sole_runner_listener

FIELDS = (
    "num_requests",
    "num_none_requests",
    "num_failures",
    "total_response_time",
    "min_response_time",
    "max_response_time",
    "response_times",
    "total_content_length",
)


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
        gaps = [
            rng.choice([rng.uniform(0.001, 5), rng.uniform(5, 500), rng.uniform(500, 120_000)])
            for _ in range(rng.randint(0, 80))
        ]
        for gap in gaps:
            fired.events.request.fire(
                request_type="ITL", name="m", response_time=gap, response_length=0, exception=None, context={}
            )
        log_gaps(batched.runner.stats, "ITL", "m", gaps[1:] if drop_one and gaps else gaps)
    return entries(batched.runner.stats) == entries(fired.runner.stats)


def compare_one(seed, drop_error):
    """Random single events (some failed) fired, against :func:`log_one`: the entries and the error table."""
    rng = random.Random(seed)
    fired, direct = runner_env(), runner_env()
    for _ in range(rng.randint(1, 20)):
        method, ms, length = rng.choice(["TTFT", "E2E"]), rng.uniform(0.01, 90_000), rng.randint(0, 5000)
        error = RuntimeError(rng.choice(["HTTP 429: slow down", "timeout"])) if rng.random() < 0.3 else None
        fired.events.request.fire(
            request_type=method, name="m", response_time=ms, response_length=length, exception=error, context={}
        )
        log_one(direct.runner.stats, method, "m", ms, length, None if drop_error else error)
    errors = [sorted((k, e.occurrences) for k, e in env.runner.stats.errors.items()) for env in (fired, direct)]
    return entries(direct.runner.stats) == entries(fired.runner.stats) and errors[0] == errors[1]


def recorder_runs():
    """The same two results recorded by a :class:`Recorder` with the runner alone and with a plugin listening:
    whether the runner's stats are equal, and the (method, count) of the events the plugin received."""
    from locust_llm.protocol.metrics import Outcome, RequestResult
    from locust_llm.runtime.collector import Collector
    from locust_llm.runtime.recorder import Recorder

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


def full_entries(stats):
    """:func:`entries` and what the time of each log decides: the per-second counts, the last request's time and the
    per-second cache of response times."""
    out = entries(stats)
    for key, entry in [("total", stats.total), *stats.entries.items()]:
        out[str(key)].update(
            per_second=sorted(entry.num_reqs_per_sec.items()),
            last=entry.last_request_timestamp,
            cache=[
                (t, sorted(c.response_times.items()), c.num_requests) for t, c in entry.response_times_cache.items()
            ],
        )
    return out


def deferred_runs():
    """Seeded results (a few failed) recorded by a :class:`Recorder` with the runner alone, whose Locust rows wait,
    against the same recorded with a plugin listening (every event fired at once), the wall clock scripted to step
    0.13 s per result: whether every field, per-second count, last time and cached second is equal after
    ``test_stop``; how many E2E rows were logged before it (fewer than the results: they waited); the rows after a
    ``report_to_master``, after a ``reset_stats`` (dropped, as the reset would have dropped them), and of a result
    recorded after that, 0.05 s later (it waits) and once the hub ran past its timer's due time (it was logged)."""
    import time

    import gevent

    import locust_llm.runtime.recorder as recorder_module
    from locust_llm.protocol.metrics import Outcome, RequestResult
    from locust_llm.runtime.collector import Collector
    from locust_llm.runtime.recorder import DEFER_S, Recorder

    rng = random.Random(7)
    results = []
    for i in range(80):
        result = RequestResult(model=rng.choice(["m", "n"]), intended_ns=0, sent_ns=1_000, end_ns=900_000_000)
        result.token_ns = [200_000_000 + k * rng.randint(1_000_000, 90_000_000) for k in range(rng.randint(1, 40))]
        if i % 23 == 5:
            result.fail(Outcome.TIMEOUT, "timeout: no byte for 30 s")
        results.append(result)
    real_time = time.time
    clock = [1_000_000.2]
    time.time = lambda: clock[0]
    try:
        stats, logged = [], 0
        for plugin in (False, True):
            clock[0] = 1_000_000.2  # the entries' first cached second is when they were made
            env = runner_env()
            if plugin:
                env.events.request.add_listener(lambda **_kw: None)
            recorder = Recorder(env.events, Collector(env, "local"), print, lambda env=env: env.runner.stats)
            for result in results:
                clock[0] += 0.13
                recorder.record(result)
            if not plugin:
                logged = sum(e.num_requests for (_, method), e in env.runner.stats.entries.items() if method == "E2E")
            env.events.test_stop.fire(environment=env)
            stats.append(full_entries(env.runner.stats))
    finally:
        time.time = real_time
    env = runner_env()
    recorder = Recorder(env.events, Collector(env, "local"), print, lambda env=env: env.runner.stats)

    def e2e_rows():
        return sum(e.num_requests for (_, method), e in env.runner.stats.entries.items() if method == "E2E")

    recorder.record(results[0])
    before = e2e_rows()
    env.events.report_to_master.fire(client_id="w", data={})
    reported = e2e_rows()
    recorder.record(results[1])
    env.runner.stats.reset_all()
    env.events.reset_stats.fire()
    env.events.test_stop.fire(environment=env)
    after_reset = e2e_rows()
    recorder_module.DEFER_S = 2.0  # long enough that no stall of the machine fires it before the check below
    recorder.record(results[2])  # its timer is new: the last one was stopped by the reset
    gevent.sleep(0.05)
    waiting = e2e_rows()
    gevent.sleep(2.0)  # the hub's timer fires first: it was due earlier
    timed = e2e_rows()
    recorder_module.DEFER_S = DEFER_S
    return {
        "equal": stats[0] == stats[1],
        "logged_before_stop": logged,
        "results": len(results),
        "rows": [before, reported, after_reset, waiting, timed],
    }


def deferred_bounds():
    """How many successful requests wait before their rows are logged together: 128 of few tokens each, fewer once
    they hold 8,192 tokens (28 of 300 tokens each, one of 8,192); what waits at the end is logged at test_stop."""
    from locust_llm.protocol.metrics import RequestResult
    from locust_llm.runtime.collector import Collector
    from locust_llm.runtime.recorder import DEFER_LIMIT, DEFER_TOKENS, Recorder

    out = {"limits": [DEFER_LIMIT, DEFER_TOKENS]}
    for tokens in (2, 300, 8192):
        env = runner_env()
        recorder = Recorder(env.events, Collector(env, "local"), print, lambda env=env: env.runner.stats)
        sizes: list[int] = []

        def counted(recorder=recorder, real=recorder.flush, sizes=sizes):
            sizes.append(len(recorder._deferred))
            real()

        recorder.flush = counted
        for _ in range(300):
            result = RequestResult(model="m", intended_ns=0, sent_ns=1_000, end_ns=900_000_000)
            result.token_ns = [200_000_000 + k * 1_000_000 for k in range(tokens)]
            recorder.record(result)
        env.events.test_stop.fire(environment=env)
        e2e = sum(e.num_requests for (_, method), e in env.runner.stats.entries.items() if method == "E2E")
        out[str(tokens)] = [sorted(set(sizes[:-1])), sizes[-1], e2e]  # the batches; the last, at test_stop; rows
    return out


def compare_rows(seed, mutate):
    """Random rows (none to ninety events each, some with a content length; methods and names mixed; for odd seeds
    all under 100 ms, hundreds in a second, some half-way between two integers; dated in runs of one second that
    straddle batches, and across gaps of seconds) logged by :func:`log_rows` in batches of random
    sizes, against every event fired at its own scripted time: every field, the per-second counts, the last
    request's time and the per-second cache. ``mutate``: one event's content length is off by one (the check can
    fail)."""
    import time

    rng = random.Random(seed)
    rows, at = [], 1_000_000.0
    for _ in range(rng.randint(1, 120)):
        at += rng.choice([0.0, 0.01, 0.3, 0.9, 2.5])
        if seed % 2:  # gaps between tokens: all under 100 ms (some exactly half-way between two integers), many
            values = [rng.choice([rng.uniform(-3, 99.9), rng.randint(-3, 98) + 0.5]) for _ in range(rng.randint(0, 90))]
        else:
            values = [
                rng.choice([rng.uniform(-3, 5), rng.uniform(5, 500), rng.uniform(500, 90_000)])
                for _ in range(rng.choice([0, 1, 1, 3, 40]))
            ]
        rows.append((at, rng.choice(["TTFT", "ITL", "E2E"]), rng.choice(["m", "n"]), values, rng.choice([0, 7, 300])))
    real_time, clock = time.time, [rows[0][0] - 0.5]
    time.time = lambda: clock[0]
    try:
        fired, batched = runner_env(), runner_env()  # entries made at one time: the same first cached second
        for env in (fired, batched):
            for name in ("m", "n"):
                for method in ("TTFT", "ITL", "E2E"):
                    env.runner.stats.get(name, method)
        for at, method, name, values, length in rows:
            clock[0] = at
            for value in values:
                fired.events.request.fire(
                    request_type=method,
                    name=name,
                    response_time=value,
                    response_length=length,
                    exception=None,
                    context={},
                )
        if mutate:
            at, method, name, values, length = next(row for row in rows if row[3])
            rows[rows.index((at, method, name, values, length))] = (at, method, name, values, length + 1)
        # the recorder gives its ITL gaps as float64 arrays: every other row's times given so
        rows = [
            (a, m, nm, np.asarray(v, dtype=np.float64) if k % 2 else v, ln) for k, (a, m, nm, v, ln) in enumerate(rows)
        ]
        i = 0
        while i < len(rows):
            size = rng.randint(1, 40)
            log_rows(batched.runner.stats, rows[i : i + size])
            i += size
    finally:
        time.time = real_time
    return full_entries(batched.runner.stats) == full_entries(fired.runner.stats)


def gaps_exact(seed):
    """:func:`gaps_ms` of seeded runs (none, one or many times, gaps negative, zero, of ns or of hours), against
    ``(b - a) / 1e6`` per gap: whether every gap is the same double, in the same run; and whether a run with a time
    beyond int64 gives them all as lists of the same doubles."""
    rng = random.Random(seed)
    runs = []
    for _ in range(rng.randint(1, 60)):
        t = rng.randint(0, 2**62)
        run = []
        for _ in range(rng.choice([0, 1, 2, 64, 300])):
            t += rng.choice([rng.randint(-5_000, 5_000), rng.randint(1, 90_000_000), rng.randint(0, 10**13)])
            run.append(t)
        runs.append(run)
    wide = [*runs, [2**64, 2**64 + 1_234_567]]

    def expected(run):
        return [(b - a) / 1e6 for a, b in itertools.pairwise(run)]

    def same(got, runs):
        pairs = zip(got, runs, strict=True)
        return len(got) == len(runs) and all([float(x) for x in g] == expected(r) for g, r in pairs)

    narrow, wide_got = gaps_ms(runs), gaps_ms(wide)
    floats = [[b / 1e6 - a / 1e6 for a, b in itertools.pairwise(r)] for r in runs]  # another rounding
    return {
        "equal": same(narrow, runs),
        "equal_to_differences_of_ms": all([float(x) for x in g] == f for g, f in zip(narrow, floats, strict=True)),
        "arrays": all(type(g) is np.ndarray for g in narrow),
        "wide_equal_as_lists": same(wide_got, wide) and all(type(g) is list for g in wide_got),
    }


def rows_dated_back():
    """:func:`log_rows` of a row dated before the entry's last request (a wall clock stepped back): the last request's
    time, whether a second was cached for it, and where it was counted."""
    env = runner_env()
    stats = env.runner.stats
    entry = stats.get("m", "E2E")
    log_rows(stats, [(2_000_010.5, "E2E", "m", [100.0], 0)])
    cached = sorted(entry.response_times_cache or {})
    log_rows(
        stats,
        [
            (2_000_010.9, "E2E", "m", [70.0], 0),
            (2_000_010.6, "E2E", "m", [65.0], 0),
            (2_000_008.7, "E2E", "m", [50.0, 60.0], 0),
        ],
    )
    return {
        "last": entry.last_request_timestamp,
        "cached_again": sorted(entry.response_times_cache or {}) != cached,
        "per_second": sorted(entry.num_reqs_per_sec.items()),
        "requests": entry.num_requests,
    }


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
    print(
        json.dumps(
            {
                "equal": equal,
                "equal_with_rounding_replaced": equal_replaced,
                "equal_with_a_gap_dropped": all(compare(s, True) for s in seeds),
                "one_equal": all(compare_one(s, False) for s in seeds),
                "rows_equal": all(compare_rows(s, False) for s in seeds),
                "rows_equal_with_a_length_off": any(compare_rows(s, True) for s in seeds),
                "rows_dated_back": rows_dated_back(),
                "one_equal_with_errors_dropped": all(compare_one(s, True) for s in seeds),
                "recorder": recorder_runs(),
                "deferred": deferred_runs(),
                "deferred_bounds": deferred_bounds(),
                "gaps": {
                    key: all(gaps_exact(s)[key] for s in seeds)
                    for key in ("equal", "equal_to_differences_of_ms", "arrays", "wide_equal_as_lists")
                },
                "runner_alone": alone,
                "with_a_plugin": sole_runner_listener(env.events),
                "no_runner": sole_runner_listener(Events()),
            }
        )
    )


if __name__ == "__main__":
    main()
