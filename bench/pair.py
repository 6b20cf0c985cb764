"""Two versions of the generator at once, on one core, against one simulator: which costs less CPU per token.

    python bench/pair.py [--a HEAD] [--b .] [--streams 128] [--pairs 4] [--seconds 22] [--tokens 64]

Runs one after the other on a shared VM vary by 10-20 % (the host, the caches, the clock), so a change worth a few per
cent needs many of them to show. Here each pair runs A and B *at the same time*, both ``ChatStreamUser`` (full
recording, default settings) pinned to the same core, each with ``--streams`` streams against its own model of one
pacing simulator (TTFT 200 ms, a token every 20 ms, ``--tokens`` per answer) on the other core: whatever the machine
does in the window, it does to both. For each pair it prints A's and B's CPU per token (user + system CPU from /proc
over the steady window, divided by the tokens the simulator sent that model) and B / A, then the median and every
pair's ratio. The models swap between pairs, and so does which starts first. Run A against itself
(``--a HEAD --b HEAD``) to see the method's noise: on the project's 2-core VM (2026-12-03) four pairs gave 1.005-1.019,
against 0.914-0.935 for a change worth 8 %.

``--a`` and ``--b``: a directory holding a checkout of locust-llm (``.``: this one, with its uncommitted changes), or a
git revision of this repository, checked out into a temporary worktree that is removed at the end. Each generator
imports locust-llm from its own directory (``PYTHONPATH``); Locust, gevent and the rest are this environment's.
Needs two cores (the simulator's and the generators'), ``taskset`` and Linux's /proc.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PY, ROOT, chat_user_cmd, cores, cpu_s, pinned, start_server, stop

MODELS = ("sim-llm", "sim-b")
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
    known = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{spec}^{{commit}}"],
                           capture_output=True, text=True)  # fmt: skip
    if known.returncode != 0:
        raise SystemExit(f"bench/pair.py: {spec!r} is neither a directory nor a git revision of {ROOT}")
    target = tmp / known.stdout.strip()[:12]
    if not target.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(target),
                        known.stdout.strip()], check=True)  # fmt: skip
    return target


def tokens_by_model(origin: str) -> dict[str, int]:
    with urllib.request.urlopen(f"{origin}/sim/stats", timeout=10) as response:
        stats = json.load(response)
    return {name: int(model["tokens_emitted"]) for name, model in stats["models"].items()}


def generator(root: Path, url: str, model: str, streams: int, seconds: float, tokens: int, core: int, csv: str):
    """``ChatStreamUser`` from ``root`` against ``url``'s ``model``, pinned to ``core``."""
    cmd = chat_user_cmd(root / "locustfile.py", url, model, streams, seconds, 2.0, tokens, csv)
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.Popen(pinned(cmd, core), cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def one_pair(
    a: Path, b: Path, index: int, args: argparse.Namespace, server_core: int, core: int
) -> tuple[float, float, int, int]:
    """A's and B's CPU per token (µs) over one window in which both ran, and the tokens each was sent in it."""
    proc, url = start_server(
        [PY, "-m", "locust_llm.sim", "--port", "0", "--ttft-ms", "200", "--itl-ms", "20", "--capacity", "100000",
         "--context-tokens", "100000", "--add-model", MODELS[1]],
        server_core,
    )  # fmt: skip
    origin = url.rsplit("/v1", 1)[0]
    model_a, model_b = MODELS if index % 2 == 0 else MODELS[::-1]
    with tempfile.TemporaryDirectory() as tmp:
        first = [(a, model_a, "a"), (b, model_b, "b")]
        gens = {tag: generator(root, url, model, args.streams, args.seconds, args.tokens, core, f"{tmp}/{tag}")
                for root, model, tag in (first if index % 2 == 0 else first[::-1])}  # fmt: skip
        try:
            time.sleep(STARTUP_S)
            cpu0 = {tag: cpu_s(p.pid) for tag, p in gens.items()}
            sent0 = tokens_by_model(origin)
            time.sleep(args.seconds - STARTUP_S - 2.0)
            cpu1 = {tag: cpu_s(p.pid) for tag, p in gens.items()}
            sent1 = tokens_by_model(origin)
            for p in gens.values():
                p.wait(timeout=args.seconds + 120)
        finally:
            for p in gens.values():
                if p.poll() is None:
                    p.kill()
            stop(proc)
    sent = {m: sent1[m] - sent0[m] for m in MODELS}
    if not sent[model_a] or not sent[model_b]:
        raise SystemExit(f"bench/pair.py: a generator streamed no tokens in pair {index + 1} ({sent})")
    return (1e6 * (cpu1["a"] - cpu0["a"]) / sent[model_a], 1e6 * (cpu1["b"] - cpu0["b"]) / sent[model_b],
            sent[model_a], sent[model_b])  # fmt: skip


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
        print(f"A = {a}\nB = {b}\n{args.streams} streams each on core {core}, the simulator on core {server_core}",
              flush=True)  # fmt: skip
        for i in range(args.pairs):
            cpu_a, cpu_b, sent_a, sent_b = one_pair(a, b, i, args, server_core, core)
            ratios.append(cpu_b / cpu_a)
            print(f"pair {i + 1}: A {cpu_a:.2f}  B {cpu_b:.2f} µs per token  B / A {cpu_b / cpu_a:.3f}  "
                  f"(tokens {sent_a} / {sent_b})", flush=True)  # fmt: skip
    finally:
        for path in tmp.iterdir():
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    print(summary(ratios))


if __name__ == "__main__":
    main()
