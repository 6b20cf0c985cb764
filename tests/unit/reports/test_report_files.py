"""summary.json, report.html and the CLI, on files written like a real run's."""

import json
import subprocess
import sys

import pytest

from locust_llm.measure.sla import Prices, Sla
from locust_llm.reports.console import console_summary
from locust_llm.reports.html import render_html
from locust_llm.reports.load import load_run
from locust_llm.reports.summary import build_summary
from tests.unit.reports.test_load import row, write_steps

TTFT = (24, 29, 35, 1646, 3064)


@pytest.fixture
def prefix(tmp_path):
    rows = [
        row(
            i + 1,
            u,
            ttft_p99_ms=TTFT[i],
            ttft_p50_ms=TTFT[i] / 2,
            output_tok_s=[650, 1130, 1830, 2070, 2060][i],
            req_s=1.0,
            requests=100,
            ok=100,
            status_429=0,
            prompt_tokens=1000,
            completion_tokens=9000,
            duration_s=10,
        )
        for i, u in enumerate([8, 16, 32, 64, 128])
    ]
    write_steps(tmp_path / "run_llm_steps.csv", rows)
    (tmp_path / "run_llm_run.json").write_text(
        json.dumps({"settings": {"model": "m", "api_key_set": True}, "simulator": {"saturation_users": 34}})
    )
    return tmp_path / "run"


def test_summary_schema_and_console_text(prefix):
    summary = build_summary(load_run(prefix), Sla(ttft_p99_ms=500), Prices(1.0, 2.0))
    assert (summary["schema"], summary["version"], summary["model"], summary["valid"]) == (
        "locust-llm/summary",
        1,
        "m",
        True,
    )
    assert summary["knee"]["latency_knee_users"] == 32 and summary["knee"]["recommended_users"] == 32
    assert summary["analyses"]["m"]["cost"]["steps"][0]["cost_usd"] == pytest.approx((1000 + 18000) / 1e6)
    text = console_summary(summary)
    assert "latency knee (TTFT p99): 32 users (the bend lies between 32 and 64 users)" in text
    assert "simulator's analytic knee: 34 users" in text
    json.dumps(summary)  # serialisable


def test_invalid_steps_make_an_invalid_run_that_says_so(prefix, tmp_path):
    run = load_run(prefix)
    run.steps[2]["valid"] = False
    run.steps[2]["invalid_reasons"] = "generator saturated: w1 CPU 95% > 80%"
    summary = build_summary(run, Sla(), Prices())
    assert not summary["valid"] and summary["invalid_reasons"] == ["step 3: generator saturated: w1 CPU 95% > 80%"]
    assert console_summary(summary).splitlines()[1].startswith("  INVALID RUN: step 3")


@pytest.mark.parametrize("unended", [0, 3])
def test_requests_cancelled_at_the_stop_are_said(prefix, unended):
    meta = json.loads(prefix.with_name("run_llm_run.json").read_text())
    meta["totals"] = {
        "requests": 40,
        "ok": 40,
        "open_loop": {"arrivals": 50, "dropped": 7, "sent": 43, "ended": 43 - unended, "unended": unended},
    }
    prefix.with_name("run_llm_run.json").write_text(json.dumps(meta))
    text = console_summary(build_summary(load_run(prefix), Sla(), Prices()))
    said = [line for line in text.splitlines() if "were cancelled" in line]
    assert said == (
        [
            f"  {unended} request(s) sent were still in flight when the run stopped and were cancelled, in no"
            " figure: --stop-timeout 60s lets them finish"
        ]
        if unended
        else []
    )


def test_html_is_self_contained_and_never_holds_the_key(prefix):
    page = render_html(build_summary(load_run(prefix), Sla(ttft_p99_ms=500), Prices(1.0, 2.0)), [])
    assert "<script src=" not in page and "Plotly.newPlot" in page and "plotly.js" in page.lower()
    assert "api_key_set" in page  # the settings, of which the key is only said to be set


