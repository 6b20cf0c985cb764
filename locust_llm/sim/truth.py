"""What the simulator should show: the analytic steady state, and exact replays of the pure engine.

The analytic model (the knee ``S``, TTFT and ITL below and above it by Little's law, the throughput plateau) is
stated in docs/simulator.md, "The analytic truth"; :func:`replay_closed_loop` and :func:`replay_open_loop` run the
engine against simulated clients, exact for the engine.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from locust_llm.shapes.arrivals import Arrivals
from locust_llm.sim.batching import BatchingEngine, BatchParams
from locust_llm.sim.engine import Engine, SeqRequest

__all__ = [
    "OpenLoopReplay",
    "SteadyState",
    "open_loop_truth",
    "replay_closed_loop",
    "replay_open_loop",
    "saturation_users",
    "sla_capacity",
    "steady_state",
]


def _avg_blocks(p: BatchParams, prompt: int, output: int) -> float:
    return sum(p.blocks_for(prompt + g + 1) for g in range(output)) / output


def saturation_users(p: BatchParams, prompt_tokens: int, output_tokens: int, prefix_tokens: int = 0) -> int:
    """``S``: the concurrency at which the KV cache (or ``max_batch``) is full and requests start to queue; with a
    shared prefix of ``prefix_tokens``, its full blocks counted once (docs/simulator.md, "The analytic truth")."""
    shared = min(prefix_tokens, prompt_tokens) // p.block_tokens
    own = _avg_blocks(p, prompt_tokens - shared * p.block_tokens, output_tokens)
    return max(1, min(p.max_batch, int((p.usable_blocks - shared) / own)))


@dataclass(frozen=True)
class SteadyState:
    users: int
    saturation_users: int
    ttft_s: float
    itl_s: float
    output_tok_s: float
    queueing: bool


def _step_s(p: BatchParams, batch: float, prompt: int, output: int) -> float:
    decode = p.decode_ms(max(1, round(batch))) if batch > 0 else 0.0
    return (decode + p.prefill_ms(prompt * batch / output)) / 1000.0


def steady_state(
    p: BatchParams, users: int, prompt_tokens: int, output_tokens: int, prefix_tokens: int = 0
) -> SteadyState:
    """Analytic steady state for ``users`` closed-loop users (see the module docstring for the formulas)."""
    n = output_tokens
    s = saturation_users(p, prompt_tokens, n, prefix_tokens)
    prefill = prompt_tokens - min(prefix_tokens, prompt_tokens)
    if users <= s:
        batch = users * n / (n + 1)
        step = _step_s(p, batch, prefill, n)
        return SteadyState(users, s, 2 * step, step, batch / step, False)
    step = _step_s(p, s, prefill, n)
    response_s = users * n * step / s
    return SteadyState(users, s, response_s - (n - 1) * step, step, s / step, True)


@dataclass(frozen=True)
class Replay:
    ttft_s: list[float]
    itl_s: list[float]
    output_tokens: int
    duration_s: float
    engine: BatchingEngine


def replay_closed_loop(
    p: BatchParams,
    users: int,
    prompt_tokens: int,
    output_tokens: int,
    requests_per_user: int = 20,
    rtt_ms: float = 1.0,
    output_fraction: float = 1.0,
    seed: int = 0,
    prefix_tokens: int = 0,
) -> Replay:
    """Run the engine against ``users`` simulated clients that resubmit ``rtt_ms`` after each answer ends.

    Users start ``rtt_ms / users`` apart. Output lengths are drawn as the simulator draws them (uniformly in
    ``[output_fraction * output_tokens, output_tokens]``, seeded per request); every prompt starts with the same
    cacheable, shared prefix of ``prefix_tokens`` (0: none). Returns every TTFT (in submission
    order) and ITL gap (seconds), the tokens generated and the engine afterwards.
    """
    engine = BatchingEngine(p)
    rtt = int(rtt_ms * 1_000_000)
    pending: list[tuple[int, int]] = [(i * rtt // max(1, users), i) for i in range(users)]  # (send_ns, user)
    sent: dict[int, int] = {}
    last_token: dict[int, int] = {}
    ttfts: list[float] = []
    itls: list[float] = []
    next_id = 1
    done = 0
    total = users * requests_per_user
    tokens = 0
    low = max(1, round(output_fraction * output_tokens))
    now = 0
    while done < total:
        due = engine.next_event_ns()
        pending.sort()
        if pending and (due is None or pending[0][0] <= due):
            now, _user = pending.pop(0)
            n = (
                output_tokens
                if low >= output_tokens
                else random.Random(seed * 7_777_777 + next_id).randint(low, output_tokens)
            )
            tokens += n
            prefix = "prefix" if prefix_tokens else None
            engine.submit(SeqRequest(next_id, prompt_tokens, n, prefix, prefix_tokens), now)
            sent[next_id] = now - rtt // 2
            next_id += 1
            continue
        assert due is not None
        now = due
        for e in engine.advance(due):
            arrival = e.at_ns + rtt // 2
            if e.token == 0:
                ttfts.append((arrival - sent[e.seq_id]) / 1e9)
            else:
                itls.append((arrival - last_token[e.seq_id]) / 1e9)
            last_token[e.seq_id] = arrival
            if e.last:
                done += 1
                engine.cached_tokens.pop(e.seq_id, None)
                pending.append((e.at_ns + rtt, e.seq_id))
    return Replay(ttfts, itls, tokens, now / 1e9, engine)


def sla_capacity(
    p: BatchParams,
    prompt_tokens: int,
    max_tokens: int,
    output_fraction: float,
    ttft_p99_ms: float,
    max_users: int,
    seed: int = 0,
) -> tuple[int, dict[int, float]]:
    """The most closed-loop users whose TTFT p99 stays within ``ttft_p99_ms`` on this engine, by bisection over
    exact replays (TTFT p99 grows with users); the p99 of each replay excludes every user's first request (the
    warm-up). Returns the answer (0 if even one user misses) and the p99 (ms) of every replay run."""
    seen: dict[int, float] = {}

    def p99(users: int) -> float:
        if users not in seen:
            per_user = max(10, 1500 // users)
            ttft = sorted(
                replay_closed_loop(p, users, prompt_tokens, max_tokens, per_user, 1.0, output_fraction, seed).ttft_s[
                    users:
                ]
            )
            seen[users] = 1000 * ttft[min(len(ttft) - 1, int(0.99 * len(ttft)))]
        return seen[users]

    low, high = 0, max_users + 1  # p99(low) meets the limit (0: vacuously), p99(high) does not (or beyond range)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if p99(mid) <= ttft_p99_ms else (low, mid)
    return low, dict(sorted(seen.items()))


@dataclass(frozen=True)
class OpenLoopReplay:
    """Per request (in arrival order): TTFT and E2E in seconds, from its arrival."""

    ttft_s: list[float]
    e2e_s: list[float]
    output_tokens: int
    duration_s: float


def replay_open_loop(
    engine: Engine, arrivals_ns: Sequence[int], prompt_tokens: int, output_tokens: int, rtt_ms: float = 1.0
) -> OpenLoopReplay:
    """Run ``engine`` against requests arriving at ``arrivals_ns`` (increasing), whatever it does: exact for the
    engine, with a network round trip of ``rtt_ms`` (half on the way in, half on the way out)."""
    half = int(rtt_ms * 500_000)
    first: dict[int, int] = {}
    end: dict[int, int] = {}
    pending = list(enumerate(arrivals_ns))
    now = 0
    while pending or engine.running or engine.waiting:
        due = engine.next_event_ns()
        if pending and (due is None or pending[0][1] + half <= due):
            seq_id, at = pending.pop(0)
            now = at + half
            engine.submit(SeqRequest(seq_id, prompt_tokens, output_tokens), now)
            continue
        if due is None:
            break
        now = due
        for e in engine.advance(due):
            if e.token == 0:
                first[e.seq_id] = e.at_ns + half
            if e.last:
                end[e.seq_id] = e.at_ns + half
    done = sorted(end)
    return OpenLoopReplay(
        ttft_s=[(first[i] - arrivals_ns[i]) / 1e9 for i in done],
        e2e_s=[(end[i] - arrivals_ns[i]) / 1e9 for i in done],
        output_tokens=len(done) * output_tokens,
        duration_s=now / 1e9,
    )


def open_loop_truth(
    engine: Engine,
    rate: float,
    arrivals: Arrivals,
    seed: str,
    prompt_tokens: int,
    output_tokens: int,
    duration_s: float = 60.0,
) -> dict[str, Any]:
    """What an open loop of ``rate`` requests/s (``arrivals``, seeded with ``seed``) should see from ``engine`` over
    ``duration_s``: TTFT and E2E p50/p99 of the requests after the first fifth (its warm-up), and whether the
    engine kept up: the median TTFT of the last tenth of the requests is at most twice that of the second fifth
    (plus 10 ms); a queue that grows without bound fails that."""
    rng = random.Random(seed)
    times = arrivals.times_s(rate, rng)
    arrivals_ns = []
    for t in times:
        if t >= duration_s:
            break
        arrivals_ns.append(int(t * 1e9))
    replay = replay_open_loop(engine, arrivals_ns, prompt_tokens, output_tokens)
    steady = slice(len(replay.ttft_s) // 5, None)
    ttft, e2e = sorted(replay.ttft_s[steady]), sorted(replay.e2e_s[steady])

    def ms(values: list[float], q: float) -> float | None:
        return round(1000 * values[min(len(values) - 1, int(q * len(values)))], 3) if values else None

    n = len(replay.ttft_s)
    tail, early = replay.ttft_s[-max(1, n // 10) :], replay.ttft_s[n // 5 : max(n // 5 + 1, 2 * n // 5)]
    return {
        "rate_req_s": rate,
        "arrivals": arrivals.describe(),
        "requests": len(arrivals_ns),
        "ttft_p50_ms": ms(ttft, 0.5),
        "ttft_p99_ms": ms(ttft, 0.99),
        "e2e_p50_ms": ms(e2e, 0.5),
        "e2e_p99_ms": ms(e2e, 0.99),
        "kept_up": bool(early) and statistics.median(tail) <= 2 * statistics.median(early) + 0.01,
    }
