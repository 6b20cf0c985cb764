"""How many workers one master merges: locust-llm's share of the master's core, from real worker reports.

    python bench/master.py [--workers 10,100,500] [--users 512] [--repeat 3] [--recorded FILE] [--real 8]

It records every report of one real worker run (``bench/master_record_locustfile.py``), then feeds them to a master
:class:`Collector` as W workers would send them, one report per worker every 3 s. Per W it prints the bytes and the
master's CPU per report, its CPU per second (with the once-a-second work), the time to build the rows at the end and
the memory the collector holds, against Locust's own handling of the same reports. Goals: under 20 % of a core at 100
workers and under 100 % at 500; within 20 % of a goal is UNSURE. ``--real N`` checks the replay against a real run
of N worker processes. Figures: docs/kubernetes.md, "Sizing a fleet".
"""

from __future__ import annotations

import argparse
import gc
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgpack
from _common import ROOT, table
from _verdict import SINGLE_RUN_NOISE

from locust_llm.measure.health import Validity
from locust_llm.runtime.collector import REPORT_KEY, Collector

REPORT_S = 3.0  # Locust's worker report interval (locust.runners.WORKER_REPORT_INTERVAL)
GOALS = {100: 20.0, 500: 100.0}  # workers -> locust-llm's share of the master core (%) to stay under
VALIDITY = Validity(max_cpu_pct=90.0, max_lag_ms=10.0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def record(users: int, seconds: int, out: Path, processes: int = 1) -> list[dict[str, Any]]:
    """The reports of one real run: ``processes`` workers, ``users`` users in all at its second step of two of
    ``seconds`` each."""
    env = dict(os.environ, LOCUST_LLM_BENCH_RECORD=str(out))
    cmd = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(ROOT / "bench" / "master_record_locustfile.py"),
        "--headless",
        "--processes",
        str(processes),
        "--master-bind-port",
        str(port := free_port()),
        "--master-port",
        str(port),
        "--steps",
        f"{users // 2},{users}",
        "--step-duration",
        f"{seconds}s",
        "--warmup",
        "2s",
        "--max-tokens",
        "64",
        "--sim-args",
        # a batching server with room for every user: each token's gap varies with the batch, as on a real one
        f"--kv-blocks {64 * users} --max-batch {users} --max-concurrent-per-key {2 * users}",
        "--only-summary",
        "--csv",
        str(out.with_suffix("")),
    ]
    proc = subprocess.run(cmd, env=env, cwd=out.parent, capture_output=True, text=True, timeout=4 * seconds + 120)
    if proc.returncode not in (0, 3):  # 3: a step invalid (a busy machine's generator), its reports still real
        raise SystemExit(f"error: the recording run failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return load(out)


def load(path: Path) -> list[dict[str, Any]]:
    """The records of a recording: ``{"client", "cpu_s", "data"}`` per report, in the order they arrived."""
    with open(path, "rb") as f:
        records = list(msgpack.Unpacker(f, raw=False, strict_map_key=False))
    if not records:
        raise SystemExit(f"error: {path} holds no worker report")
    return records


def real_check(workers: int, users: int, seconds: int) -> None:
    """A real run of ``workers`` processes, and the replay of its reports: the master's CPU per report in each."""
    with tempfile.TemporaryDirectory() as tmp:
        print(f"a real run: {workers} workers, {users} users at most, 2 steps of {seconds} s ...", flush=True)
        records = record(users, seconds, Path(tmp) / "reports.msgpack", workers)
    reports = [r["data"] for r in records]
    real_ms = 1e3 * statistics.mean(r["cpu_s"] for r in records)
    replays = []
    for _ in range(3):
        collector = master(workers, reports)
        t0 = time.thread_time()
        for r in records:
            collector._on_worker_report(r["client"], r["data"])
        replays.append(1e3 * (time.thread_time() - t0) / len(records))
    replay_ms = statistics.median(replays)
    print(
        f"{workers} workers, {len(records)} reports: master CPU per report {real_ms:.3f} ms in the real run, "
        f"{replay_ms:.3f} ms replayed by this bench (ratio {real_ms / replay_ms:.2f})"
    )


def fake_environment(workers: int) -> SimpleNamespace:
    """What a master Collector reads of Locust's environment: the connected workers, a message sink."""
    clients = [SimpleNamespace(id=f"worker-{i}", state="running") for i in range(workers)]
    runner = SimpleNamespace(clients=SimpleNamespace(all=clients), send_message=lambda *a, **k: None)
    return SimpleNamespace(runner=runner)


def steps_of(reports: list[dict[str, Any]]) -> list[int]:
    return sorted({int(entry[0]) for report in reports for entry in report[REPORT_KEY]["stats"]})


def master(workers: int, reports: list[dict[str, Any]]) -> Collector:
    collector = Collector(fake_environment(workers), "master")
    collector.run = max(int(r[REPORT_KEY]["run"]) for r in reports)  # the recorded run's number (see Collector.reset)
    for step in steps_of(reports):
        collector.begin_step(step, 0, 2_000_000_000, processes=workers)
    return collector


def feed(workers: int, reports: list[dict[str, Any]], packed: list[bytes]) -> dict[str, float]:
    """One replay: every worker's reports in rounds of 3 s, the once-a-second work in between; CPU seconds."""
    collector = master(workers, reports)
    merge_s = second_s = 0.0
    gc.collect()
    for wire in packed:
        t0 = time.process_time()
        for w in range(workers):
            collector._on_worker_report(f"worker-{w}", msgpack.unpackb(wire, raw=False, strict_map_key=False))
        t1 = time.process_time()
        for _ in range(int(REPORT_S)):
            collector.sample_health()
            collector.rows(VALIDITY)
        merge_s += t1 - t0
        second_s += time.process_time() - t1
    collector.end()
    ends = []
    for _ in range(3):
        t0 = time.perf_counter()
        collector.rows(VALIDITY)
        ends.append(time.perf_counter() - t0)
    n = workers * len(packed)
    return {
        "per_report_ms": 1e3 * merge_s / n,
        "share_pct": 100 * (merge_s + second_s) / (len(packed) * REPORT_S),
        "rows_end_ms": 1e3 * statistics.median(ends),
    }


def reference(workers: int, reports: list[dict[str, Any]], packed_locust: list[bytes]) -> float:
    """Locust's own master work on the same reports' statistics part: CPU ms per report. (Locust is imported here:
    importing it patches the standard library, which the bench's own tests do not want.)"""
    from locust.event import Events
    from locust.stats import RequestStats, setup_distributed_stats_event_listeners

    events, stats = Events(), RequestStats()
    setup_distributed_stats_event_listeners(events, stats)
    t0 = time.process_time()
    for wire in packed_locust:
        for w in range(workers):
            events.worker_report.fire(
                client_id=f"worker-{w}", data=msgpack.unpackb(wire, raw=False, strict_map_key=False)
            )
    return 1e3 * (time.process_time() - t0) / (workers * len(packed_locust))


def memory_mb(workers: int, reports: list[dict[str, Any]], packed: list[bytes]) -> float:
    gc.collect()
    tracemalloc.start()
    collector = master(workers, reports)
    for wire in packed:
        for w in range(workers):
            collector._on_worker_report(f"worker-{w}", msgpack.unpackb(wire, raw=False, strict_map_key=False))
    gc.collect()
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del collector
    return held / 2**20


def verdict(shares: list[float], goal: float) -> str:
    if any(abs(s - goal) <= SINGLE_RUN_NOISE * goal for s in shares):
        return "UNSURE"
    met = [s < goal for s in shares]
    return "met" if all(met) else "NOT met" if not any(met) else "UNSURE"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", default="10,100,500", help="Worker counts to replay, comma-separated.")
    parser.add_argument("--users", type=int, default=512, help="Users of the recorded worker (default 512).")
    parser.add_argument("--seconds", type=int, default=9, help="Length of each recorded step, s (default 9).")
    parser.add_argument("--repeat", type=int, default=3, help="Replays per worker count (default 3).")
    parser.add_argument("--recorded", type=Path, help="Replay this recording instead of making one.")
    parser.add_argument("--keep", type=Path, help="Keep the recording made here (a file path).")
    parser.add_argument("--real", type=int, help="Only check the replay against a real run of this many workers.")
    args = parser.parse_args()
    if args.real:
        real_check(args.real, args.users, args.seconds)
        return
    try:
        counts = [int(w) for w in args.workers.split(",")]
    except ValueError:
        raise SystemExit(f"error: --workers takes whole numbers, comma-separated; got {args.workers!r}") from None

    if args.recorded:
        records = load(args.recorded)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "reports.msgpack"
            print(f"recording one worker's reports: {args.users} users, 2 steps of {args.seconds} s ...", flush=True)
            records = record(args.users, args.seconds, path)
            if args.keep:
                args.keep.write_bytes(path.read_bytes())
    reports = [r["data"] for r in records]
    ours = [{REPORT_KEY: r[REPORT_KEY]} for r in reports]
    packed = [msgpack.packb(r) for r in ours]
    packed_locust = [msgpack.packb({k: r[k] for k in ("stats", "stats_total", "errors")}) for r in reports]
    size = statistics.mean(len(p) for p in packed)
    size_locust = statistics.mean(len(p) for p in packed_locust)
    print(
        f"{len(reports)} reports of {args.users} users, steps {steps_of(ours)}: locust-llm's part "
        f"{size / 1024:.1f} KiB per report on average, Locust's own {size_locust / 1024:.1f} KiB"
    )

    rows, lines = [], []
    for workers in counts:
        runs = [feed(workers, ours, packed) for _ in range(args.repeat)]
        ref_ms = reference(workers, reports, packed_locust)
        per_report = statistics.median(r["per_report_ms"] for r in runs)
        shares = [r["share_pct"] for r in runs]
        rows.append(
            {
                "workers": workers,
                "KiB/report": f"{size / 1024:.1f}",
                "ms/report": f"{per_report:.3f}",
                "x Locust's": f"{per_report / ref_ms:.2f}" if ref_ms > 0 else "-",
                "reports/s": f"{workers / REPORT_S:.1f}",
                "core %": f"{statistics.median(shares):.1f}",
                "rows at end ms": f"{statistics.median(r['rows_end_ms'] for r in runs):.1f}",
                "held MiB": f"{memory_mb(workers, ours, packed):.1f}",
            }
        )
        if workers in GOALS:
            goal = GOALS[workers]
            shown = ", ".join(f"{s:.1f}" for s in shares)
            lines.append(
                f"{workers} workers: locust-llm share of the master core {statistics.median(shares):.1f}% "
                f"[{shown}] (goal < {goal:g}%: {verdict(shares, goal)})"
            )
    print(table(rows))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
