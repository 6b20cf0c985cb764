"""The regression gate's false-alarm rate and power, measured on synthetic pairs of runs from known distributions.

    python bench/gate_power.py [--pairs 2000] [--sizes 100,300,1000,5000] [--seed 1]

Each synthetic run has four steps (8, 16 and 32 users below its knee, 64 at it), each with ``n`` requests: log-normal
TTFTs (median 200 ms, sigma 0.6: a heavy tail, p99 about 800 ms), 8 log-normal ITL gaps a request (median 20 ms, sigma
0.3) and client failures at 0.1 %. Throughput and capacity are the same in both runs of a pair, so only the gate's
statistical checks can fire. Per size it prints the false-alarm rate when nothing changed (``--pairs`` pairs), and the
power (the share caught, over a quarter as many pairs) when every step's TTFT rises by 15, 30 and 100 % (the whole
distribution scaled) and when the failure rate goes from 0.1 % to 1 % and to 3 %. The goal, one verdict line per size:
false alarms of the whole run at most 1 %, judged against the binomial noise of the measured rate.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from locust_llm.measure.histogram import Histogram
from locust_llm.reports.compare import compare

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


def synthetic_run(rng: np.random.Generator, n: int, ttft_scale: float = 1.0, error_rate: float = ERROR_RATE) -> dict:
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
    return {
        "schema": "locust-llm/summary",
        "version": 1,
        "model": "m",
        "valid": True,
        "invalid_reasons": [],
        "knee": {"recommended_users": 64, "latency_knee_users": 64},
        "steps": steps,
        "histograms": hists,
    }


def caught(rng: np.random.Generator, n: int, pairs: int, **change: float) -> float:
    """The share of ``pairs`` pairs (a baseline, then a run with ``change``) that the gate calls a regression."""
    hits = 0
    for _ in range(pairs):
        hits += compare(synthetic_run(rng, n), synthetic_run(rng, n, **change)).regressed
    return hits / pairs


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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
