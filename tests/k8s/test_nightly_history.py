"""The rendered nightly CronJob's master script, run locally night after night: dated directories, retention,
history.jsonl on the claim, and the job failing on either gate.

``/results`` is a temporary directory; ``locust`` is a stand-in that writes the night's summary.json (the script
around it is what is under test); ``date`` is pinned per night; ``locust-llm`` is the real one.
"""

import json
import os
import stat
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.integration.test_trend import summary
from tests.k8s.conftest import render
from tests.k8s.test_manifests import of_kind

pytestmark = pytest.mark.slow  # the nightly script run night after night: the full suite only

FAKE_LOCUST = """#!/bin/sh
for arg in "$@"; do case "$arg" in --llm-report=*) report="${arg#--llm-report=}";; esac; done
mkdir -p "$report" && cp "$FAKE_SUMMARY" "$report/summary.json"
exit "${FAKE_EXIT:-0}"
"""


def script() -> str:
    (cron,) = of_kind(render("nightly"), "CronJob")
    (container,) = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    return container["args"][0]


def tool(bin_dir: Path, name: str, text: str) -> None:
    path = bin_dir / name
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def night(tmp_path, results, i, *, ttft=400.0, run_exit=0, keep=3):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    tool(bin_dir, "locust", FAKE_LOCUST)
    when = datetime(2026, 11, 1, 3, 17, tzinfo=UTC) + timedelta(days=i)
    tool(bin_dir, "date", f"#!/bin/sh\necho {when.strftime('%Y-%m-%dT%H-%MZ')}\n")
    data = summary(i, ttft=ttft)
    (tmp_path / "summary.json").write_text(json.dumps(data))
    env = {
        "PATH": f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}",
        "JOB_COMPLETION_INDEX": "0",
        "FAKE_SUMMARY": str(tmp_path / "summary.json"),
        "FAKE_EXIT": str(run_exit),
        "KEEP_NIGHTS": str(keep),
        "TREND_WINDOW": "14",
        "MAX_DRIFT_PCT": "10",
    }
    local = script().replace("/results", str(results))
    return subprocess.run(["sh", "-c", local], env=env, capture_output=True, text=True, timeout=120)


def test_every_night_is_kept_dated_with_retention_and_one_growing_history(tmp_path):
    results = tmp_path / "results"
    for i in range(5):
        proc = night(tmp_path, results, i, keep=3)
        assert proc.returncode == 0, proc.stderr
    kept = sorted(p.name for p in (results / "nightly").iterdir() if p.is_dir())
    assert kept == ["2026-11-03T03-17Z", "2026-11-04T03-17Z", "2026-11-05T03-17Z"]  # the last 3, sortable names
    history = (results / "nightly" / "history.jsonl").read_text().splitlines()
    assert len(history) == 5  # never pruned
    assert (results / "nightly" / kept[-1] / "trend" / "trend.html").exists()
    assert (results / "nightly" / kept[-1] / "report" / "summary.json").exists()


def test_the_job_fails_on_either_gate(tmp_path):
    results = tmp_path / "results"
    for i in range(6):  # TTFT p99 up 6 % a night: no single night breaches compare's 15 %, the trend does
        proc = night(tmp_path, results, i, ttft=400 * 1.06**i)
    assert proc.returncode == 1 and "DRIFT: ttft_p99_ms@" in proc.stdout
    proc = night(tmp_path / "other", tmp_path / "flat", 0, run_exit=1)  # a regression against the baseline
    assert proc.returncode == 1 and len((tmp_path / "flat" / "nightly" / "history.jsonl").read_text().splitlines()) == 1
