"""Replaying a trace against simulators whose truth is known: speeds agree with --rates, shared hash_ids hit the
prefix cache as the file says they should, bursts cost tail latency at the same mean rate, and workers split it.

The pacing simulator used here (6 slots, TTFT 50 ms, then 15 gaps of 10 ms: a 200 ms service) serves 30 req/s.
The constant trace runs 5 req/s (a request every 200 ms), so speeds 1, 2 and 4 are kept up with and 8 (40 req/s)
is not.
"""

import json
import math
import random
import urllib.request
from functools import partial

import pytest

from tests.support.procs import PREFLIGHT_REQUESTS, at_once, free_port, read_csv, run_locust, sim

pytestmark = pytest.mark.slow  # end-to-end runs: deselected by -m 'not slow'

PACING = "--capacity 6 --ttft-ms 50 --itl-ms 10"
SERVICE_S, SLOTS, TTFT_S = 0.2, 6, 0.05
STEP = ("--step-duration", "5s", "--warmup", "1s", "--max-tokens", "16")
SPEEDS = "1,2,4,8"
BLOCK = 64  # tokens per hash block: small prompts for the default simulator's small KV cache


def write(path, entries):
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return str(path)


def constant(path, n=25, gap_ms=200, start_ms=0):
    entries = [{"timestamp": start_ms + i * gap_ms, "input_length": 64, "output_length": 16} for i in range(n)]
    return write(path, entries)


def bursty_times(n=25, period_s=5.0, cv=3.0, seed=4):
    """``n`` arrival times of gaps drawn with coefficient of variation ``cv``, scaled so that the trace repeats
    every ``period_s`` (its last time plus one mean gap, as the constant trace's 4.8 + 0.2 s): the same mean rate."""
    rng = random.Random(seed)
    shape = 1 / cv**2
    times, t = [], 0.0
    for _ in range(n):
        times.append(t)
        t += rng.gammavariate(shape, 1 / shape)
    scale = period_s * (n - 1) / n / times[-1]
    return [x * scale for x in times]


def steady_waits(times, speed, warmup_s=1.0, step_s=5.0):
    """The truth of the pacing simulator for the replay at ``speed`` (FIFO over its slots, each request held one
    service): the waits of the arrivals in the steady window, sorted."""
    period = (times[-1] + times[-1] / (len(times) - 1)) / speed
    arrivals = [t / speed + k * period for k in range(math.ceil(step_s / period) + 1) for t in times]
    free, waits = [0.0] * SLOTS, []
    for at in sorted(a for a in arrivals if a < step_s):
        slot = min(range(SLOTS), key=free.__getitem__)
        start = max(at, free[slot])
        if at >= warmup_s:
            waits.append(start - at)
        free[slot] = start + SERVICE_S
    return sorted(waits)


HASHED, HASHED_SPEEDS = 16, (1, 2, 4)


def hashed(path, shared, n=HASHED):
    """``n`` requests 100 ms apart of 3 blocks and a tail (224 tokens): with ``shared``, the first two blocks are
    one of two prefixes, so every request of a pass after its first two finds 128 of its 224 tokens cached; else
    every request has blocks of its own. 16 requests repeat every 1.6 s: a 5 s step wraps at every speed."""
    entries = []
    for i in range(n):
        ids = [2 * (i % 2), 2 * (i % 2) + 1, 1000 + i] if shared else [1000 + 3 * i, 1001 + 3 * i, 1002 + 3 * i]
        entries.append({"timestamp": 100 * i, "input_length": 224, "output_length": 16, "hash_ids": ids})
    return write(path, entries)


HASHED_SERVICE_S = 0.19
"""A hashed request's life on the default simulator at these light loads: 16 tokens (each asks for exactly its
``output_length``) at its decode step of 12 ms for batches up to 8, the first one after a prefill of under 1 ms."""


