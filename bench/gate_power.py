"""The regression gate's false-alarm rate and power, measured on synthetic pairs of runs from known distributions.

    python bench/gate_power.py [--pairs 2000] [--sizes 100,300,1000,5000] [--seed 1]

Each synthetic run has four steps (8, 16 and 32 users below its knee, 64 at it), each with ``n`` requests: log-normal
TTFTs (median 200 ms, sigma 0.6: a heavy tail, p99 about 800 ms), 8 log-normal ITL gaps a request (median 20 ms, sigma
0.3) and client failures at 0.1 %. Throughput and capacity are the same in both runs of a pair, so only the gate's
statistical checks can fire. Per size it prints the false-alarm rate when nothing changed (``--pairs`` pairs), and the
power (the share caught, over a quarter as many pairs) when every step's TTFT rises by 15, 30 and 100 % (the whole
distribution scaled) and when the failure rate goes from 0.1 % to 1 % and to 3 %. The goal, one verdict line per size:
false alarms of the whole run at most 1 %, judged against the binomial noise of the measured rate. Then the capacity
checks (``--knee-pairs`` pairs): sweeps 8-128 whose 32-user p99 sits on the knee rule's threshold, drawn twice, judged
on the points alone and with the knees' bootstraps; and the share caught when the knee truly falls from 32 to 16.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from locust_llm.measure.histogram import Histogram
from locust_llm.measure.knee import knee_resamples, latency_knee
from locust_llm.reports.compare import Comparison, compare

USERS = (8, 16, 32, 64)
TTFT_MEDIAN_MS, TTFT_SIGMA = 200.0, 0.6
ITL_MEDIAN_MS, ITL_SIGMA, GAPS = 20.0, 0.3, 8
ERROR_RATE = 0.001
GOAL = 0.01


def histogram(values_ns: np.ndarray) -> Histogram:
    """A histogram of ``values_ns`` through the histogram's vectorized path (a run of times whose gaps they are)."""
    h = Histogram()
    times = np.concatenate(([0], np.cumsum(values_ns.astype(np.int64)))).tolist()
    h.record_gap_runs([times])
    return h


def synthetic_run(
    rng: np.random.Generator, n: int, ttft_scale: float = 1.0, error_rate: float = ERROR_RATE
) -> dict[str, Any]:
    """One run's summary as the gate reads it: rows and the steps' histograms."""
    steps, hists = [], {}
    for i, users in enumerate(USERS):
        ttft = rng.lognormal(math.log(TTFT_MEDIAN_MS * 1e6 * ttft_scale), TTFT_SIGMA, n)
        itl = rng.lognormal(math.log(ITL_MEDIAN_MS * 1e6), ITL_SIGMA, GAPS * n)
        ttft_h, itl_h = histogram(ttft), histogram(itl)
        failed = int(rng.binomial(n, error_rate))
        hists[str(i + 1)] = {"ttft": ttft_h.to_wire(), "itl": itl_h.to_wire()}
        steps.append(
            {
                "step": i + 1,
                "users": users,
                "model": "m",
                "requests": n,
                "errors": failed,
                "client_requests": n,
                "client_ok": n - failed,
                "output_tok_s": 1000.0 * users,
                "ttft_p99_ms": ttft_h.quantile(0.99) / 1e6,
                "itl_p99_ms": itl_h.quantile(0.99) / 1e6,
            }
        )
    return summary_of({"recommended_users": 64, "latency_knee_users": 64}, steps, histograms=hists)


