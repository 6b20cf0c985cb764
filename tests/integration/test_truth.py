"""What a real run says and writes: cost, the capacity summary, the default report files, the exit code as a
verdict, and steps too short for their requests."""

import csv
import json
import re
from functools import partial

import pytest

from tests.support.procs import at_once, read_csv, run_locust

pytestmark = pytest.mark.slow  # end-to-end runs: deselected by -m 'not slow'

PACING = "--ttft-ms 50 --itl-ms 5 --capacity 64 --max-concurrent-per-key 3 --retry-after-s 0.5"
SHORT = (
    "--headless",
    "--steps",
    "2,4",
    "--step-duration",
    "5s",
    "--warmup",
    "1s",
    "--max-tokens",
    "16",
    "--sim-args",
    PACING,
)


def priced_run(out):
    prices = ("--price-input-usd-per-mtok", "1.5", "--price-output-usd-per-mtok", "6")
    return run_locust(*SHORT, "--csv", str(out / "run"), *prices, cwd=out), out


def unmet_sla_run(out):
    return run_locust(*SHORT, "--csv", str(out / "run"), "--sla-ttft-p99-ms", "1", "--llm-report", "off", cwd=out), out


def short_steps_run(out):
    """3.25 s requests (100 ms to the first token, 63 gaps of 50 ms) in 5 s steps."""
    proc = run_locust(
        "--headless",
        "--steps",
        "2,4",
        "--step-duration",
        "5s",
        "--max-tokens",
        "64",
        "--sim-args",
        "--ttft-ms 100 --itl-ms 50 --capacity 64",
        "--csv",
        str(out / "run"),
        cwd=out,
    )
    return proc, out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The three runs at once, each with its own simulator (2 and 4 users)."""
    jobs = {"priced": priced_run, "unmet-sla": unmet_sla_run, "short-steps": short_steps_run}
    return at_once({name: partial(job, tmp_path_factory.mktemp(name)) for name, job in jobs.items()})


@pytest.fixture(scope="module")
def priced(runs):
    return runs["priced"]


def test_errors_past_the_capacity_are_findings_not_failures(priced):
    proc, out = priced
    rows = {int(r["users"]): r for r in read_csv(out / "run_llm_steps.csv")}
    assert int(rows[4]["status_429"]) > 0  # the provider cap of 3 concurrent requests bites at 4 users
    assert all(r["valid"] == "True" for r in rows.values()), rows
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "verdict: exit 0, a valid sweep" in proc.stdout


def test_cost_reaches_the_per_step_csv_and_the_report(priced):
    _, out = priced
    for row in read_csv(out / "run_llm_steps.csv"):
        expected = int(row["prompt_tokens"]) * 1.5 / 1e6 + int(row["completion_tokens"]) * 6 / 1e6
        assert row["cost_usd"] and float(row["cost_usd"]) == pytest.approx(expected, abs=1e-6), row
    html = (out / "run_llm_report.html").read_text()
    table = html.split("<h2>Per-step results</h2>", 1)[1].split("</table>", 1)[0]
    cost_cells = [
        cells[14]
        for cells in re.findall(r"<tr>(.*?)</tr>", table)[1:]
        for cells in [re.findall(r"<td>(.*?)</td>", cells)]
    ]
    assert cost_cells and all(c not in ("-", "") for c in cost_cells), cost_cells


def test_the_summary_is_printed_and_written_next_to_the_csvs_without_llm_report(priced):
    proc, out = priced
    assert "locust-llm capacity summary for sim-llm" in proc.stdout
    summary = json.loads((out / "run_llm_summary.json").read_text())
    assert summary["valid"] and summary["knee"]["provider_cap_users"] == 4
    assert (out / "run_llm_report.html").stat().st_size > 1_000_000


def test_an_sla_that_no_step_meets_fails_the_gate_and_report_files_can_be_turned_off(runs):
    proc, tmp_path = runs["unmet-sla"]
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "no tested concurrency meets the SLA (TTFT p99 <= 1 ms, error rate <= 1% (default))" in proc.stdout
    assert not list(tmp_path.glob("*report*")) and not list(tmp_path.glob("*summary*"))
    assert (tmp_path / "run_llm_steps.csv").exists()


def test_steps_too_short_for_their_requests_are_invalid_and_the_needed_length_is_said(runs):
    proc, tmp_path = runs["short-steps"]
    assert proc.returncode == 3, proc.stdout[-3000:]
    advice = re.search(
        r"steps of 5 s are too short for this workload \(E2E p50 (\S+) s.*?--step-duration (\d+)s", proc.stderr
    )
    assert advice and float(advice.group(1)) == pytest.approx(3.25, abs=0.15) and int(advice.group(2)) >= 10
    rows = {int(r["users"]): r for r in read_csv(tmp_path / "run_llm_steps.csv")}
    assert "requests too long for the step" in rows[2]["invalid_reasons"]
    assert "too few completed requests in the steady window" in rows[2]["invalid_reasons"]
    assert "warm-up 2.5 s shorter than the previous step's E2E p90" in rows[4]["invalid_reasons"]
    assert "capped at half the step: shorter than the previous step's E2E p90" in proc.stderr
    with open(tmp_path / "run_llm_steps.csv", newline="") as handle:
        assert all(r["valid"] == "False" for r in csv.DictReader(handle))
