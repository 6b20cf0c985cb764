"""report.html in a real browser (Debian's chromium, headless): every chart renders, no JavaScript error."""

import os
import re
import shutil
import subprocess

import pytest

from tests.support.procs import run_locust

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
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("browser")
    proc = run_locust(
        "--headless",
        "--steps",
        "2,4,8",
        "--step-duration",
        "4s",
        "--warmup",
        "1s",
        "--max-tokens",
        "16",
        "--csv",
        str(out / "run"),
        "--llm-report",
        str(out / "report"),
        "--sla-ttft-p99-ms",
        "300",
        "--price-input-usd-per-mtok",
        "0.2",
        "--price-output-usd-per-mtok",
        "0.5",
        cwd=out,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out / "report" / "report.html"


def test_every_chart_renders_without_javascript_errors(report, tmp_path):
    proc = headless(chromium(), tmp_path / "profile", "--dump-dom", report.as_uri())
    status = re.search(r'id="render-status">([^<]*)<', proc.stdout)
    assert status, proc.stderr[-2000:]
    # TTFT, ITL, throughput, outcomes, timeline, cost
    assert status.group(1) == "rendered 6 charts, 0 errors"
    assert proc.stdout.count('class="main-svg"') >= 6


def test_screenshot_is_not_blank(report, tmp_path):
    shot = tmp_path / "report.png"
    headless(chromium(), tmp_path / "profile", "--window-size=1280,1400", f"--screenshot={shot}", report.as_uri())
    assert shot.exists() and shot.stat().st_size > 50_000  # a page of charts, not an empty canvas
