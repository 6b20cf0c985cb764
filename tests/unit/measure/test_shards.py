"""Shards merged into one run: exactly the rows of one table of all their samples, and the window rules."""

import json
import random

import pytest

from locust_llm.measure import shards
from locust_llm.measure.rows import StepWindow, step_rows
from locust_llm.measure.stats import STEADY, WARMUP, StatsKey, StatsTable


def table_of(samples, step=1, model="m", phase=STEADY):
    """A table of requests with these (TTFT, ITL) samples, in ns."""
    table = StatsTable()
    stats = table.get(StatsKey(step, model, phase))
    for ttft, itl in samples:
        stats.hist["ttft"].record(ttft)
        stats.hist["itl"].record(itl)
        stats.hist["e2e"].record(ttft + 31 * itl)
    stats.counts["requests"] = stats.counts["ok"] = len(samples)
    stats.counts["completion_tokens"] = 32 * len(samples)
    return table


def window(step=1, users=8, duration_s=10.0, reasons=(), workers=None, rate=None):
    return StepWindow(step, users, 5.0, duration_s, 2.0, 40.0, workers, tuple(reasons), rate)


def draws(seed, n):
    rng = random.Random(seed)
    return [(int(rng.lognormvariate(18.5, 0.6)), int(rng.lognormvariate(16.8, 0.3))) for _ in range(n)]


def test_merged_shards_give_exactly_the_rows_of_all_their_samples_together():
    a, b = draws(1, 700), draws(2, 300)
    table, windows = shards.merge([("a", table_of(a), [window(users=8)]), ("b", table_of(b), [window(users=4)])])
    assert step_rows(table, windows) == step_rows(table_of(a + b), [window(users=12)])
    row = step_rows(table, windows)[0]
    assert row["users"] == 12 and row["requests"] == 1000 and row["req_s"] == 100.0


def test_a_steps_window_is_the_shards_mean_its_load_their_sum_and_any_shards_reason_invalidates_it():
    parts = [
        ("east", table_of(draws(1, 10)), [window(duration_s=10.0, workers=20, rate=4.0)]),
        ("west", table_of(draws(2, 10)), [window(duration_s=10.2, workers=30, rate=6.0, reasons=["cpu 95%"])]),
    ]
    _, (merged,) = shards.merge(parts)
    assert merged.duration_s == pytest.approx(10.1) and merged.workers == 50 and merged.rate == 10.0
    assert merged.invalid_reasons == ("west: cpu 95%",) and merged.cpu_max_pct == 40.0


def test_shards_of_different_step_plans_do_not_merge():
    parts = [("a", StatsTable(), [window(1), window(2)]), ("b", StatsTable(), [window(1)])]
    with pytest.raises(shards.ShardError, match=r"b has steps \[1\], a has \[1, 2\]"):
        shards.merge(parts)


def test_the_file_round_trips_through_json_and_a_foreign_file_is_refused():
    table = table_of(draws(3, 50))
    table.merge(table_of(draws(4, 5), phase=WARMUP))
    windows = [window(reasons=["too few requests"], rate=2.5)]
    back_table, back_windows = shards.load(json.loads(json.dumps(shards.dump(table, windows))), "x")
    assert back_windows == windows
    assert [(k, s.hist, s.counts) for k, s in back_table] == [(k, s.hist, s.counts) for k, s in table]
    with pytest.raises(shards.ShardError, match="x: not a locust-llm histograms file"):
        shards.load({"format": "other"}, "x")
    with pytest.raises(shards.ShardError, match="x: malformed histograms file"):
        shards.load({"format": shards.FORMAT, "windows": [{"step": 1}], "stats": []}, "x")