def summary_of(knee: dict[str, Any], steps: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
    """A valid run's summary.json of model ``m``, as the gate reads it."""
    head = {"schema": "locust-llm/summary", "version": 1, "model": "m", "valid": True, "invalid_reasons": []}
    return {**head, "knee": knee, "steps": steps, **more}


def caught(rng: np.random.Generator, n: int, pairs: int, **change: float) -> float:
    """The share of ``pairs`` pairs (a baseline, then a run with ``change``) that the gate calls a regression."""
    hits = 0
    for _ in range(pairs):
        hits += compare(synthetic_run(rng, n), synthetic_run(rng, n, **change)).regressed
    return hits / pairs


SWEEP = (8, 16, 32, 64, 128)
EDGE_P99_MS = (25.0, 29.0, 59.0, 2100.0, 4000.0)
"""On the edge: 32 users' p99 at 2.03x 16's, where the knee rule's threshold is 2x (the loads' ratio)."""
KNEE_32_P99_MS = (25.0, 29.0, 40.0, 2100.0, 4000.0)
KNEE_16_P99_MS = (25.0, 29.0, 200.0, 2100.0, 4000.0)


def knee_run(rng: np.random.Generator, p99s_ms: tuple[float, ...], seconds: int, per_second: int) -> dict[str, Any]:
    """A sweep's summary as the capacity checks read it: each step ``seconds`` one-second blocks of ``per_second``
    log-normal TTFTs (sigma 0.6) around its p99; the knee and its bootstrap by the report's rule (decode steps of 1 ms,
    so the rule's proportional threshold decides)."""
    blocks = []
    for p99 in p99s_ms:
        median_ns = p99 * 1e6 / math.exp(2.326 * TTFT_SIGMA)
        blocks.append([histogram(rng.lognormal(math.log(median_ns), TTFT_SIGMA, per_second)) for _ in range(seconds)])
    merged = []
    for step in blocks:
        h = Histogram()
        for block in step:
            h.merge(block)
        merged.append(h.quantile(0.99) / 1e6)
    decode = [1.0] * len(SWEEP)
    knee = latency_knee(SWEEP, merged, decode).users
    resampled = knee_resamples(SWEEP, blocks, decode, seed=int(rng.integers(1 << 30)))
    steps = [{"step": i + 1, "users": u, "model": "m"} for i, u in enumerate(SWEEP)]
    knee_fields = {
        "recommended_users": knee,
        "latency_knee_users": knee,
        "recommended_reason": "latency knee (TTFT p99)",
        "latency_knee_resampled": [list(pair) for pair in resampled or []],
    }
    return summary_of(knee_fields, steps)


def knee_alarms(
    rng: np.random.Generator,
    pairs: int,
    base: tuple[float, ...],
    cur: tuple[float, ...],
    seconds: int,
    per_second: int,
) -> tuple[float, float]:
    """The share of ``pairs`` whose capacity checks regress, judged on the points alone and with the bootstraps."""
    points = boot = 0
    for _ in range(pairs):
        a, b = knee_run(rng, base, seconds, per_second), knee_run(rng, cur, seconds, per_second)
        boot += _capacity_regressed(compare(a, b))
        for run in (a, b):
            del run["knee"]["latency_knee_resampled"]
        points += _capacity_regressed(compare(a, b))
    return points / pairs, boot / pairs


def _capacity_regressed(result: Comparison) -> bool:
    return any(c.verdict == "REGRESSION" for c in result.checks if c.metric in ("recommended", "latency_knee"))


def verdict(rate: float, pairs: int) -> str:
    """The goal judged against the measured rate's own noise: met when even its upper 3-sigma end is under it, NOT
    met when its lower end is over it, else UNSURE."""
    noise = 3 * math.sqrt(max(rate, 1 / pairs) * (1 - rate) / pairs)
    if rate + noise <= GOAL:
        return "met"
    return "NOT met" if rate - noise > GOAL else "UNSURE"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=2000, help="Pairs run per size when nothing changed.")
    parser.add_argument("--sizes", default="100,300,1000,5000", help="Requests per step, comma-separated.")
    parser.add_argument("--seed", type=int, default=1, help="Seed of every draw.")
    parser.add_argument("--knee-pairs", type=int, default=300, help="Pairs of sweeps run per capacity scenario.")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    sizes = [int(x) for x in args.sizes.split(",")]
    power_pairs = max(50, args.pairs // 4)
    header = ("requests/step", "false alarms", "p99 +15%", "p99 +30%", "p99 +100%", "errors 1%", "errors 3%", "s")
    print("  ".join(f"{h:>13}" for h in header))
    lines = []
    for n in sizes:
        started = time.monotonic()
        false = caught(rng, n, args.pairs)
        power = [caught(rng, n, power_pairs, ttft_scale=s) for s in (1.15, 1.30, 2.0)]
        power += [caught(rng, n, power_pairs, error_rate=e) for e in (0.01, 0.03)]
        took = f"{time.monotonic() - started:.0f}"
        cells = [f"{n}", f"{100 * false:.2f}%", *(f"{100 * p:.1f}%" for p in power), took]
        print("  ".join(f"{c:>13}" for c in cells), flush=True)
        lines.append(
            f"false alarms at {n} requests/step: {100 * false:.2f}% of {args.pairs} pairs "
            f"(goal <= {100 * GOAL:g}%: {verdict(false, args.pairs)})"
        )
    print("\n".join(lines))
    print(f"\ncapacity checks ({args.knee_pairs} pairs; 30 one-second blocks a step): false alarms / caught")
    print(f"{'requests/step':>13}  {'edge, points':>13}  {'edge, boot':>13}  {'fall, points':>13}  {'fall, boot':>13}")
    for per_second in (10, 33):
        edge = knee_alarms(rng, args.knee_pairs, EDGE_P99_MS, EDGE_P99_MS, 30, per_second)
        fall = knee_alarms(rng, args.knee_pairs, KNEE_32_P99_MS, KNEE_16_P99_MS, 30, per_second)
        cells = [f"{30 * per_second}", *(f"{100 * x:.1f}%" for x in (*edge, *fall))]
        print("  ".join(f"{c:>13}" for c in cells), flush=True)
        print(
            f"capacity false alarms at {30 * per_second} requests/step, with the bootstraps: {100 * edge[1]:.1f}% of "
            f"{args.knee_pairs} pairs on the edge (goal <= {100 * GOAL:g}%: {verdict(edge[1], args.knee_pairs)})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
