"""Generator accuracy and cost: locust-llm's user against a minimal asyncio + aiohttp client and three floors.

    python bench/generator.py [--streams 128,256,512] [--seconds 25] [--max-tokens 64[,256]] [--tls] [--turns 4]
                              [--repeat 3] [--generators ...] [--cpu at-once|alone] [--api responses,messages]

A pacing server with known TTFT (200 ms) and ITL (20 ms) runs on one core, each generator alone on the other. Per
stream count it prints, side by side from one run, each generator's TTFT/ITL p50/p99 errors (against what the
server delivered, ``*_vs_sent_ms``, and against the schedule, ``*_err_ms``) and CPU per streamed token, for
``ChatStreamUser`` with full recording, the reference (bench/aiohttp_client.py) and the floors (bench/raw_client.py
on uvloop and asyncio, bench/raw_gevent_client.py on gevent). The goals are printed met, NOT met or UNSURE
(bench/_verdict.py): CPU per token <= 1.5x each floor, judged from pairs run at once (bench/_at_once.py); TTFT p99
error <= the floor's + 1 ms; ITL p99 error <= the floor's + 0.6 ms. ``--tls`` also runs over HTTPS, ``--turns N``
as conversations (goal <= 1.05x the single turn), and two answer lengths split CPU into per-token and per-request
parts. ``--api NAMES`` runs instead ``ChatStreamUser`` on each API and on chat at once (goal <= 1.1x chat's CPU).
What each column means and the current figures: docs/performance.md, "The generator".
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from _at_once import run_at_once, wakeups
from _common import PY, ROOT, chat_user_cmd, cores, cpu_s, pinned, start_server, steal_s, stop, table
from _verdict import (
    AT_ONCE_NOISE,
    SERVER_BEHIND_PCT,
    always,
    cpu_ratio,
    difference,
    disturbed,
    judge,
    near,
    reads_alike,
    split_cost,
)

TTFT_MS, ITL_MS, MAX_TOKENS, WARMUP_S = 200.0, 20.0, 64, 6.0
MIN_SECONDS = WARMUP_S + 4.0
"""The shortest ``--seconds``: the warm-up, a measured window of 2 s, and the 2 s left out before the end."""
TURNS_GOAL = 1.05
API_GOAL = 1.1  # x chat's CPU per token, --api
CPU_GOAL = 1.5  # x the floor's CPU per token
TTFT_P99_GOAL_MS, ITL_P99_GOAL_MS = 1.0, 0.6  # above the floor's p99 error
FLOORS = ("raw", "raw-asyncio", "raw-gevent")


CA: dict[str, str] = {}  # origin -> the CA file of a server started with --tls


def sim_call(origin: str, path: str, post: bool = False) -> dict:
    """The pacing server's JSON answer at ``path`` (POST when ``post``)."""
    context = ssl.create_default_context(cafile=CA[origin]) if origin in CA else None
    request = urllib.request.Request(origin + path, data=b"" if post else None, method="POST" if post else "GET")
    with urllib.request.urlopen(request, timeout=30, context=context) as resp:
        return json.load(resp)


def served_tokens(origin: str) -> tuple[int, int, dict]:
    """Tokens the server has streamed, how many of them over 5 ms late, and its stats."""
    stats = sim_call(origin, "/sim/stats")
    models = stats["models"].values()
    return sum(m["tokens_emitted"] for m in models), sum(m["tokens_late_over_5ms"] for m in models), stats


@dataclass
class Window:
    """What a generator spent and the server streamed in the measuring window, and the generator's output."""

    cpu_s: float
    tokens: int
    late_tokens: int
    """Of ``tokens``, those the server wrote over 5 ms late."""
    wall_s: float
    server_steal_s: float
    """CPU time the host took from the server's core in the window (``/proc/stat`` steal)."""
    steal_s: float
    """The same for the generator's core."""
    server: dict
    """The server's ``/sim/stats`` at the window's end: its lateness and what it delivered, over the window."""
    out: str
    wakeups: int = 0
    """The generator's wake-ups in the window (bench/_at_once.py ``wakeups``)."""


