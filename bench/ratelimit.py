"""Testing a rate-limited endpoint: naive retries vs honouring Retry-After vs falling back to another model.

    python bench/ratelimit.py [--users 32] [--seconds 40] [--cap 16]

A simulated provider caps each API key at --cap concurrent requests on sim-llm and answers HTTP 429 with
Retry-After: 1 s beyond it (sim-llm-mini, its second model, has its own cap of 64). The same load is run three
times — --retry-policy naive, --retry-policy honor, and honor with --fallback-models sim-llm-mini — and the
simulator's own counters (429s sent, clients that came back before Retry-After) are printed next to what the
users got (successful client requests per second and their client-perceived latency, waits and retries included).
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

from _common import PY, ROOT, start_server, stop, table

VARIANTS = {
    "naive": ["--retry-policy", "naive"],
    "honor": ["--retry-policy", "honor"],
    "honor + fallback": ["--retry-policy", "honor", "--fallback-models", "sim-llm-mini"],
}


def run(variant: str, args: argparse.Namespace) -> dict[str, object]:
    sim_cmd = [
        PY,
        "-m",
        "locust_llm.sim",
        "--port",
        "0",
        "--max-concurrent-per-key",
        str(args.cap),
        "--retry-after-s",
        "1",
    ]
    proc, url = start_server(sim_cmd, None)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [
                PY,
                "-m",
                "locust",
                "-f",
                str(ROOT / "locustfile.py"),
                "--headless",
                "--host",
                url,
                "--model",
                "sim-llm",
                "--steps",
                str(args.users),
                "--step-duration",
                f"{args.seconds}s",
                "--csv",
                f"{tmp}/run",
                "--only-summary",
                *VARIANTS[variant],
            ]
            subprocess.run(cmd, cwd=ROOT, capture_output=True, timeout=args.seconds + 120, check=False)
            with open(Path(tmp) / "run_llm_steps.csv", newline="") as handle:
                rows = {r["model"]: r for r in csv.DictReader(handle)}
        with urllib.request.urlopen(url.rsplit("/v1", 1)[0] + "/sim/stats", timeout=10) as resp:
            served = json.load(resp)["models"]
    finally:
        stop(proc)
    primary = rows["sim-llm"]
    duration = float(primary["duration_s"])
    sent_429 = sum(m["rejected_429"] for m in served.values())
    early = sum(m["early_returns_after_429"] for m in served.values())
    return {
        "client": variant,
        "429s sent/s": round(sent_429 / (args.seconds + 5), 1),
        "early returns": early,
        "ok client req/s": round(int(primary["client_ok"]) / duration, 2),
        "client p50 ms": primary["client_e2e_p50_ms"],
        "client p99 ms": primary["client_e2e_p99_ms"],
        "retries": primary["retries"],
        "fallbacks": rows.get("sim-llm-mini", {}).get("fallbacks", 0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=32, help="Concurrent users (default: 32).")
    parser.add_argument("--seconds", type=int, default=40, help="Length of each run (default: 40).")
    parser.add_argument("--cap", type=int, default=16, help="Concurrent requests per key on sim-llm (default: 16).")
    args = parser.parse_args()
    rows = []
    for variant in VARIANTS:
        print(f"  running {variant} ...", file=sys.stderr, flush=True)
        rows.append(run(variant, args))
    print(table(rows))


if __name__ == "__main__":
    main()
