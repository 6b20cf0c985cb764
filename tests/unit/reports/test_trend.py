"""The drift gate on synthetic histories whose drift is known."""

import itertools
import json
import random
from datetime import UTC, datetime, timedelta

import pytest

from locust_llm.reports import trend
from locust_llm.reports.files import ReportInputError
from locust_llm.reports.trend import SCHEMA, append_line, changes, drift_gate, load_history, theil_sen

START = datetime(2026, 11, 1, 3, 17, tzinfo=UTC)


def night(i, ttft=400.0, knee=64, valid=True, version="0.1.0"):
    steps = [
        {
            "users": u,
            "ttft_p99_ms": ttft * u / 32,
            "itl_p99_ms": 20.0,
            "output_tok_s": 100.0 * min(u, knee),
            "valid": True,
        }
        for u in (8, 16, 32, 64)
    ]
    return {
        "schema": SCHEMA,
        "date": (START + timedelta(days=i)).isoformat(),
        "endpoint": "https://api.x.ai/v1",
        "model": "grok-4",
        "tool_version": version,
        "mode": "users",
        "valid": valid,
        "knee": {"recommended_users": knee, "latency_knee_users": knee},
        "steps": steps,
    }


def noisy(base, share, rng):
    return base * (1 + rng.uniform(-share, share))


def verdicts(lines, window=14, limit=10.0):
    code, drifts = drift_gate(lines, window, limit)
    return code, {d.metric: d for d in drifts}


def test_theil_sen_recovers_a_line_and_ignores_one_outlier():
    points = [(x, 2.0 * x + 5) for x in range(10)]
    points[4] = (4, 500.0)
    slope, intercept, up = theil_sen(points)
    assert slope == pytest.approx(2.0) and intercept == pytest.approx(5.0) and up > 0.8


def test_a_flat_noisy_history_never_alarms():
    for seed in range(20):
        rng = random.Random(seed)
        lines = [night(i, ttft=noisy(400, 0.08, rng), knee=rng.choice((64, 64, 64, 48))) for i in range(14)]
        code, found = verdicts(lines)
        assert code == 0, [d.text for d in found.values() if d.verdict == "drift"]


def test_the_consistency_rule_keeps_false_alarms_rare_on_very_noisy_flat_histories(monkeypatch):
    def history(rng):
        return [night(i, ttft=noisy(400, 0.15, rng)) for i in range(14)]

    def alarms():
        return sum(verdicts(history(random.Random(seed)))[0] for seed in range(200))

    with_rule = alarms()
    monkeypatch.setattr(trend, "CONSISTENCY", 0.0)
    assert with_rule <= 6 < alarms()  # <= 3 % of nights with +-15 % noise; more than that without the rule


def test_a_slow_drift_that_no_single_night_flags_alarms_within_the_window():
    rng = random.Random(1)
    lines = [night(i, ttft=noisy(400 * 1.02**i, 0.03, rng)) for i in range(14)]  # +2 % a night, under compare's 15 %
    nightly = [b["steps"][2]["ttft_p99_ms"] / a["steps"][2]["ttft_p99_ms"] - 1 for a, b in itertools.pairwise(lines)]
    assert max(nightly) < 0.15
    code, found = verdicts(lines)
    drift = found["ttft_p99_ms@32"]
    assert code == 1 and drift.verdict == "drift" and 18 < drift.drift_pct < 36
    assert (
        "ttft_p99_ms@32 rose" in drift.text
        and "last 14 valid runs" in drift.text
        and "% per run" in drift.text
        and "13.0 days" in drift.text
    )
    assert found["itl_p99_ms@32"].verdict == "ok"  # only what drifted is named


def test_a_knee_that_slides_from_64_to_48_over_a_fortnight_alarms():
    lines = [night(i, knee=64 if i < 7 else 48) for i in range(14)]
    code, found = verdicts(lines)
    assert code == 1 and found["recommended_users"].verdict == "drift" and found["recommended_users"].drift_pct < -10


def test_one_bad_night_is_not_drift():
    rng = random.Random(3)
    lines = [night(i, ttft=noisy(400, 0.03, rng)) for i in range(14)]
    lines[9] = night(9, ttft=1200.0, knee=16)
    assert verdicts(lines)[0] == 0


