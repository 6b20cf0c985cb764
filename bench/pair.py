"""Two versions of the generator at once, on one core, against one simulator: which costs less CPU per token.

    python bench/pair.py [--a HEAD] [--b .] [--streams 128] [--pairs 4] [--seconds 22] [--tokens 64]

Each pair runs A and B at the same time, both ``ChatStreamUser`` pinned to one core, each with ``--streams`` streams
against its own model of one pacing simulator on the other core: whatever the machine does in the window, it does to
both. It prints each pair's CPU per token of A and B and B / A, then the median; the models swap between pairs, and
so does which starts first. ``--a``/``--b``: a checkout's directory (``.``: this one) or a git revision, checked out
into a temporary worktree removed at the end. Needs two cores, ``taskset`` and Linux's /proc. A against itself gives
the method's noise: docs/performance.md, "How the bench judges a goal".
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _at_once import Launch, run_at_once
from _common import ROOT, chat_user_cmd, cores

STARTUP_S = 8.0
"""From the generators' start to the window's: Locust's start-up, the streams' ramp and the warm-up."""


def checkout(spec: str, tmp: Path) -> Path:
    """The locust-llm directory named by ``spec``: an existing directory, or a git revision of this repository checked
    out (detached) under ``tmp``. Raises ``SystemExit`` with a one-line message when it is neither."""
    path = Path(spec)
    if path.is_dir():
        if not (path / "locust_llm").is_dir() or not (path / "locustfile.py").is_file():
            raise SystemExit(f"bench/pair.py: {spec!r} is a directory without locust_llm/ and locustfile.py")
        return path.resolve()
    known = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{spec}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    if known.returncode != 0:
        raise SystemExit(f"bench/pair.py: {spec!r} is neither a directory nor a git revision of {ROOT}")
    target = tmp / known.stdout.strip()[:12]
    if not target.exists():
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(target), known.stdout.strip()],
            check=True,
        )
    return target


def generator(root: Path, args: argparse.Namespace, tmp: str, tag: str) -> Launch:
    """``ChatStreamUser`` from ``root`` (its own ``PYTHONPATH``), for :func:`_at_once.run_at_once`."""

    def launch(url: str, model: str) -> tuple[list[str], dict[str, str], Path]:
        cmd = chat_user_cmd(
            root / "locustfile.py", url, model, args.streams, args.seconds, 2.0, args.tokens, f"{tmp}/{tag}"
        )
        return cmd, {**os.environ, "PYTHONPATH": str(root)}, root

    return launch


def one_pair(
    a: Path, b: Path, index: int, args: argparse.Namespace, server_core: int, core: int
) -> tuple[float, float, int, int]:
    """A's and B's CPU per token (µs) over one window in which both ran, and the tokens each was sent in it. A has
    the simulator's first model and starts first in even pairs, B in odd ones."""
    with tempfile.TemporaryDirectory() as tmp:
        launches = [generator(a, args, tmp, "a"), generator(b, args, tmp, "b")]
        order = launches if index % 2 == 0 else launches[::-1]
        window = run_at_once(order, seconds=args.seconds, startup_s=STARTUP_S, server_core=server_core, core=core)
    share_a, share_b = window.shares if index % 2 == 0 else window.shares[::-1]
    return share_a.us_per_token, share_b.us_per_token, share_a.tokens, share_b.tokens


def summary(ratios: list[float]) -> str:
    """``B / A = <median> [<each pair's>]``."""
    return f"B / A = {statistics.median(ratios):.3f} [{', '.join(f'{r:.3f}' for r in ratios)}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a", default="HEAD", help="Version A: a directory or a git revision (default: HEAD).")
    parser.add_argument("--b", default=".", help="Version B: a directory or a git revision (default: this checkout).")
    parser.add_argument("--streams", type=int, default=128, help="Streams of each generator (default: 128).")
    parser.add_argument("--pairs", type=int, default=4, help="Pairs of runs (default: 4).")
    parser.add_argument("--seconds", type=float, default=22.0, help="Run time of each pair (default: 22).")
    parser.add_argument("--tokens", type=int, default=64, help="Tokens per answer (default: 64).")
    args = parser.parse_args()
    for name, value, low in (("--streams", args.streams, 1), ("--pairs", args.pairs, 1), ("--tokens", args.tokens, 2)):
        if value < low:
            parser.error(f"{name} must be at least {low}, got {value}")
    if args.seconds < STARTUP_S + 5:
        parser.error(f"--seconds must be at least {STARTUP_S + 5:g} (start-up, then a window), got {args.seconds:g}")
    available = cores()
    if len(available) < 2:
        raise SystemExit(f"bench/pair.py: needs two cores (the simulator's and the generators'), this has {available}")
    server_core, core = available[0], available[1]
    tmp = Path(tempfile.mkdtemp(prefix="bench-pair-"))
    ratios = []
    try:
        a, b = checkout(args.a, tmp), checkout(args.b, tmp)
        print(
            f"A = {a}\nB = {b}\n{args.streams} streams each on core {core}, the simulator on core {server_core}",
            flush=True,
        )
        for i in range(args.pairs):
            cpu_a, cpu_b, sent_a, sent_b = one_pair(a, b, i, args, server_core, core)
            ratios.append(cpu_b / cpu_a)
            print(
                f"pair {i + 1}: A {cpu_a:.2f}  B {cpu_b:.2f} µs per token  B / A {cpu_b / cpu_a:.3f}  "
                f"(tokens {sent_a} / {sent_b})",
                flush=True,
            )
    finally:
        for path in tmp.iterdir():
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    print(summary(ratios))


if __name__ == "__main__":
    main()
