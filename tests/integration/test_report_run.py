"""Reports made at the end of real runs: --llm-report, --baseline (the exit code follows the gate), and plain
Locust CSVs from any locustfile."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.light_runs import SHORT
from tests.support.procs import at_once, run_locust

pytestmark = pytest.mark.slow  # end-to-end runs: deselected by -m 'not slow'


@pytest.fixture(scope="module")
def baseline(light_runs):
    """The baseline run (tests/support/light_runs.py, with a plain locustfile's run and a run given a bad baseline)."""
    return light_runs["baseline"]


def gated(out, baseline_path, *extra):
    return run_locust(*SHORT, "--csv", str(out / "run"), "--baseline", str(baseline_path), *extra, cwd=out)


@pytest.fixture(scope="module")
def gates(baseline, tmp_path_factory):
    """At once, each against its own simulator: the same configuration gated against the baseline, and against a
    baseline that served twice the tokens per second this machine can."""
    good = baseline / "report" / "summary.json"
    better = json.loads(good.read_text())
    for step in better["steps"]:
        step["output_tok_s"] = 2 * step["output_tok_s"]
    better_path = tmp_path_factory.mktemp("better") / "better.json"
    better_path.write_text(json.dumps(better))
    # two runs of one config on a shared 2-core machine: ITL p99 (here ~6 ms) went from 6.0 to 9.1 ms in CI once,
    # over the default 2 ms minimum rise (the simulator itself is up to ~7 ms late at p99 on such a machine); the
    # TTFT p99 of these steps' few dozen requests is reported, not judged (too few to bound it)
    return at_once(
        {
            "same": lambda: gated(tmp_path_factory.mktemp("same"), good, "--min-itl-rise-ms", "10"),
            "worse": lambda: gated(tmp_path_factory.mktemp("worse"), better_path),
        }
    )


def test_llm_report_writes_summary_html_and_prints_the_recommendation(baseline):
    summary = json.loads((baseline / "report" / "summary.json").read_text())
    assert summary["schema"] == "locust-llm/summary" and summary["valid"]
    assert [s["users"] for s in summary["steps"]] == [2, 4, 8]
    assert summary["run"]["settings"]["steps"] == [2, 4, 8] and "api_key_set" in summary["run"]["settings"]
    assert summary["run"]["simulator"]["saturation_users"] == 64  # pacing engine: its capacity
    assert (baseline / "report" / "report.html").stat().st_size > 1_000_000  # plotly embedded
    assert (baseline / "run_llm_run.json").exists()


def test_baseline_gate_sets_the_exit_code(gates):
    proc = gates["same"]
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "verdict: no regression" in proc.stdout
    proc = gates["worse"]
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "REGRESSION" in proc.stdout and re.search(r"peak_output_tok_s .* REGRESSION", proc.stdout)
    assert re.search(r"ttft_p99_ms .* finding .*not judged: the baseline's p99 of \d+ samples", proc.stdout)


def test_bad_baseline_exits_2(light_runs):
    proc, out = light_runs["bad-baseline"]
    assert proc.returncode == 2 and "is not valid JSON" in proc.stdout
    assert Path(out / "run_llm_steps.csv").exists()  # what was measured is kept


def test_plain_locust_csvs_of_any_locustfile_give_an_approximate_report(light_runs):
    proc, tmp_path = light_runs["plain-locustfile"]
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = subprocess.run(
        [sys.executable, "-m", "locust_llm.cli", "report", str(tmp_path / "plain")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert report.returncode == 0, report.stderr
    assert "(approximate)" in report.stdout
    summary = json.loads((tmp_path / "plain" / "summary.json").read_text())
    assert summary["source"] == {
        "kind": "locust_history",
        "path": str(tmp_path / "plain_stats_history.csv"),
        "approximate": True,
    }
    assert [s["users"] for s in summary["steps"]] == [2, 6]
    assert all(s["requests"] > 0 and s["e2e_p50_ms"] is not None for s in summary["steps"])
