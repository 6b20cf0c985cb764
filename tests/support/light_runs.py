"""The light end-to-end runs that several test modules read (the headless sweep on both paths and with the defaults,
the report's baseline, a plain locustfile's run, a run given a bad baseline, the browser's report), made once, at the
same time (:func:`make_all`, behind the session fixture ``light_runs`` of tests/integration/conftest.py). Each is a
few users against a simulator of its own, so together they fit two cores. The fast path's sweep also scrapes every
kind of hostile metrics endpoint (tests/support/hostile_metrics.py): its timings must still be the truth's."""

from __future__ import annotations

import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

from tests.support.procs import ROOT, at_once, clean_env, run_locust, server, sim

TTFT_MS, ITL_MS, MAX_TOKENS = 150.0, 10.0, 16
"""The headless sweep's pacing simulator: every TTFT 150 ms, every gap 10 ms, 16 tokens an answer."""

SHORT = (
    "--headless",
    "--steps",
    "2,4,8",
    "--step-duration",
    "4s",
    "--warmup",
    "1s",
    "--max-tokens",
    "16",
    "--sim-args",
    "--ttft-ms 50 --itl-ms 5 --capacity 64",
)
"""The report's baseline plan (and the gate's runs against it)."""


def sweep(out: Path, path: str, *extra: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The headless sweep against the pacing truth, on the fast path (``auto``) or the library path (``off``)."""
    proc = run_locust(
        "--headless", "--csv", str(out / "run"), "--steps", "2,4,8", "--step-duration", "5s",
        "--max-tokens", str(MAX_TOKENS), "--fast-path", path,
        "--sim-args", f"--ttft-ms {TTFT_MS} --itl-ms {ITL_MS} --capacity 64", *extra, cwd=out,
    )  # fmt: skip
    return proc, out


def readme_run(out: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The README's first command, made short: the defaults but two steps of 5 s."""
    proc = run_locust("--headless", "--csv", str(out / "run"), "--steps", "2,4", "--step-duration", "5s", cwd=out)
    return proc, out


def baseline_run(out: Path) -> Path:
    proc = run_locust(*SHORT, "--csv", str(out / "run"), "--llm-report", str(out / "report"), cwd=out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def plain_locustfile_run(out: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Any locustfile's run (its own shape, plain requests) with Locust's full history."""
    with sim("--ttft-ms", "1", "--itl-ms", "1", "--capacity", "8") as base:
        cmd = [
            sys.executable, "-m", "locust", "-f", str(ROOT / "tests" / "support" / "plain_locustfile.py"),
            "--headless", "--host", base.rsplit("/v1", 1)[0], "--csv", str(out / "plain"), "--csv-full-history",
        ]  # fmt: skip
        return subprocess.run(cmd, cwd=out, capture_output=True, text=True, timeout=120, env=clean_env()), out


def bad_baseline_run(out: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    (out / "bad.json").write_text("{")
    one_step = ("--headless", "--steps", "2", "--step-duration", "3s", "--warmup", "1s", "--max-tokens", "8")
    return run_locust(*one_step, "--csv", str(out / "run"), "--baseline", str(out / "bad.json"), cwd=out), out


def browser_report_run(out: Path) -> Path:
    """The default simulator with an SLA and prices: every chart of report.html has something to draw."""
    proc = run_locust(
        "--headless", "--steps", "2,4,8", "--step-duration", "4s", "--warmup", "1s", "--max-tokens", "16",
        "--csv", str(out / "run"), "--llm-report", str(out / "report"), "--sla-ttft-p99-ms", "300",
        "--price-input-usd-per-mtok", "0.2", "--price-output-usd-per-mtok", "0.5", cwd=out,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out / "report" / "report.html"


class Runs(dict):  # type: ignore[type-arg]
    """The runs by name; reading one whose making raised raises that (only the tests that read it fail)."""

    def __getitem__(self, name: str) -> Any:
        value = super().__getitem__(name)
        if isinstance(value, BaseException):
            raise value
        return value


def _kept(job: Any) -> Any:
    try:
        return job()
    except Exception as exc:  # kept for the tests that read this run
        return exc


HOSTILE = ("hang", "drip", "garbage", "huge", "flap")
"""The hostile metrics endpoints the fast path's sweep scrapes, all at once (``--server-metrics``)."""


def make_all(tmp_path_factory: Any) -> Runs:
    """Every run above at once, each in a directory of its own."""

    def folder(name: str) -> Path:
        return Path(tmp_path_factory.mktemp(name))

    with server(sys.executable, "-m", "tests.support.hostile_metrics") as hostile:
        metrics = ",".join(f"{hostile}/{path}" for path in HOSTILE)
        return _make_all(folder, ("--server-metrics", metrics))


def _make_all(folder: Any, hostile: tuple[str, ...]) -> Runs:
    jobs = {
        "sweep-auto": partial(sweep, folder("sweep-auto"), "auto", *hostile),
        "sweep-off": partial(sweep, folder("sweep-off"), "off", "--locust-stats", "on"),
        "readme": partial(readme_run, folder("readme")),
        "baseline": partial(baseline_run, folder("baseline")),
        "plain-locustfile": partial(plain_locustfile_run, folder("plain")),
        "bad-baseline": partial(bad_baseline_run, folder("bad-baseline")),
        "browser": partial(browser_report_run, folder("browser")),
    }
    return Runs(at_once({name: partial(_kept, job) for name, job in jobs.items()}))
