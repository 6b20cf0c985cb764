"""What stamping a read with its turn's start saves: how late each stamp was when reads were stamped as they ran.

    python bench/turn_lag.py [--streams 128,256,512] [--seconds 25]

A pacing server (TTFT 200 ms, ITL 20 ms, every stream's token due at one instant, as a batching server's decode step
makes them) runs on one core and ``ChatStreamUser`` with full recording on the other. Every pumped read is stamped
with the moment the loop's poll returned (``locust_llm/users/pump.py``); a probe
(bench/turn_probe_locustfile.py) notes, at each read, how long after that moment the read ran. That delay is what
the stamp of each token would have been late by had it been stamped when its callback ran, measured on the same
reads in the same run: the reads before it in the turn, and any timer's greenlet due in the turn. The table gives
its percentiles over the steady window; the lateness it removes added to a TTFT or ITL p99 error wherever a
token's read sat late in a long turn.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import PY, ROOT, cores, pinned, start_server, stop, table

TTFT_MS, ITL_MS, MAX_TOKENS, WARMUP_S, STARTUP_S = 200.0, 20.0, 64, 6.0, 4.0


def quantile(values: list[int], q: float) -> float:
    """The ``q`` quantile of sorted ``values``, in ms."""
    return values[min(len(values) - 1, int(q * len(values)))] / 1e6


def run(streams: int, seconds: float, server_core: int | None, generator_core: int | None) -> dict[str, object]:
    server, url = start_server(
        [PY, "-m", "locust_llm.sim", "--port", "0", "--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS),
         "--capacity", "100000", "--context-tokens", "100000"],
        server_core,
    )  # fmt: skip
    try:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "delays.json"
            env = {**os.environ, "TURN_PROBE_OUT": str(out), "TURN_PROBE_SKIP_S": str(STARTUP_S + WARMUP_S)}
            cmd = [PY, "-m", "locust", "-f", str(ROOT / "bench" / "turn_probe_locustfile.py"), "--headless",
                   "--host", url, "--model", "sim-llm", "--steps", str(streams), "--step-duration", f"{seconds}s",
                   "--warmup", f"{WARMUP_S}s", "--max-tokens", str(MAX_TOKENS), "--csv", f"{tmp}/run",
                   "--only-summary"]  # fmt: skip
            proc = subprocess.run(pinned(cmd, generator_core), cwd=tmp, env=env, capture_output=True, text=True,
                                  timeout=seconds + 120)  # fmt: skip
            if not out.exists():
                raise RuntimeError(f"the probe wrote nothing (exit {proc.returncode}): {proc.stderr[-2000:]}")
            delays = json.loads(out.read_text())
    finally:
        stop(server)
    if not delays:
        raise RuntimeError(f"no pumped read in the steady window at {streams} streams")
    return {
        "streams": streams,
        "reads": len(delays),
        "late_p50_ms": round(quantile(delays, 0.5), 3),
        "late_p90_ms": round(quantile(delays, 0.9), 3),
        "late_p99_ms": round(quantile(delays, 0.99), 3),
        "late_p99.9_ms": round(quantile(delays, 0.999), 3),
        "late_max_ms": round(delays[-1] / 1e6, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", default="128,256,512", help="Concurrent streams (default: 128,256,512).")
    parser.add_argument("--seconds", type=float, default=25.0, help="Run time per stream count (default: 25).")
    args = parser.parse_args()
    try:
        counts = [int(s) for s in args.streams.split(",")]
    except ValueError:
        sys.exit(f"--streams must be comma-separated integers, got {args.streams!r}")
    if args.seconds <= STARTUP_S + WARMUP_S + 2:
        sys.exit(f"--seconds must be more than {STARTUP_S + WARMUP_S + 2:g} (start-up and warm-up), got {args.seconds}")
    available = cores()
    server_core, generator_core = (available[0], available[1]) if len(available) >= 2 else (None, None)
    rows = []
    for streams in counts:
        print(f"  {streams} streams ...", file=sys.stderr)
        rows.append(run(streams, args.seconds, server_core, generator_core))
    print("How long after its turn's start each pumped read ran (what a stamp taken at the read was late by):")
    print(table(rows))


if __name__ == "__main__":
    main()