def hit_share_truth(shared, fresh, n=HASHED, gap_s=0.1, speeds=HASHED_SPEEDS, step_s=5.0, warmup_s=1.0):
    """Per speed, the prompt share a prefix cache serves in the steady window: a request finds the longest prefix of
    block messages an earlier request sent (within its pass when each pass is ``fresh``, else ever): 2 blocks (128
    of 224 tokens) for ``shared`` ids, all 3 (192) for a repeated entry. A request is in the window it ends in, as
    the run files it: its arrival plus :data:`HASHED_SERVICE_S`."""
    seen, shares = set(), []
    for step, speed in enumerate(speeds):
        cached = sent = 0
        for wrap in range(math.ceil(step_s * speed / (n * gap_s))):
            for i in range(n):
                t = (i + wrap * n) * gap_s / speed
                if t >= step_s:
                    break
                salt = (step, wrap) if fresh else ()
                key = (salt, i % 2) if shared else (salt, i)
                hit = key in seen
                seen.add(key)
                if warmup_s <= t + HASHED_SERVICE_S < step_s:
                    cached, sent = cached + (hit and (128 if shared else 192)), sent + 224
        shares.append(cached / sent)
    return shares


def replay(out, trace, speeds, *extra, sim_args=PACING):
    proc = run_locust(
        "--headless", "--trace", trace, "--trace-speeds", speeds, *STEP, "--sim-args", sim_args, "--csv",
        str(out / "run"), *extra, cwd=out,
    )  # fmt: skip
    return proc, out


def rates(out):
    proc = run_locust(
        "--headless", "--rates", "5,10,20,40", "--arrivals", "constant", *STEP, "--sim-args", PACING, "--csv",
        str(out / "run"), cwd=out,
    )  # fmt: skip
    return proc, out


