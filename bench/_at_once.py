"""Generators run *at the same time*, pinned to one core, each against its own model of one pacing simulator.

Runs one after the other on a shared machine move a generator's CPU per token by 10-20 %, more than the margins of
the CPU goals; run at once on one core, whatever the machine does in the window it does to every generator in it,
so the ratio of their CPU per token is steady to a per cent or two. ``bench/pair.py`` compares two versions of
locust-llm this way, and ``bench/generator.py`` judges its CPU goal this way by default. Sharing a core could favour
one if it changed how many tokens each gets per wake-up, so every window also counts each generator's wake-ups per
100 tokens, to compare with the same generator alone (docs/performance.md, "How the bench judges a goal").
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from _common import PY, cpu_s, pinned, start_server, steal_s, stop

__all__ = ["MODELS", "Launch", "Share", "Window", "run_at_once", "wakeups"]

MODELS = ("sim-llm", "sim-b", "sim-c", "sim-d")
"""The simulator's models, one per generator of a window (the first is the simulator's default)."""


@dataclass(frozen=True)
class Share:
    """What one generator of an at-once window spent and was sent in it."""

    cpu_s: float
    tokens: int
    """Tokens the simulator sent this generator's model in the window."""
    wakeups: int
    """Voluntary context switches of its main thread in the window (module docstring)."""

    @property
    def us_per_token(self) -> float:
        return 1e6 * self.cpu_s / self.tokens

    @property
    def wakeups_per_100_tokens(self) -> float:
        return 100 * self.wakeups / self.tokens


@dataclass(frozen=True)
class Window:
    """An at-once window: each generator's share, in the order given, and the simulator's state over it."""

    shares: list[Share]
    late_pct: float
    """Of every token the simulator sent in the window, the share (%) it wrote over 5 ms late."""
    server_steal_pct: float
    """The share (%) of the simulator's core the host took in the window."""
    steal_pct: float
    """The same for the generators' core."""


Launch = Callable[[str, str], tuple[list[str], dict[str, str] | None, Path]]
"""``launch(url, model)``: a generator's command line, its environment (None: this one's) and its directory."""


def wakeups(pid: int) -> int:
    """Voluntary context switches of process ``pid``'s main thread so far (``/proc/PID/status``), 0 where unknown."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def sim_stats(origin: str) -> dict:
    with urllib.request.urlopen(f"{origin}/sim/stats", timeout=10) as response:
        return json.load(response)  # type: ignore[no-any-return]


def run_at_once(
    launches: Sequence[Launch],
    *,
    seconds: float,
    startup_s: float,
    server_core: int | None,
    core: int | None,
    sim_args: Sequence[str] = ("--ttft-ms", "200", "--itl-ms", "20"),
) -> Window:
    """Start a simulator with one model per launch (on ``server_core``), then every generator at once (on ``core``),
    each against its own model; measure each over the window from ``startup_s`` to 2 s before ``seconds``; wait
    for them. Raises ``SystemExit`` when a generator was sent no token in the window."""
    models = MODELS[: len(launches)]
    extra = [arg for model in models[1:] for arg in ("--add-model", model)]
    proc, url = start_server(
        [
            PY,
            "-m",
            "locust_llm.sim",
            "--port",
            "0",
            *sim_args,
            "--capacity",
            "100000",
            "--context-tokens",
            "100000",
            *extra,
        ],
        server_core,
    )
    origin = url.rsplit("/v1", 1)[0]
    gens: list[subprocess.Popen[bytes]] = []
    try:
        for launch, model in zip(launches, models, strict=True):
            cmd, env, cwd = launch(url, model)
            gens.append(
                subprocess.Popen(
                    pinned(cmd, core), cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
                )
            )
        time.sleep(startup_s)

        def sample() -> tuple[list[tuple[float, int]], dict, float, float]:
            return (
                [(cpu_s(p.pid), wakeups(p.pid)) for p in gens],
                sim_stats(origin),
                steal_s(server_core),
                steal_s(core),
            )

        before = sample()
        t0 = time.monotonic()
        time.sleep(max(1.0, seconds - startup_s - 2.0))
        after = sample()
        wall = time.monotonic() - t0
        for p in gens:
            p.wait(timeout=seconds + 120)
    finally:
        for p in gens:
            if p.poll() is None:
                p.kill()
        stop(proc)
    shares = []
    for i, model in enumerate(models):
        tokens = after[1]["models"][model]["tokens_emitted"] - before[1]["models"][model]["tokens_emitted"]
        if tokens <= 0:
            raise SystemExit(f"bench: the generator on {model} was sent no tokens in an at-once window")
        shares.append(Share(after[0][i][0] - before[0][i][0], tokens, after[0][i][1] - before[0][i][1]))
    sent = sum(share.tokens for share in shares)
    late = sum(
        after[1]["models"][m]["tokens_late_over_5ms"] - before[1]["models"][m]["tokens_late_over_5ms"] for m in models
    )
    return Window(shares, 100 * late / sent, 100 * (after[2] - before[2]) / wall, 100 * (after[3] - before[3]) / wall)
