"""bench/master.py's replay on reports built by a worker Collector's own code: the master merges every report of
every worker exactly, and the verdict rule."""

from __future__ import annotations

import sys
from pathlib import Path

import msgpack

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from master import GOALS, REPORT_KEY, feed, master, verdict

from locust_llm.measure.stats import STEADY, StatsKey, StatsTable


def report(step: int, samples: int) -> dict:
    """A worker report's locust-llm part of ``samples`` requests at ``step`` (run 1)."""
    table = StatsTable()
    stats = table.get(StatsKey(step, "m", STEADY))
    for i in range(samples):
        stats.hist["ttft"].record(50_000_000 + 1_000 * i)
    stats.counts["requests"] = stats.counts["ok"] = samples
    return {REPORT_KEY: {"run": 1, "at": [step, 0, False], "stats": table.to_wire(), "cpu": {}}}


def test_the_replay_merges_every_report_of_every_worker_exactly():
    reports = [report(1, 30), report(1, 20), report(2, 40)]
    collector = master(5, reports)
    for data in reports:
        for w in range(5):
            collector._on_worker_report(f"worker-{w}", msgpack.unpackb(msgpack.packb(data), strict_map_key=False))
    merged = {key.step: stats for key, stats in collector.results()}
    assert merged[1].counts["requests"] == 5 * 50 and merged[2].counts["requests"] == 5 * 40
    assert merged[1].hist["ttft"].count == 5 * 50
    assert {r["worker"] for r in collector.worker_rows()} == {f"worker-{w}" for w in range(5)}
    figures = feed(5, reports, [msgpack.packb(r) for r in reports])
    assert figures["per_report_ms"] > 0 and figures["share_pct"] > 0


def test_a_share_within_its_noise_of_the_goal_is_unsure():
    goal = GOALS[100]
    assert verdict([1.7, 1.6], goal) == "met"
    assert verdict([25.0, 30.0], goal) == "NOT met"
    assert verdict([19.0], goal) == "UNSURE"  # within 20 % of the goal
    assert verdict([10.0, 30.0], goal) == "UNSURE"