def measure(
    cmd: list[str], core: int | None, origin: str, seconds: float, startup_s: float, server_core: int | None = None
) -> Window:
    """Run ``cmd`` (pinned to ``core``) for its ``seconds``; measure its CPU, the tokens the server streamed and what
    the host took from the server's core (``server_core``; every core when ``None``) and from ``core``, between the
    end of start-up plus warm-up and 2 s before its end; wait for it to finish."""
    proc = subprocess.Popen(pinned(cmd, core), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    time.sleep(startup_s + WARMUP_S)

    def sample() -> tuple[float, int, int, dict, float, float, int]:
        tokens, late, stats = served_tokens(origin)
        return cpu_s(proc.pid), tokens, late, stats, steal_s(server_core), steal_s(core), wakeups(proc.pid)

    sim_call(origin, "/sim/reset-lateness", post=True)  # the server's lateness over the window measured, not start-up
    cpu0, tokens0, late0, _, steal0, own0, woke0 = sample()
    t0 = time.monotonic()
    time.sleep(seconds - WARMUP_S - 2.0)
    cpu1, tokens1, late1, stats, steal1, own1, woke1 = sample()
    wall = time.monotonic() - t0
    out, _ = proc.communicate(timeout=seconds + 120)
    return Window(
        cpu1 - cpu0, tokens1 - tokens0, late1 - late0, wall, steal1 - steal0, own1 - own0, stats, out, woke1 - woke0
    )


def reference_cmd(
    kind: str, url: str, model: str, streams: int, max_tokens: int, seconds: float, ca: str | None = None
) -> list[str]:
    """The command line of the reference client or a floor (``kind``) against ``url``'s ``model``."""
    client = {"aiohttp": "aiohttp_client.py", "raw-gevent": "raw_gevent_client.py"}.get(kind, "raw_client.py")
    cmd = [
        PY,
        str(ROOT / "bench" / client),
        url,
        model,
        str(streams),
        str(max_tokens),
        str(seconds),
        str(WARMUP_S),
        *([ca] if ca else []),
    ]
    return cmd + (["asyncio"] if kind == "raw-asyncio" else [])


def run_generator(
    kind: str,
    url: str,
    streams: int,
    seconds: float,
    core: int | None,
    server_core: int | None = None,
    max_tokens: int = MAX_TOKENS,
) -> dict:
    origin = url.rsplit("/v1", 1)[0]
    with tempfile.TemporaryDirectory() as tmp:
        if kind.startswith("locust-llm"):
            locustfile = "locustfile_sdk.py" if kind == "locust-llm-sdk" else "locustfile.py"
            cmd = chat_user_cmd(ROOT / locustfile, url, "sim-llm", streams, seconds, WARMUP_S, max_tokens, f"{tmp}/run")
            cmd += ["--ca-bundle", CA[origin]] if origin in CA else []
            cmd += ["--turns", kind.split("--turns ")[1]] if "--turns " in kind else []
        else:
            cmd = reference_cmd(kind, url, "sim-llm", streams, max_tokens, seconds, CA.get(origin))
        reference = kind in ("aiohttp", *FLOORS)
        w = measure(cmd, core, origin, seconds, 0.5 if reference else 2.5, server_core)
        out = w.out
        row = json.loads(out.strip().splitlines()[-1]) if reference else _steps_row(Path(tmp) / "run_llm_steps.csv")
    cpu, tokens, wall = w.cpu_s, w.tokens, w.wall_s
    sent = w.server["delivered_ms"]
    return {
        "generator": kind + (" (TLS)" if origin in CA else ""),
        "streams": streams,
        "tokens": max_tokens,
        "ttft_p50_err_ms": round(float(row["ttft_p50_ms"]) - TTFT_MS, 2),
        "ttft_p99_err_ms": round(float(row["ttft_p99_ms"]) - TTFT_MS, 2),
        # from the intended start (the reference client has no such notion: its own TTFT)
        "client_ttft_p99_err_ms": round(float(row.get("client_ttft_p99_ms", row["ttft_p99_ms"])) - TTFT_MS, 2),
        "itl_p50_err_ms": round(float(row["itl_p50_ms"]) - ITL_MS, 2),
        "itl_p99_err_ms": round(float(row["itl_p99_ms"]) - ITL_MS, 2),
        # against what the server delivered (its writes' ends), the goals' figures
        "ttft_p99_vs_sent_ms": round(float(row["ttft_p99_ms"]) - sent["ttft"]["p99"], 2),
        "itl_p99_vs_sent_ms": round(float(row["itl_p99_ms"]) - sent["itl"]["p99"], 2),
        "cpu_pct": round(100 * cpu / wall, 1),
        "us_per_token": round(1e6 * cpu / tokens, 1) if tokens else "-",
        "streams_per_core_at_80pct": round(0.8 / (cpu / tokens) / (1000 / ITL_MS)) if tokens else "-",
        "wakeups_per_100_tokens": round(100 * w.wakeups / tokens, 1) if tokens else "-",
        "server_late_p99_ms": round(w.server["lateness_ms"]["p99"], 2),
        "server_late_5ms_pct": round(100 * w.late_tokens / tokens, 2) if tokens else "-",
        "server_steal_pct": round(100 * w.server_steal_s / wall, 1),
        "steal_pct": round(100 * w.steal_s / wall, 1),
    }


def _steps_row(path: Path) -> dict:
    import csv

    with open(path, newline="") as handle:
        return next(csv.DictReader(handle))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", default="128,256,512", help="Concurrent streams (default: 128,256,512).")
    parser.add_argument("--seconds", type=float, default=25.0, help="Run time per measurement (default: 25).")
    parser.add_argument(
        "--max-tokens",
        default=str(MAX_TOKENS),
        help=f"Tokens per response (default: {MAX_TOKENS}); more tokens spread each request's fixed cost thinner. "
        "Several, comma-separated (64,256): every generator runs at each, and its CPU is split into a cost per token "
        "and a cost per request.",
    )
    parser.add_argument(
        "--generators",
        default="locust-llm,aiohttp,raw,raw-asyncio,raw-gevent",
        help="Which generators: locust-llm, aiohttp (the reference), raw (the floor: a bare asyncio Protocol on "
        "uvloop), raw-asyncio (the same on asyncio's own loop), raw-gevent (the same in gevent read callbacks), "
        "locust-llm-sdk (default: locust-llm,aiohttp,raw,raw-asyncio,raw-gevent).",
    )
    parser.add_argument(
        "--turns",
        type=int,
        default=None,
        help="Also run locust-llm as conversations of this many turns and print its CPU per token against the "
        f"single-turn run's (goal <= {TURNS_GOAL}).",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="Measure every generator this many times, interleaved (a shared machine's noise is +-10 %% per run); "
        "the ratios use each generator's median (default: 1).",
    )
    parser.add_argument(
        "--cpu",
        choices=("at-once", "alone"),
        default="at-once",
        help="How the CPU goal (locust-llm <= 1.5x each floor) is judged: at-once (default) runs locust-llm and each "
        "floor of --generators at the same time on the generator's core, each against its own model of one pacing "
        "server, once per repeat (bench/_at_once.py: steady to 1-2 %%, where runs one after the other move by "
        "10-20 %%); alone judges it from the runs one after the other, as the accuracy goals are.",
    )
    parser.add_argument(
        "--tls",
        action="store_true",
        help="Also serve HTTPS (the simulator's --tls, its CA trusted "
        "by every generator): each generator runs over plain HTTP and over TLS, in the same run.",
    )
    parser.add_argument(
        "--api",
        default=None,
        help="Instead of --generators: run locust-llm on each of these APIs (responses, messages, completions; "
        f"comma-separated) and on chat at the same time, and judge its CPU per token against chat's (goal <= "
        f"{API_GOAL}x).",
    )
    args = parser.parse_args()
    apis = [name.strip() for name in (args.api or "").split(",") if name.strip()]
    unknown = [name for name in apis if name not in ("responses", "messages", "completions")]
    if unknown:
        parser.error(f"--api takes responses, messages or completions, comma-separated; got {args.api!r}")
    if args.turns is not None and args.turns < 2:
        parser.error(f"--turns must be an integer >= 2, got {args.turns}")
    counts = _ints(args.streams, 1)
    if counts is None:
        parser.error(f"--streams must be integers >= 1, comma-separated; got {args.streams!r}")
    lengths = _lengths(args.max_tokens)
    if lengths is None:
        parser.error(f"--max-tokens must be integers >= 2, comma-separated, none twice; got {args.max_tokens!r}")
    if args.repeat < 1:
        parser.error(f"--repeat must be an integer >= 1, got {args.repeat}")
    if not args.seconds >= MIN_SECONDS:
        parser.error(
            f"--seconds must be at least {MIN_SECONDS:g} (a {WARMUP_S:g} s warm-up, a window of at least 2 s "
            f"and 2 s before the end), got {args.seconds:g}"
        )
    generators = args.generators.split(",") + ([f"locust-llm --turns {args.turns}"] if args.turns else [])
    available = cores()
    server_core, gen_core = (available[0], available[1]) if len(available) >= 2 else (None, None)
    floors = [kind for kind in generators if kind in FLOORS] if args.cpu == "at-once" else []
    if "locust-llm" not in generators:
        floors = []
    if apis:
        api_rows = [
            api_at_once(api, streams, tokens, repeat, args.seconds, server_core, gen_core)
            for streams in counts
            for repeat in range(args.repeat)
            for tokens in lengths
            for api in apis
        ]
        print(table(api_rows))
        print()
        for line in api_verdicts(api_rows):
            print(line)
        return
    rows, together = [], []
    for streams in counts:
        for repeat in range(args.repeat):
            for tokens in lengths:
                for tls in (False, True) if args.tls else (False,):
                    for kind in generators:
                        if kind in FLOORS and tls:
                            continue  # the floor speaks plain HTTP only
                        rows.append(_one(kind, streams, tls, args.seconds, server_core, gen_core, tokens))
                for floor in floors:
                    together.append(at_once(floor, streams, tokens, repeat, args.seconds, server_core, gen_core))
    print(
        f"python: {platform.python_implementation()} {platform.python_version()} ({sys.executable}); the "
        "interpreter's build moves every generator's CPU (docs/performance.md#the-generator)"
    )
    print(table(rows))
    if together:
        print("\nCPU at once (bench/_at_once.py): locust-llm and a floor on the generator's core at the same time")
        print(table(together))
    print()
    for line in verdicts(rows, together) + split_lines(rows, min(lengths)):
        print(line)


def at_once(
    floor: str,
    streams: int,
    tokens: int,
    repeat: int,
    seconds: float,
    server_core: int | None,
    core: int | None,
) -> dict:
    """locust-llm and ``floor``, ``streams`` streams each, at the same time on ``core``: one row of the CPU goal's
    pairs. The first model, and the first start, go to locust-llm in even repeats and to the floor in odd ones."""

    print(f"  locust-llm and {floor} at once, {streams} streams each, {tokens} tokens ...", file=sys.stderr, flush=True)
    flip = repeat % 2 == 1
    with tempfile.TemporaryDirectory() as tmp:

        def ours(url: str, model: str) -> tuple[list[str], None, Path]:
            cmd = chat_user_cmd(ROOT / "locustfile.py", url, model, streams, seconds, WARMUP_S, tokens, f"{tmp}/run")
            return cmd, None, ROOT

        def reference(url: str, model: str) -> tuple[list[str], None, Path]:
            return reference_cmd(floor, url, model, streams, tokens, seconds), None, ROOT

        window = run_at_once(
            [reference, ours] if flip else [ours, reference],
            seconds=seconds,
            startup_s=2.5 + WARMUP_S,
            server_core=server_core,
            core=core,
            sim_args=("--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS)),
        )
    mine, base = window.shares[::-1] if flip else window.shares
    return {
        "streams": streams,
        "tokens": tokens,
        "floor": floor,
        "us_per_token": round(mine.us_per_token, 2),
        "floor_us_per_token": round(base.us_per_token, 2),
        "ratio": round(mine.us_per_token / base.us_per_token, 3),
        "wakeups_per_100_tokens": round(mine.wakeups_per_100_tokens, 1),
        "floor_wakeups_per_100_tokens": round(base.wakeups_per_100_tokens, 1),
        "server_late_5ms_pct": round(window.late_pct, 2),
        "server_steal_pct": round(window.server_steal_pct, 1),
        "steal_pct": round(window.steal_pct, 1),
    }


def api_at_once(
    api: str, streams: int, tokens: int, repeat: int, seconds: float, server_core: int | None, core: int | None
) -> dict:
    """locust-llm on ``api`` and on chat, ``streams`` streams each, at the same time on ``core``, each against its
    own model of one pacing server (the first start alternating by repeat): one row of the ``--api`` goal."""
    print(f"  locust-llm --api {api} and chat at once, {streams} streams each ...", file=sys.stderr, flush=True)
    flip = repeat % 2 == 1
    with tempfile.TemporaryDirectory() as tmp:

        def user(name: str) -> Callable[[str, str], tuple[list[str], None, Path]]:
            def cmd(url: str, model: str) -> tuple[list[str], None, Path]:
                run = chat_user_cmd(
                    ROOT / "locustfile.py", url, model, streams, seconds, WARMUP_S, tokens, f"{tmp}/{name}"
                )
                return [*run, "--api", name], None, ROOT

            return cmd

        window = run_at_once(
            [user("chat"), user(api)] if flip else [user(api), user("chat")],
            seconds=seconds,
            startup_s=2.5 + WARMUP_S,
            server_core=server_core,
            core=core,
            sim_args=("--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS)),
        )
    mine, chat = window.shares[::-1] if flip else window.shares
    return {
        "streams": streams,
        "tokens": tokens,
        "api": api,
        "us_per_token": round(mine.us_per_token, 2),
        "chat_us_per_token": round(chat.us_per_token, 2),
        "ratio": round(mine.us_per_token / chat.us_per_token, 3),
        "server_late_5ms_pct": round(window.late_pct, 2),
        "steal_pct": round(window.steal_pct, 1),
    }


def api_verdicts(rows: list[dict]) -> list[str]:
    """One goal line per API and stream count: CPU per token on the API over chat's, judged from the pairs at once."""
    lines = []
    for api in dict.fromkeys(row["api"] for row in rows):
        for streams in dict.fromkeys(row["streams"] for row in rows):
            mine = [row for row in rows if row["api"] == api and row["streams"] == streams]
            verdict = judge(
                mine, mine, lambda a, _b: float(a["ratio"]), lambda r: r <= API_GOAL, near(API_GOAL, AT_ONCE_NOISE)
            )
            lines.append(
                f"{streams:>4} streams: CPU per token --api {api} / chat, at once = {verdict.text(f'<= {API_GOAL}')}"
            )
    return lines


def _ints(text: str, least: int, distinct: bool = False) -> list[int] | None:
    """The comma-separated integers of ``text``, or None when one is not an integer >= ``least`` (or, ``distinct``,
    one is given twice)."""
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        return None
    if any(n < least for n in values) or (distinct and len(set(values)) != len(values)):
        return None
    return values


def _lengths(text: str) -> list[int] | None:
    """The answer lengths of ``--max-tokens`` (module docstring), or None when one is not an integer >= 2 or one is
    given twice."""
    return _ints(text, 2, distinct=True)


def split_lines(rows: list[dict], at_tokens: int = MAX_TOKENS) -> list[str]:
    """Per stream count, each generator's CPU split into a cost per token and per request (bench/_verdict.py
    ``split_cost``), and locust-llm's gap to each floor split the same way, its part per request also per token at
    ``at_tokens`` tokens per answer; nothing with one answer length."""
    runs: dict[tuple[str, int], list[dict]] = {}
    for row in rows:
        runs.setdefault((row["generator"], row["streams"]), []).append(row)
    costs = {key: cost for key, group in runs.items() if (cost := split_cost(group)) is not None}
    lengths = ", ".join(str(n) for n in sorted({row["tokens"] for row in rows if isinstance(row.get("tokens"), int)}))
    lines = [
        f"{streams:>4} streams: {kind} costs {per_token:.1f} us per token + {per_request:.0f} us per request "
        f"(fitted over {lengths} tokens per answer)"
        for (kind, streams), (per_token, per_request) in costs.items()
    ]
    for (kind, streams), (per_token, per_request) in costs.items():
        if kind.startswith(("aiohttp", "raw")):
            continue
        for floor in FLOORS:
            base = costs.get((floor, streams))
            if base is None:
                continue
            token_gap, request_gap = per_token - base[0], per_request - base[1]
            lines.append(
                f"{streams:>4} streams: {kind} minus {floor}: {token_gap:+.1f} us per token, {request_gap:+.0f} us per "
                f"request ({request_gap / at_tokens:+.1f} us per token at {at_tokens} tokens per answer)"
            )
    return lines


def verdicts(rows: list[dict], together: list[dict] | None = None) -> list[str]:
    """The goal lines: each comparison over the runs paired by repeat, judged by bench/_verdict.py (met, NOT met or
    UNSURE; a run whose pacing server fell behind is left out). With ``together`` (:func:`at_once`'s rows), the CPU
    goal against a floor is judged from those pairs, and the ratio of the runs alone is shown for information."""
    together = together or []
    lengths = sorted({row.get("tokens") for row in rows}, key=lambda n: n or 0)
    if len(lengths) > 1:  # each answer length judged on its own
        return [
            line.replace(" streams: ", f" streams, {n} tokens: ", 1)
            for n in lengths
            for line in verdicts(
                [row for row in rows if row.get("tokens") == n], [row for row in together if row.get("tokens") == n]
            )
        ]
    runs: dict[tuple[str, int], list[dict]] = {}
    for row in rows:
        runs.setdefault((row["generator"], row["streams"]), []).append(row)
    lines = [
        f"{row['streams']:>4} streams: a {row['generator']} run left out: the pacing server fell behind "
        f"({row['server_late_5ms_pct']} % of its tokens over 5 ms late > {SERVER_BEHIND_PCT} %"
        + (f"; the host took {row['server_steal_pct']} % of its core)" if "server_steal_pct" in row else ")")
        for row in rows
        if disturbed(row)
    ]
    for (kind, streams), ours in runs.items():
        if kind.startswith(("aiohttp", "raw")):
            continue
        if "--turns" in kind:
            single = runs.get(("locust-llm", streams), [])
            verdict = judge(ours, single, cpu_ratio, lambda r: r <= TURNS_GOAL, alone_unsure=near(TURNS_GOAL))
            goal = f"<= {TURNS_GOAL}"
            lines.append(f"{streams:>4} streams: CPU per token {kind} / locust-llm = {verdict.text(goal)}")
            continue
        for base in ("aiohttp" + (" (TLS)" if kind.endswith("(TLS)") else ""), *FLOORS):
            ref = runs.get((base, streams))
            if not ref:
                continue
            pairs_at_once = [row for row in together if row["floor"] == base and row["streams"] == streams]
            alike = [row for row in pairs_at_once if reads_alike(row, ours, ref)]
            unalike = len(pairs_at_once) - len(alike)
            note = f" ({unalike} pair(s) at once left out: a generator read unlike alone)" if unalike else ""
            if base in FLOORS and kind == "locust-llm" and alike:
                verdict = judge(
                    alike,
                    alike,
                    lambda a, _b: float(a["ratio"]),
                    lambda r: r <= CPU_GOAL,
                    alone_unsure=near(CPU_GOAL, AT_ONCE_NOISE),
                )
                lines.append(
                    f"{streams:>4} streams: CPU per token {kind} / {base}, at once = "
                    f"{verdict.text(f'<= {CPU_GOAL}')}{note}"
                )
                median = judge(ours, ref, cpu_ratio, lambda r: True).median
                shown = "-" if median is None else f"{median:.2f}"
                lines.append(
                    f"{streams:>4} streams: CPU per token {kind} / {base}, runs alone = {shown} (for "
                    "information: runs one after the other vary by 10-20 %)"
                )
            elif base in FLOORS:
                verdict = judge(ours, ref, cpu_ratio, lambda r: r <= CPU_GOAL, alone_unsure=near(CPU_GOAL))
                lines.append(
                    f"{streams:>4} streams: CPU per token {kind} / {base} = {verdict.text(f'<= {CPU_GOAL}')}{note}"
                )
            else:
                median = judge(ours, ref, cpu_ratio, lambda r: True).median
                shown = "-" if median is None else f"{median:.2f}"
                lines.append(f"{streams:>4} streams: CPU per token {kind} / {base} = {shown}")
        floor_name = "raw" if ("raw", streams) in runs else "raw-asyncio"
        floor = runs.get((floor_name, streams))
        if floor and not kind.endswith("(TLS)"):
            for name, budget, alike in (
                ("ttft_p99_vs_sent_ms", TTFT_P99_GOAL_MS, TTFT_P99_GOAL_MS),
                ("itl_p99_vs_sent_ms", ITL_P99_GOAL_MS, None),
            ):
                verdict = judge(ours, floor, difference(name), lambda d, b=budget: d <= b, alike, always)
                lines.append(
                    f"{streams:>4} streams: {name} {kind} minus {floor_name} = {verdict.text(f'<= +{budget} ms')}"
                )
    return lines


def _one(
    kind: str,
    streams: int,
    tls: bool,
    seconds: float,
    server_core: int | None,
    gen_core: int | None,
    max_tokens: int = MAX_TOKENS,
) -> dict:
    """One generator against a fresh pacing server (HTTPS with its own CA when ``tls``)."""
    certs = tempfile.mkdtemp(prefix="bench-tls-")
    proc, url = start_server(
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
            *(["--tls", "--tls-dir", certs] if tls else []),
        ],
        server_core,
    )
    if tls:
        CA[url.rsplit("/v1", 1)[0]] = f"{certs}/sim-ca.pem"
    try:
        print(
            f"  {kind} at {streams} streams, {max_tokens} tokens{' over TLS' if tls else ''} ...",
            file=sys.stderr,
            flush=True,
        )
        return run_generator(kind, url, streams, seconds, gen_core, server_core, max_tokens)
    finally:
        stop(proc)
        shutil.rmtree(certs, ignore_errors=True)


if __name__ == "__main__":
    main()
