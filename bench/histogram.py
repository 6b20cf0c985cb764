"""Histogram precision: what finer buckets cost against the quantisation error they remove.

    python bench/histogram.py [--samples 200000] [--precisions 7,10]

For each precision (linear bits; 10 is the default) it records the same samples, drawn like a
512-stream step at TTFT 200 ms / ITL 20 ms (ITLs of 20 ms + a few ms of jitter, TTFTs of 200 ms + queueing), and
prints, from one run: the CPU per ``record`` call (the per-token cost), per ``quantile`` call (every step end and
web UI refresh), the worker wire form's size for one step, the number of buckets held, and the worst p50/p99
error against the exact nearest-rank value. The ratio to the first precision decides: finer buckets are adopted
when recording costs no more than the noise (goal: record ratio <= 1.05).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import time

from _common import table

from locust_llm.measure.histogram import Histogram

RECORD_GOAL = 1.05


def samples(n: int, seed: int = 7) -> dict[str, list[int]]:
    rng = random.Random(seed)
    itl = [int(20e6 + rng.expovariate(1 / 0.4e6) + rng.gauss(0, 0.15e6)) for _ in range(n)]
    ttft = [int(200e6 + rng.expovariate(1 / 1.5e6) + rng.gauss(0, 0.3e6)) for _ in range(n // 64)]
    return {"itl": itl, "ttft": ttft}


def exact(values: list[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


def time_per_call(fn, calls: int, repeat: int = 5) -> float:
    """Median seconds per call over ``repeat`` timed batches."""
    runs = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        runs.append((time.process_time() - t0) / calls)
    return statistics.median(runs)


def measure(precision: int, data: dict[str, list[int]]) -> dict[str, object]:
    itl, ttft = data["itl"], data["ttft"]

    def record_all() -> None:
        h = Histogram(1000, precision)
        record = h.record
        for v in itl:
            record(v)

    h_itl, h_ttft = Histogram(1000, precision), Histogram(1000, precision)
    for value in itl:
        h_itl.record(value)
    for value in ttft:
        h_ttft.record(value)
    worst = 0.0
    for values, h in ((itl, h_itl), (ttft, h_ttft)):
        for q in (0.5, 0.99):
            worst = max(worst, abs(h.quantile(q) - exact(values, q)) / 1e6)
    record_s = time_per_call(record_all, len(itl))
    quantile_s = time_per_call(lambda: [h_itl.quantile(q) for q in (0.5, 0.9, 0.99) * 100], 300)
    return {
        "precision_bits": precision,
        "record_ns": round(record_s * 1e9, 1),
        "quantile_us": round(quantile_s * 1e6, 1),
        "buckets_itl": len(h_itl.buckets),
        "wire_bytes_step": len(json.dumps(h_itl.to_wire())) + len(json.dumps(h_ttft.to_wire())),
        "worst_quantile_err_ms": round(worst, 3),
        "itl_p99_ms": round(h_itl.quantile(0.99) / 1e6, 3),
        "exact_itl_p99_ms": round(exact(itl, 0.99) / 1e6, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=200_000, help="ITL samples per step (default: 200000).")
    parser.add_argument(
        "--precisions", default="7,10", help="Linear bits to compare; the first is the reference (default: 7,10)."
    )
    args = parser.parse_args()
    precisions = [int(p) for p in args.precisions.split(",")]
    data = samples(args.samples)
    rows = [measure(p, data) for p in precisions]
    print(table(rows))
    print()
    ref = rows[0]
    for row in rows[1:]:
        ratio = float(row["record_ns"]) / float(ref["record_ns"])  # type: ignore[arg-type]
        met = "met" if ratio <= RECORD_GOAL else "NOT met"
        print(
            f"{row['precision_bits']} bits vs {ref['precision_bits']}: record cost ratio {ratio:.2f} (goal <= "
            f"{RECORD_GOAL}: {met}); quantile {row['quantile_us']} vs {ref['quantile_us']} us; worst p50/p99 error "
            f"{row['worst_quantile_err_ms']} vs {ref['worst_quantile_err_ms']} ms"
        )


if __name__ == "__main__":
    main()
