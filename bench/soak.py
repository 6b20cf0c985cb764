"""Generator memory over a long run: it must stay flat (bounded histograms, no per-sample lists, the server's
metrics written as they come).

    python bench/soak.py [--minutes 60] [--users 128] [--server-metrics auto|off]

Runs locust-llm against the embedded simulator at a fixed concurrency, scraping its /metrics once a second (the
default), and samples the generator's RSS every 10 s; prints the samples, the growth between the end of the first
minute and the end of the run next to the number of requests served (the reference: what a per-sample list would
have grown with), the growth per hour (a least-squares slope over the samples after the first minute; also over each
half of them) and a verdict line against the goal: under 5 MiB an hour, on the whole slope.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from _common import PY, ROOT


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--minutes",
        type=float,
        default=60.0,
        help="Minutes to run (default: 60; bounded structures fill for the first 25 or so).",
    )
    parser.add_argument("--users", type=int, default=128, help="Concurrent users (default: 128).")
    parser.add_argument(
        "--server-metrics", default="auto", help="Scrape the simulator's /metrics: auto (default) or off."
    )
    args = parser.parse_args()
    seconds = int(args.minutes * 60)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            PY,
            "-m",
            "locust",
            "-f",
            str(ROOT / "locustfile.py"),
            "--headless",
            "--steps",
            str(args.users),
            "--step-duration",
            f"{seconds}s",
            "--csv",
            f"{tmp}/soak",
            "--only-summary",
            "--server-metrics",
            args.server_metrics,
            "--sim-args",
            "--max-concurrent-per-key 100000",
        ]
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        gen = psutil.Process(proc.pid)
        samples = []
        start = time.monotonic()
        while proc.poll() is None:
            try:
                rss = gen.memory_info().rss / 2**20
            except psutil.Error:
                break
            samples.append((time.monotonic() - start, rss))
            print(f"{samples[-1][0]:7.0f} s  RSS {rss:7.1f} MiB", file=sys.stderr, flush=True)
            time.sleep(10)
        proc.wait()
        requests = _requests(Path(tmp) / "soak_stats.csv")
    after_1m = next((rss for t, rss in samples if t >= 60), samples[0][1])
    last = samples[-1][1]
    print(
        f"RSS after 1 min {after_1m:.1f} MiB, at the end {last:.1f} MiB: growth {last - after_1m:+.1f} MiB "
        f"over {args.minutes:g} min and {requests} requests ({(last - after_1m) * 2**20 / max(1, requests):.1f} "
        "bytes per request)"
    )
    later = [(t, rss) for t, rss in samples if t >= 60]
    if len(later) < 3:
        print("verdict: not sure: fewer than 3 samples after the first minute (run at least 2 minutes)")
        return
    per_hour = _slope(later) * 3600
    halves = [later[: len(later) // 2], later[len(later) // 2 :]]
    print(
        "growth per hour in each half after the first minute: "
        + ", ".join(f"{_slope(half) * 3600:+.1f} MiB/h" for half in halves)
        + " (a bounded structure still filling grows in the first, a leak in both)"
    )
    met = "met" if per_hour < GOAL_MIB_PER_HOUR else "NOT met"
    print(
        f"verdict: RSS grows {per_hour:+.1f} MiB an hour after the first minute (slope over {len(later)} samples); "
        f"goal under {GOAL_MIB_PER_HOUR:g} MiB an hour: {met}"
    )


GOAL_MIB_PER_HOUR = 5.0


def _slope(points: list[tuple[float, float]]) -> float:
    """The least-squares slope of ``points`` (MiB per second)."""
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    return sum((t - mean_t) * (y - mean_y) for t, y in points) / var if var else 0.0


def _requests(path: Path) -> int:
    import csv

    with open(path, newline="") as handle:
        return sum(int(r["Request Count"]) for r in csv.DictReader(handle) if r["Type"] == "E2E")


if __name__ == "__main__":
    main()
