"""Where a simulator step's lateness comes from: a per-step trace of its writes, and what a precise start would give.

    python bench/sim_steps.py [--streams 512] [--seconds 12] [--sched auto|fifo|normal]

Runs the simulator as ``bench/sim_bench.py`` does, with every step traced: when it was due, its alarm, when its
chunks were made, the instant its writes were to begin (``locust_llm/sim/timing.py``), its first and last write and
its tokens. For the steady window's full steps it prints how many started precisely, how early the first write went
and how late the last, the wake delay, the start error and the cost per write; then the token lateness rebuilt from
the trace, as it was and with a perfect start, beside ``/sim/stats``' own and the share of the window the simulator
waited for its core.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

from _common import PY, ROOT, SCHED_CHOICES, SCHED_HELP, cores, pinned, realtime_wanted, wait_s
from sim_bench import MAX_TOKENS, SIM_ARGS, fetch

from locust_llm.sim.timing import WINDOW

TRACED = r"""
import atexit, json, sys, time
import locust_llm.sim.replicas as runtime
out, steps = sys.argv.pop(1), []
written, write = runtime.Replica._written, runtime.Replica._write

def traced_write(self, made):
    self.bench_span = write(self, made)
    return self.bench_span

def traced_written(self, made):
    written(self, made)
    steps.append((made.due, made.planned, made.ready, made.start, *self.bench_span, len(made.taken)))

runtime.Replica._write, runtime.Replica._written = traced_write, traced_written
atexit.register(lambda: json.dump(steps, open(out, "w")))
from locust_llm.sim.command import main
sys.exit(main(sys.argv[1:]))
"""
"""The simulator with ``Replica._written`` traced: (due, planned, ready, the writes' instant or 0, first write's
start, last write's end, tokens) per step."""


def run(streams: int, seconds: float, realtime: bool = False) -> tuple[list[list[int]], dict, int, float]:
    """Run the traced simulator (``--realtime`` when ``realtime``) and its client; the steps, ``/sim/stats`` at the
    window's end, the window's start, and the share of the window (%) the simulator was ready while another task had
    its core."""
    available = cores()
    server_core, client_core = (available[0], available[1]) if len(available) >= 2 else (None, None)
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "steps.json"
        cmd = [PY, "-c", TRACED, str(trace), "--port", "0", *SIM_ARGS, *(["--realtime"] if realtime else [])]
        proc = subprocess.Popen(
            pinned(cmd, server_core), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        assert proc.stdout is not None
        url = None
        while url is None:
            line = proc.stdout.readline()
            if not line:
                raise SystemExit("sim_steps: the simulator did not start")
            match = re.search(r"listening on (https?://\S+)", line)
            url = match.group(1) if match else None
        origin = url.rsplit("/v1", 1)[0]
        client_cmd = [
            PY,
            str(ROOT / "bench" / "stream_client.py"),
            url,
            "bench",
            str(streams),
            str(MAX_TOKENS),
            str(seconds),
        ]
        client = subprocess.Popen(pinned(client_cmd, client_core), stdout=subprocess.DEVNULL)
        time.sleep(2.0)  # connections open and streams settle
        fetch(origin + "/sim/reset-lateness", "POST")
        start, wait0 = time.monotonic_ns(), wait_s(proc.pid)
        time.sleep(max(1.0, seconds - 3.0))
        stats = fetch(origin + "/sim/stats")
        wait = 100 * (wait_s(proc.pid) - wait0) / ((time.monotonic_ns() - start) / 1e9)
        client.wait(timeout=seconds + 120)
        proc.terminate()
        proc.wait(timeout=30)
        return json.loads(trace.read_text()), stats, start, wait


def _q(values: list[float], q: float) -> float:
    """The ``q`` quantile of sorted ``values``."""
    return values[min(len(values) - 1, int(q * len(values)))]


def reconstruct(steps: list[list[int]], precise: bool) -> list[float]:
    """Each token's |written - due| (ms), its step's writes spread evenly over their span; with ``precise``, each
    step's writes begin at the due time less half the span the previous steps' median cost per write expects."""
    errors, costs = [], []
    for due, _planned, _ready, _start, begin, end, tokens in steps:
        if not tokens:
            continue
        cost = (end - begin) / tokens
        start = due - tokens * median(costs[-WINDOW:]) / 2 if precise and costs else begin
        errors += [abs(start + k * cost - due) / 1e6 for k in range(1, tokens + 1)]
        costs.append(cost)
    return sorted(errors)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=512, help="Concurrent streams (default: 512).")
    parser.add_argument("--seconds", type=float, default=12.0, help="Client run time (default: 12).")
    parser.add_argument("--sched", choices=SCHED_CHOICES, default="auto", help=SCHED_HELP)
    args = parser.parse_args()
    if args.streams < 2 or args.seconds < 5:
        parser.error(f"--streams must be at least 2 and --seconds at least 5, got {args.streams} and {args.seconds}")
    realtime = realtime_wanted(args.sched, own_core=len(cores()) >= 2)
    steps, stats, start, wait = run(args.streams, args.seconds, realtime)
    window = [s for s in steps if s[0] >= start]
    full = [s for s in window if s[6] >= args.streams // 2]
    print(
        f"{args.streams} streams: {len(window)} steps in the window, {len(full)} of at least half the streams; "
        f"the simulator under {stats.get('scheduling', '?')} scheduling, ready with its core taken {wait:.2f} % "
        "of the window"
    )
    precise = [(start, begin) for _d, _p, _r, start, begin, _e, _n in full if start]
    late = sum(begin - start > 50_000 for start, begin in precise)
    print(f"  {len(precise)} of them started precisely, {late} of those over 50 us after their instant")
    columns = {
        "first write early (ms)": [(due - begin) / 1e6 for due, _p, _r, _s, begin, _e, _n in full],
        "last write late (ms)": [(end - due) / 1e6 for due, _p, _r, _s, _b, end, _n in full],
        "wake delay (ms)": [(ready - planned) / 1e6 for _d, planned, ready, _s, _b, _e, _n in full],
        "made to written (ms)": [(begin - ready) / 1e6 for _d, _p, ready, _s, begin, _e, _n in full],
        "start error (us)": [(begin - start) / 1e3 for start, begin in precise] or [0.0],
        "cost per write (us)": [(end - begin) / n / 1e3 for _d, _p, _r, _s, begin, end, n in full],
    }
    for name, values in columns.items():
        values.sort()
        cells = "  ".join(f"p{int(q * 100)} {_q(values, q):7.3f}" for q in (0.1, 0.5, 0.9, 0.99))
        print(f"  {name:24s} {cells}  max {values[-1]:7.3f}")
    for name, precise in (("as written", False), ("with a precise start", True)):
        errors = reconstruct(window, precise)
        cells = "  ".join(f"p{int(q * 100)} {_q(errors, q):6.3f}" for q in (0.5, 0.9, 0.99))
        print(f"  token lateness, {name:22s} {cells} ms")
    late = stats["lateness_ms"]
    print(
        f"  /sim/stats lateness: p50 {late['p50']:.3f}  p99 {late['p99']:.3f} ms; early p99 "
        f"{stats['early_ms']['p99']:.3f} ms"
    )


if __name__ == "__main__":
    sys.exit(main())
