"""``locust-llm trend``: histories and kept reports in; trend.html (in real Chromium) and the drift gate's exit
code out."""

import json
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from tests.integration.test_report_browser import chromium, headless
from tests.support.procs import clean_env

START = datetime(2026, 11, 1, 3, 17, tzinfo=UTC)


def summary(i, ttft=400.0, knee=64, valid=True, version="0.1.0", prices=False):
    """A summary.json as a run writes it (the fields a history line takes)."""
    steps = [
        {
            "step": n + 1,
            "users": u,
            "model": "grok-4",
            "requests": 100,
            "ok": 100 - (u == 64) * 20,
            "status_429": (u == 64) * 20,
            "ttft_p50_ms": ttft * u / 64,
            "ttft_p99_ms": ttft * u / 32,
            "itl_p50_ms": 15.0,
            "itl_p99_ms": 20.0 + u / 8,
            "e2e_p50_ms": 1500.0,
            "e2e_p99_ms": 2500.0,
            "output_tok_s": 100.0 * min(u, knee),
            "cost_usd": 0.01 if prices else None,
            "valid": valid,
        }
        for n, u in enumerate((8, 16, 32, 64))
    ]
    return {
        "schema": 1,
        "model": "grok-4",
        "mode": "users",
        "valid": valid,
        "steps": steps,
        "knee": {"recommended_users": knee, "latency_knee_users": knee, "latency_knee_bracket": [knee, 2 * knee]},
        "run": {
            "started": (START + timedelta(days=i)).isoformat(),
            "host": "https://user:pw@api.x.ai/v1",
            "versions": {"locust_llm": version},
        },
    }


def trend(*args, cwd):
    cmd = [sys.executable, "-m", "locust_llm.cli", "trend", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=cwd, env=clean_env())


@pytest.fixture(scope="module")
def drifting(tmp_path_factory):
    """A fortnight of kept reports: p99 TTFT up 3 % a night, one invalid night, a tool upgrade, prices."""
    root = tmp_path_factory.mktemp("nightly")
    for i in range(14):
        night = root / f"{(START + timedelta(days=i)).strftime('%Y-%m-%dT%H-%MZ')}" / "report"
        night.mkdir(parents=True)
        data = summary(i, ttft=400 * 1.03**i, valid=i != 6, version="0.1.0" if i < 9 else "0.2.0", prices=True)
        (night / "summary.json").write_text(json.dumps(data))
    proc = trend(root, "--out", root / "trend", cwd=root)
    return root, proc


def test_a_slow_drift_rebuilt_from_kept_reports_fails_the_gate(drifting):
    root, proc = drifting
    assert proc.returncode == 1, proc.stderr
    assert "DRIFT: ttft_p99_ms@32 rose" in proc.stdout and "last 13 valid runs" in proc.stdout
    data = json.loads((root / "trend" / "trend.json").read_text())
    assert data["exit_code"] == 1 and len(data["runs"]) == 14 and data["runs"][6]["valid"] is False
    assert data["changes"] == [[data["runs"][9]["date"], "tool 0.1.0 -> 0.2.0"]]
    assert all("pw@" not in (run["endpoint"] or "") for run in data["runs"])  # never credentials


def test_trend_html_renders_in_chromium_without_javascript_errors(drifting, tmp_path):
    root, _ = drifting
    page = root / "trend" / "trend.html"
    proc = headless(chromium(), tmp_path / "profile", "--dump-dom", page.as_uri())
    status = re.search(r'id="render-status">([^<]*)<', proc.stdout)
    assert status, proc.stderr[-2000:]
    # knee, TTFT p99, ITL p99, tok/s at the knee, 429 share, cost
    assert status.group(1) == "rendered 6 charts, 0 errors"
    assert "invalid run" in proc.stdout and "tool 0.1.0 -&gt; 0.2.0" in proc.stdout


@pytest.mark.slow  # a few seconds of subprocesses: the full suite only, out of the -m "not slow" loop
def test_append_builds_the_history_night_by_night_and_a_flat_one_passes(tmp_path):
    history = tmp_path / "nightly" / "history.jsonl"
    for i in range(7):
        path = tmp_path / f"s{i}.json"
        path.write_text(json.dumps(summary(i, ttft=400 * (1.02 if i % 2 else 0.98))))
        proc = trend(history, "--append", path, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
    assert len(history.read_text().splitlines()) == 7
    assert "no drift beyond 10% over the last 14 valid runs" in proc.stdout
    assert (tmp_path / "nightly" / "trend.html").exists()


@pytest.mark.parametrize(
    ("setup", "args", "message"),
    [
        ("bad line", (), "history.jsonl: line 2: not JSON"),
        ("mixed", (), "history.jsonl: line 2: schema 'locust-llm-history/0'"),
        ("none", ("--window", "1"), "--window must be at least 2 runs, got 1"),
        ("none", ("--max-drift-pct", "0"), "--max-drift-pct must be above 0"),
        ("missing", (), "no such file or directory"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, setup, args, message):
    history = tmp_path / "history.jsonl"
    good = json.dumps(
        {
            "schema": "locust-llm-history/1",
            "date": START.isoformat(),
            "model": "m",
            "valid": True,
            "knee": {},
            "steps": [],
        }
    )
    second = {"bad line": "{oops", "mixed": '{"schema": "locust-llm-history/0"}', "none": good}.get(setup)
    if second is not None:
        history.write_text(good + "\n" + second + "\n")
    proc = trend(history, *args, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("locust-llm trend: error:")
    assert message in proc.stderr