def test_invalid_runs_in_the_window_are_ignored():
    rng = random.Random(4)
    lines = [night(i, ttft=noisy(400, 0.03, rng), valid=i % 3 != 2) for i in range(21)]
    for i in range(2, 21, 3):  # the invalid nights drift wildly
        lines[i] = night(i, ttft=400 * 1.2**i, knee=8, valid=False)
    code, found = verdicts(lines)
    assert code == 0 and found["ttft_p99_ms@32"].points == 14


def test_too_few_valid_runs_are_not_sure():
    lines = [night(i, ttft=400 * 1.3**i) for i in range(4)]
    code, found = verdicts(lines)
    assert code == 0 and found["ttft_p99_ms@32"].verdict == "not sure"


def test_the_window_looks_only_at_the_last_runs():
    lines = [night(i, ttft=400 * 1.05**i) for i in range(10)] + [night(i, ttft=400 * 1.05**9) for i in range(10, 24)]
    assert verdicts(lines, window=14)[0] == 0  # the drift ended before the window
    assert verdicts(lines, window=24)[0] == 1


def test_tool_and_model_changes_are_found():
    lines = [night(0), night(1), night(2, version="0.2.0"), night(3, version="0.2.0")]
    assert changes(lines) == [(lines[2]["date"], "tool 0.1.0 -> 0.2.0")]


def test_a_changed_target_marks_its_night_and_a_night_without_one_is_not_a_change():
    """Nights 0-1 on 1 replica of 2,000 KV blocks, night 2 read no fingerprint (unknown, not a change), night 3 on 3
    replicas of 1,000 blocks: night 3 is marked, against night 1's fingerprint."""
    targets = [{"replicas": 1, "vllm": {"num_gpu_blocks": 2000}}] * 2 + [
        {},
        {"replicas": 3, "vllm": {"num_gpu_blocks": 1000}},
    ]
    lines = [{**night(i), "target": t} for i, t in enumerate(targets)]
    assert changes(lines) == [(lines[3]["date"], "target KV blocks: 2000 -> 1000, target replicas: 1 -> 3")]
    summary = {"model": "m", "knee": {}, "steps": [], "run": {"started": "2026-12-01T00:00:00+00:00"}}
    line = trend.history_line({**summary, "target": {"replicas": 2, "changed_during_run": []}})
    assert line["target"] == {"replicas": 2} and trend.history_line(summary)["target"] == {}


def test_the_wall_is_in_the_history_and_its_changes_are_told():
    from locust_llm.reports.trend_html import trend_text

    walls = ["kv_cache", "kv_cache", None, "provider_cap", "provider_cap"]
    lines = [{**night(i), "wall": w} for i, w in enumerate(walls)]
    lines.append({**night(5, valid=False), "wall": "generator"})  # an invalid run's wall is not one to tell
    assert trend.wall_changes(lines) == [(lines[3]["date"], "wall kv_cache -> provider_cap")]
    _, drifts = drift_gate(lines, 14, 10.0)
    text = trend_text(lines, drifts, 14, 10.0)
    assert f"wall of the last valid run: provider_cap (since {lines[3]['date']}; wall kv_cache -> provider_cap)" in text
    summary = {"model": "m", "knee": {}, "steps": [], "run": {"started": "2026-12-01T00:00:00+00:00"}}
    assert trend.history_line({**summary, "diagnosis": {"wall": "kv_cache"}})["wall"] == "kv_cache"
    assert trend.history_line(summary)["wall"] is None


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("{not json", "line 2: not JSON"),
        ('{"schema": "locust-llm-history/0"}', "line 2: schema 'locust-llm-history/0', expected"),
        (json.dumps({**night(1), "valid": "yes"}), "line 2: 'valid' must be a bool"),
        (json.dumps({**night(1), "date": "yesterday"}), "line 2: date 'yesterday' is not an ISO 8601 time"),
    ],
)
def test_malformed_or_mixed_lines_name_the_line(tmp_path, bad, message):
    path = tmp_path / "history.jsonl"
    path.write_text(json.dumps(night(0)) + "\n" + bad + "\n" + json.dumps(night(2)) + "\n")
    with pytest.raises(ReportInputError, match=message):
        load_history(path)
    with pytest.raises(ReportInputError):  # nothing is appended to a broken history
        append_line(path, night(3))
    assert path.read_text().count("\n") == 3


def test_append_then_load_keeps_every_night_in_time_order(tmp_path):
    path = tmp_path / "nightly" / "history.jsonl"
    for i in (2, 0, 1):
        append_line(path, night(i))
    assert [line["date"] for line in load_history(path)] == [night(i)["date"] for i in range(3)]