def cli(*args):
    return subprocess.run([sys.executable, "-m", "locust_llm.cli", *args], capture_output=True, text=True, timeout=120)


def test_cli_report_then_compare_against_itself(prefix, tmp_path):
    out = tmp_path / "out"
    proc = cli("report", str(prefix), "--out", str(out), "--sla-ttft-p99-ms", "500")
    assert proc.returncode == 0, proc.stderr
    assert "recommended max concurrency: 32 users" in proc.stdout
    assert (out / "report.html").exists() and (out / "summary.json").exists()
    same = cli("compare", str(out / "summary.json"), str(out / "summary.json"))
    assert same.returncode == 0 and "verdict: no regression" in same.stdout
    worse = json.loads((out / "summary.json").read_text())
    worse["knee"]["recommended_users"] = worse["knee"]["latency_knee_users"] = 8
    (tmp_path / "worse.json").write_text(json.dumps(worse))
    proc = cli("compare", str(out / "summary.json"), str(tmp_path / "worse.json"))
    assert proc.returncode == 1 and "REGRESSION" in proc.stdout
    proc = cli("report", str(prefix), "--out", str(tmp_path / "o2"), "--baseline", str(tmp_path / "worse.json"))
    assert proc.returncode == 0  # the run is better than that baseline


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["report", "nowhere/run"], "locust-llm report: error: no run found at nowhere/run"),
        (["report", "X", "--sla-ttft-p99-ms", "soon"], "--sla-ttft-p99-ms must be a number >= 0, got 'soon'"),
        (["compare", "missing.json", "missing.json"], "locust-llm compare: error: the baseline missing.json does not"),
        (["compare", "README.md", "README.md"], "is not valid JSON (line 1"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(args, message):
    proc = cli(*args)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and message in proc.stderr, proc.stderr


def test_cli_truncated_summary(tmp_path, prefix):
    (tmp_path / "cut.json").write_text('{"schema": "locust-llm/summary", "version": 1, "model"')
    proc = cli("compare", str(tmp_path / "cut.json"), str(tmp_path / "cut.json"))
    assert proc.returncode == 2 and "is not valid JSON" in proc.stderr


def test_steps_whose_model_stopped_early_are_named_with_what_they_got(prefix):
    """Steps whose requests got under 90 % of the output tokens they asked for offered less decode load than planned:
    the summary names them; a run that was not exact is told how to ask for exact lengths. A CSV from before the
    columns existed names none."""
    run = load_run(prefix)
    assert build_summary(run, Sla(), Prices())["output_length"]["short_steps"] == []
    run.run_meta["output_length"] = {"mode": "auto", "exact": {"m": False}}
    for step, ratio in zip(run.steps, (0.75, 0.9, 1.0, 0.5, None), strict=True):
        step["output_tokens_ratio"] = ratio
    summary = build_summary(run, Sla(), Prices())
    lengths = summary["output_length"]
    assert [(s["step"], s["load"], s["ratio"]) for s in lengths["short_steps"]] == [(1, 8, 0.75), (4, 64, 0.5)]
    assert lengths["mode"] == "auto" and lengths["exact"] == {"m": False}
    text = console_summary(summary)
    assert (
        "  output lengths: the server stopped early, under 90% of the tokens asked at 8 users (0.75), 64 users (0.50): "
        "those steps offered less decode load than planned; the server does not honour min_tokens, so these are the "
        "model's own lengths" in text.splitlines()
    )
    run.run_meta["output_length"] = {"mode": "cap", "exact": {"m": False}}
    assert "--output-length auto asks for exact lengths" in console_summary(build_summary(run, Sla(), Prices()))
    run.run_meta["output_length"] = {"mode": "exact", "exact": {"m": True}}
    assert "asked for exact lengths, which the server ignored" in console_summary(build_summary(run, Sla(), Prices()))
