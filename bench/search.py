"""Adaptive capacity search vs a fixed sweep fine enough to give the same precision.

    python bench/search.py [--sla-ttft-p99-ms 1000] [--step-duration 30s] [--precision 10%] [--max-users 128]

Both run headless against the embedded simulator's default preset (no --host), with the same SLA, step duration
(the search's per-probe cap), warm-up and seed:

1. a fixed sweep up a geometric ladder from 8 to --max-users whose steps are at most --precision apart (8, 9, 10,
   11, ..., 128 at 10 %): its answer is the last step that meets the SLA;
2. ``--search sla --steps 8 --search-max-users MAX``: double from 8, then bisect.

It prints both answers, the simulator's answer (:func:`locust_llm.sim.truth.sla_capacity`: bisection over exact
closed-loop replays of the default engine) and the wall-time ratio search / fixed. Goal (printed as met or not):
the same answer within the precision, in at most half the fixed sweep's wall time.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import PY, ROOT, table

sys.path.insert(0, str(ROOT))

from locust_llm.config.parsers import parse_share
from locust_llm.sim.presets import preset
from locust_llm.sim.replicas import REFERENCE_WORKLOAD
from locust_llm.sim.truth import sla_capacity

START = 8


def ladder(start: int, stop: int, precision: float) -> list[int]:
    """Integers from ``start`` to ``stop``, each next one the largest at most ``precision`` above the last (and at
    least one more): the coarsest fixed sweep that brackets any crossing as finely as the search does."""
    steps = [start]
    while steps[-1] < stop:
        steps.append(min(stop, max(steps[-1] + 1, math.floor(steps[-1] * (1 + precision)))))
    return steps


def run(name: str, args: list[str], common: list[str]) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            PY,
            "-m",
            "locust",
            "-f",
            str(ROOT / "locustfile.py"),
            "--headless",
            *args,
            *common,
            "--csv",
            f"{tmp}/run",
            "--only-summary",
        ]
        print(f"bench/search: {name}: {' '.join(cmd[3:])}", file=sys.stderr, flush=True)
        started = time.monotonic()
        proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=4 * 3600)
        wall = time.monotonic() - started
        if proc.returncode != 0:
            raise SystemExit(f"bench/search: {name} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
        summary = json.loads(Path(f"{tmp}/run_llm_summary.json").read_text())
    knee = summary["knee"]
    search = summary.get("search") or {}
    return {
        "run": name,
        "steps": len(search.get("probes") or []) or len(summary.get("steps") or []),
        "answer_users": knee.get("sla_max_users"),
        "bracket": "-" if not search else f"{search['bracket'][0]}..{search['bracket'][1]}",
        "wall_s": round(wall, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sla-ttft-p99-ms", type=float, default=1000.0, help="the SLA: TTFT p99 limit (ms)")
    parser.add_argument("--step-duration", default="30s", help="fixed step length, and the search's probe cap")
    parser.add_argument("--precision", default="10%", help="the search precision, and the fixed ladder's spacing")
    parser.add_argument("--max-users", type=int, default=128, help="the top of both (fixed ladder, search bound)")
    parser.add_argument("--min-requests", type=int, default=300, help="--search-min-requests for the search")
    a = parser.parse_args()
    precision = parse_share(a.precision, "--precision")
    steps = ladder(START, a.max_users, precision)
    common = ["--sla-ttft-p99-ms", f"{a.sla_ttft_p99_ms:g}", "--step-duration", a.step_duration, "--seed", "1"]
    fixed = run("fixed sweep", ["--steps", ",".join(map(str, steps))], common)
    search = run(
        "search",
        [
            "--search",
            "sla",
            "--steps",
            str(START),
            "--search-max-users",
            str(a.max_users),
            "--search-precision",
            a.precision,
            "--search-min-requests",
            str(a.min_requests),
        ],
        common,
    )
    spec = preset("default")[0]
    truth, p99s = sla_capacity(
        spec.batch,
        REFERENCE_WORKLOAD["prompt_tokens"],
        REFERENCE_WORKLOAD["max_tokens"],
        spec.output_fraction,
        a.sla_ttft_p99_ms,
        a.max_users,
    )
    print(
        table(
            [
                fixed,
                search,
                {"run": "simulator truth", "steps": len(p99s), "answer_users": truth, "bracket": "-", "wall_s": "-"},
            ]
        )
    )
    print("simulator replay TTFT p99 (ms) by users: " + ", ".join(f"{u}: {v:.0f}" for u, v in p99s.items()))
    ratio = float(search["wall_s"]) / float(fixed["wall_s"])  # type: ignore[arg-type]
    answers = [float(v) for v in (fixed["answer_users"], search["answer_users"]) if isinstance(v, int | float)]
    tolerance = max(1.0, precision * min(answers)) if len(answers) == 2 else 0.0
    agree = len(answers) == 2 and abs(answers[0] - answers[1]) <= tolerance
    print(
        f"wall time search / fixed: {ratio:.2f} (goal <= 0.50: {'met' if ratio <= 0.5 else 'NOT met'}); "
        f"answers within the precision ({tolerance:.1f} users): {'yes' if agree else 'NO'}; "
        f"fixed ladder {len(steps)} steps x {a.step_duration}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
