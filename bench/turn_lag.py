"""What stamping a read with its turn's start saves: how late each stamp was when reads were stamped as they ran.

    python bench/turn_lag.py [--streams 128,256,512] [--seconds 25] [--tls]

A pacing server (every stream's token due at one instant, as a decode step makes them) runs on one core and
``ChatStreamUser`` on the other, its pumped reads stamped with the moment the loop's poll returned
(``locust_llm/http/pump.py``); a probe (bench/turn_probe_locustfile.py) notes at each read how long after that moment
it ran: how late its stamp would have been had it been taken when its callback ran. It prints those delays'
percentiles over the steady window. ``--tls``: the greenlet of each stream reads its own socket, and a read it waited
for is stamped with the start of the turn it was woken in; the table then gives how long after that start each
stamp was taken.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import PY, ROOT, cores, pinned, quantile, start_server, stop, table

TTFT_MS, ITL_MS, MAX_TOKENS, WARMUP_S, STARTUP_S = 200.0, 20.0, 64, 6.0, 4.0


def run(
    streams: int, seconds: float, server_core: int | None, generator_core: int | None, tls: bool
) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        delays = _delays(streams, seconds, server_core, generator_core, tls, Path(tmp))
    if not delays:
        raise RuntimeError(f"no stamp taken at a turn's start in the steady window at {streams} streams")
    return {
        "streams": streams,
        "reads": len(delays),
        "late_p50_ms": round(quantile(delays, 0.5), 3),
        "late_p90_ms": round(quantile(delays, 0.9), 3),
        "late_p99_ms": round(quantile(delays, 0.99), 3),
        "late_p99.9_ms": round(quantile(delays, 0.999), 3),
        "late_max_ms": round(delays[-1] / 1e6, 3),
    }


def _delays(
    streams: int, seconds: float, server_core: int | None, generator_core: int | None, tls: bool, tmp: Path
) -> list[int]:
    """One run: the probe's sorted delays (ns)."""
    https = ["--tls", "--tls-dir", str(tmp)] if tls else []
    server, url = start_server(
        [
            PY,
            "-m",
            "locust_llm.sim",
            "--port",
            "0",
            "--ttft-ms",
            str(TTFT_MS),
            "--itl-ms",
            str(ITL_MS),
            "--capacity",
            "100000",
            "--context-tokens",
            "100000",
            *https,
        ],
        server_core,
    )
    try:
        out = tmp / "delays.json"
        env = {**os.environ, "TURN_PROBE_OUT": str(out), "TURN_PROBE_SKIP_S": str(STARTUP_S + WARMUP_S)}
        cmd = [
            PY,
            "-m",
            "locust",
            "-f",
            str(ROOT / "bench" / "turn_probe_locustfile.py"),
            "--headless",
            "--host",
            url,
            "--model",
            "sim-llm",
            "--steps",
            str(streams),
            "--step-duration",
            f"{seconds}s",
            "--warmup",
            f"{WARMUP_S}s",
            "--max-tokens",
            str(MAX_TOKENS),
            "--csv",
            f"{tmp}/run",
            "--only-summary",
            *(["--ca-bundle", str(tmp / "sim-ca.pem")] if tls else []),
        ]
        proc = subprocess.run(
            pinned(cmd, generator_core), cwd=tmp, env=env, capture_output=True, text=True, timeout=seconds + 120
        )
        if not out.exists():
            raise RuntimeError(f"the probe wrote nothing (exit {proc.returncode}): {proc.stderr[-2000:]}")
        return json.loads(out.read_text())  # type: ignore[no-any-return]
    finally:
        stop(server)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", default="128,256,512", help="Concurrent streams (default: 128,256,512).")
    parser.add_argument("--seconds", type=float, default=25.0, help="Run time per stream count (default: 25).")
    parser.add_argument(
        "--tls", action="store_true", help="Serve HTTPS: measure the stamps of reads a stream's greenlet waited for."
    )
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
        rows.append(run(streams, args.seconds, server_core, generator_core, args.tls))
    what = "HTTPS read waited for was stamped" if args.tls else "pumped read ran"
    print(f"How long after its turn's start each {what} (what a stamp taken then was late by):")
    print(table(rows))


if __name__ == "__main__":
    main()
