"""report.html in a real browser (Debian's chromium, headless): every chart renders, no JavaScript error."""

import os
import re
import shutil
import subprocess

import pytest

pytestmark = pytest.mark.slow  # end-to-end runs: deselected by -m 'not slow'


def chromium():
    path = os.environ.get("LOCUST_LLM_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("LOCUST_LLM_REQUIRE_BROWSER"):
            pytest.fail("chromium is required here (LOCUST_LLM_REQUIRE_BROWSER is set) but was not found")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return path


def headless(binary, profile, *args):
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=15000",
    ]
    return subprocess.run([binary, *flags, *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def report(light_runs):
    """The default simulator's report with an SLA and prices (tests/support/light_runs.py)."""
    return light_runs["browser"]


def test_every_chart_renders_without_javascript_errors(report, tmp_path):
    proc = headless(chromium(), tmp_path / "profile", "--dump-dom", report.as_uri())
    status = re.search(r'id="render-status">([^<]*)<', proc.stdout)
    assert status, proc.stderr[-2000:]
    # TTFT, ITL, throughput, the server's evidence, outcomes, timeline, cost
    assert status.group(1) == "rendered 7 charts, 0 errors"
    assert proc.stdout.count('class="main-svg"') >= 7
    # what the diagnosis read, drawn: the embedded simulator's gauges per step and the refusals beside them
    for legend in ("running (median, range)", "waiting (median, range)", "KV usage (median, range)", "HTTP 429 %"):
        assert legend in proc.stdout, legend
    assert "What the diagnosis read (sim-llm)" in proc.stdout
    # every percentile with its interval: plotly draws an error bar per point of the TTFT and ITL p50/p99 traces
    assert proc.stdout.count('class="errorbar"') >= 4 * 3, proc.stdout.count('class="errorbar"')


def test_screenshot_is_not_blank(report, tmp_path):
    shot = tmp_path / "report.png"
    headless(chromium(), tmp_path / "profile", "--window-size=1280,1400", f"--screenshot={shot}", report.as_uri())
    assert shot.exists() and shot.stat().st_size > 50_000  # a page of charts, not an empty canvas