def workers(out):
    """A master and 2 forked workers replaying the constant trace at speeds 1 and 2 against a roomy simulator, on the
    library path (``--fast-path off``)."""
    trace = constant(out / "trace.jsonl", start_ms=100)  # no request due at a step's boundary
    port = str(free_port())
    with sim("--capacity", "64", "--ttft-ms", "50", "--itl-ms", "10") as base:
        proc = run_locust(
            "--headless", "--processes", "2", "--master-bind-port", port, "--master-port", port, "--host", base,
            "--model", "sim-llm", "--fast-path", "off", "--trace", trace, "--trace-speeds", "1,2", "--step-duration",
            "4s", "--warmup", "1s", "--csv", str(out / "run"), "--stop-timeout", "10", cwd=out,
        )  # fmt: skip
        with urllib.request.urlopen(base.rsplit("/v1", 1)[0] + "/sim/stats", timeout=10) as resp:
            served = json.load(resp)["models"]["sim-llm"]
    return proc, out, served


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every run at once, each against its own simulator (light loads: 40 req/s at most)."""

    def traced(name, make, speeds, *extra, **kw):
        out = tmp_path_factory.mktemp(name)
        return partial(replay, out, make(out / "trace.jsonl"), speeds, *extra, **kw)

    bursty = [{"timestamp": round(t * 1000, 3), "input_length": 64, "output_length": 16} for t in bursty_times()]
    block = ("--trace-block-tokens", str(BLOCK))
    return at_once(
        {
            "constant": traced("constant", constant, SPEEDS),
            "rates": partial(rates, tmp_path_factory.mktemp("rates")),
            "bursty": traced("bursty", lambda p: write(p, bursty), "4"),
            **{  # fresh prefixes in each pass (the default), and the warm case
                name: traced(
                    name, partial(hashed, shared=shared), ",".join(map(str, HASHED_SPEEDS)), *block, *extra, sim_args=""
                )
                for name, shared, extra in (
                    ("shared", True, ()),
                    ("unique", False, ()),
                    ("unique-warm", False, ("--trace-cache-across-steps",)),
                )
            },
            "workers": partial(workers, tmp_path_factory.mktemp("workers")),
        }
    )


def summary(run):
    return json.loads((run[1] / "run_llm_summary.json").read_text())


def test_speeds_of_a_constant_trace_find_the_capacity_rates_find(runs):
    for name in ("constant", "rates"):
        assert runs[name][0].returncode == 0, runs[name][0].stdout[-3000:]
    traced, rated = summary(runs["constant"]), summary(runs["rates"])
    rows = read_csv(runs["constant"][1] / "run_llm_steps.csv")
    assert [float(r["speed"]) for r in rows] == [1, 2, 4, 8]
    assert [float(r["offered_req_s"]) for r in rows] == pytest.approx([5, 10, 20, 40])
    loads = [5.0, 10.0, 20.0, 40.0]
    found = [loads.index(s["knee"]["recommended_rate_req_s"]) for s in (traced, rated)]
    assert abs(found[0] - found[1]) <= 1 and found[0] in (1, 2), found  # 20 req/s kept up with, 40 not (30 served)
    multiple = traced["knee"]["capacity_multiple"]
    assert (
        multiple == traced["knee"]["recommended_rate_req_s"] / 5 and traced["knee"]["capacity_basis"] == "recommended"
    )
    assert f"your traffic can grow {multiple:g}x (speed)" in runs["constant"][0].stdout


def test_each_pass_over_a_trace_finds_only_the_files_own_reuse_in_the_prefix_cache(runs):
    """A 1.6 s trace replayed at speeds 1, 2 and 4 in 5 s steps (every step wraps, as a replay of a short file
    does): with fresh prefixes in each pass, unique hash_ids find nothing cached at any speed and shared ones the
    file's own share; with --trace-cache-across-steps, the replay's repeats hit (the warm case: the whole trace in
    the cache)."""
    for name in ("shared", "unique", "unique-warm"):
        assert runs[name][0].returncode == 0, runs[name][0].stdout[-3000:]
    rows = {name: read_csv(runs[name][1] / "run_llm_steps.csv") for name in ("shared", "unique", "unique-warm")}
    assert all(len(r) == len(HASHED_SPEEDS) for r in rows.values()), rows
    assert [float(r["cache_hit_share"]) for r in rows["unique"]] == [0, 0, 0], rows["unique"]
    # the tolerance: a request whose end the machine delays across the window's edge (the truth files it by its
    # planned end): one request of 224 tokens in the 40 to 160 of a step moves the share by under 0.03
    for name, shared, fresh in (("shared", True, True), ("unique-warm", False, False)):
        truth = hit_share_truth(shared, fresh)
        got = [float(r["cache_hit_share"]) for r in rows[name]]
        assert got == pytest.approx(truth, abs=0.03), (name, got, truth)
    assert summary(runs["unique"])["run"]["settings"]["trace"]["prefixes"] == "fresh in each pass"
    assert summary(runs["unique-warm"])["run"]["settings"]["trace"]["prefixes"] == "the same in every pass"


def test_bursts_at_the_same_mean_rate_cost_tail_latency(runs):
    waits = steady_waits(bursty_times(), 4)
    p90_wait = waits[math.ceil(0.9 * len(waits)) - 1]
    assert p90_wait > SERVICE_S and max(steady_waits([0.2 * i for i in range(25)], 4)) == 0  # the truth
    (bursty,) = read_csv(runs["bursty"][1] / "run_llm_steps.csv")
    even = next(r for r in read_csv(runs["constant"][1] / "run_llm_steps.csv") if float(r["speed"]) == 4)
    # at the same speed (20 req/s, two thirds of the capacity): the even trace never waits, its TTFT the 50 ms of
    # the simulator plus loopback; the bursty one's p99 is above its truth's p90 wait (a conservative bound: the
    # steady window's edges are the run's, not this model's)
    assert float(bursty["offered_req_s"]) == pytest.approx(float(even["offered_req_s"]))
    assert float(even["ttft_p99_ms"]) < 1000 * (TTFT_S + SERVICE_S / 2), even
    assert float(bursty["ttft_p99_ms"]) > 1000 * (TTFT_S + p90_wait), (bursty, waits)


def test_workers_split_the_trace_so_that_each_entry_is_sent_once_per_step(runs):
    proc, out, served = runs["workers"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    # speed 1 for 4 s: entries 0-19 (0.1 s, 0.3 s, ..., 3.9 s); speed 2: 25 entries in 2.5 s (0.05 s, ...,
    # 2.45 s), then 0-14 again (2.55 s, ..., 3.95 s): 40; and the master's preflight requests. None is due within
    # 50 ms of a boundary, where a worker hears of the step change a few milliseconds after the master made it
    assert served["finished"] + served.get("cancelled", 0) == 20 + 40 + PREFLIGHT_REQUESTS, served
    rows = read_csv(out / "run_llm_steps.csv")
    assert [r["workers"] for r in rows] == ["2", "2"]


def test_a_bad_trace_line_stops_the_run_before_any_load_with_one_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 5}\n{"timestamp": 10, "input_length": -2}\n')
    proc = run_locust("--headless", "--trace", str(path), cwd=tmp_path, timeout_s=60)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("locust-llm: error:")]
    assert proc.returncode == 2 and len(errors) == 1
    assert f"{path}:2: input_length must be a whole number of tokens >= 1, got -2" in errors[0]
