"""The GitHub workflows, validated against the GitHub workflow schema, and the nightly conventions."""

import subprocess
import sys
from pathlib import Path

import yaml
from croniter import croniter

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def test_workflows_match_the_github_schema():
    assert {w.name for w in WORKFLOWS} == {"ci.yml", "nightly.yml"}
    proc = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows", *map(str, WORKFLOWS)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_nightly_runs_at_an_odd_minute_on_demand_too_once_at_a_time_and_keeps_its_report():
    flow = yaml.safe_load((ROOT / ".github" / "workflows" / "nightly.yml").read_text())
    triggers = flow[True]  # YAML reads the key "on" as True
    (schedule,) = triggers["schedule"]
    assert croniter.is_valid(schedule["cron"]) and schedule["cron"].split()[0] not in ("0", "*", "30")
    assert "workflow_dispatch" in triggers and flow["concurrency"]["group"]
    steps = flow["jobs"]["sweep"]["steps"]
    runs = " ".join(s.get("run", "") for s in steps)
    assert "locust-llm compare" in runs and "--llm-report" in runs
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["if"] == "always()" and "${{ env.NIGHT }}" in upload["with"]["name"]  # one artifact a night


def test_nightly_carries_its_history_forward_and_runs_the_trend_gate_after_compare():
    flow = yaml.safe_load((ROOT / ".github" / "workflows" / "nightly.yml").read_text())
    steps = flow["jobs"]["sweep"]["steps"]
    uses = [s.get("uses", "").split("@")[0] for s in steps]
    runs = [s.get("run", "") for s in steps]
    restore, sweep = uses.index("actions/cache/restore"), next(i for i, r in enumerate(runs) if "locust -f" in r)
    compare = next(i for i, r in enumerate(runs) if "locust-llm compare" in r)
    trend = next(i for i, r in enumerate(runs) if "locust-llm trend" in r)
    save = uses.index("actions/cache/save")
    assert restore < sweep < compare < trend < save
    assert steps[restore]["with"]["path"] == steps[save]["with"]["path"] == "runs/nightly/history.jsonl"
    assert steps[restore]["with"]["restore-keys"] == "nightly-history-"  # the newest earlier night's history
    assert steps[trend]["if"].startswith("always()") and steps[save]["if"].startswith("always()")  # after a failure too
    assert "--append" in runs[trend] and '"runs/nightly/$NIGHT/report/summary.json"' in runs[trend]
    baseline = ROOT / "baselines" / "sim-llm.json"
    assert baseline.exists(), "the simulator's baseline must be committed"


def test_ci_runs_the_ci_script():
    flow = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text())
    assert any(s.get("run") == "bash .ci/run" for s in flow["jobs"]["test"]["steps"])
