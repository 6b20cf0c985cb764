"""What a trace holds, before a run spends money on it: rate, burstiness, lengths, prefix reuse, duration. Pure.

Burstiness: the CV of the gaps between arrivals (not a session's later turns); lengths: nearest-rank percentiles;
prefix reuse: what an unbounded prefix cache serves in one pass (each request's leading ``hash_ids`` an earlier one
sent); sessions. docs/workloads.md.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from typing import Any

from locust_llm.protocol.tokens import estimate_prompt_tokens
from locust_llm.workload.trace import Trace

__all__ = ["format_trace_stats", "trace_stats"]


def _rank(values: Sequence[int], q: float) -> int | None:
    """The nearest-rank ``q`` quantile of ``values`` (None for none)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _percentiles(values: Sequence[int]) -> dict[str, int | None]:
    return {f"p{round(q * 100)}": _rank(values, q) for q in (0.5, 0.9, 0.99)} | {"max": max(values, default=None)}


def prefix_reuse(trace: Trace) -> float:
    """The share of the prompt tokens of one pass that an unbounded prefix cache serves (module docstring)."""
    seen: set[tuple[int, ...]] = set()
    cached = total = 0
    for i, entry in enumerate(trace.entries):
        prompt = _input_tokens(trace, i)
        total += prompt
        matched = 0
        for n in range(1, len(entry.hash_ids) + 1):
            chain = entry.hash_ids[:n]
            if chain in seen and matched == n - 1:
                matched = n
            seen.add(chain)
        cached += min(prompt, matched * trace.block_tokens)
    return cached / total if total else 0.0


def _input_tokens(trace: Trace, i: int) -> int:
    entry = trace.entries[i]
    return int(entry.input_length) if entry.input_length is not None else estimate_prompt_tokens(trace.messages(i))


def trace_stats(trace: Trace, speeds: Sequence[float] = (1.0,)) -> dict[str, Any]:
    """The module docstring's figures for ``trace``, with its duration at each of ``speeds``."""
    arrivals = [trace.entries[i] for i in trace.starts]
    gaps = [b.t_s - a.t_s for a, b in itertools.pairwise(arrivals)]
    turns = [1 + len(rest) for rest in trace.turns.values()]
    delays = [round(trace.entries[i].delay_s * 1000) for rest in trace.turns.values() for i in rest]
    mean_gap = statistics.fmean(gaps) if gaps else 0.0
    outputs = [e.output_length for e in trace.entries if e.output_length is not None]
    return {
        "path": trace.path,
        "requests": len(trace.entries),
        "period_s": trace.period_s,
        "rate_req_s": trace.rate_req_s,
        "gap_cv": statistics.pstdev(gaps) / mean_gap if mean_gap > 0 else None,
        "input_tokens": _percentiles([_input_tokens(trace, i) for i in range(len(trace.entries))]),
        "output_tokens": _percentiles(outputs),
        "output_given": len(outputs),
        "prefix_reuse": prefix_reuse(trace),
        "block_tokens": trace.block_tokens,
        "models": sorted({e.model for e in trace.entries if e.model}),
        "duration_s": {f"{s:g}": trace.period_s / s for s in speeds},
        "sessions": len(turns),
        "turns_per_session": _percentiles(turns),
        "delay_ms": _percentiles(delays),
    }


def _lengths(figures: dict[str, int | None]) -> str:
    return ", ".join(f"{k} {v}" for k, v in figures.items() if v is not None) or "none given"


def format_trace_stats(stats: dict[str, Any]) -> str:
    """The figures of :func:`trace_stats` as lines for a person."""
    cv = stats["gap_cv"]
    burst = (
        "no gaps (one instant)"
        if cv is None
        else f"{cv:.2f} ({'bursty' if cv > 1.2 else 'even' if cv < 0.5 else 'about Poisson'})"
    )
    lines = [
        f"trace {stats['path']}: {stats['requests']} requests over {stats['period_s']:g} s as it repeats",
        f"  rate at speed 1   {stats['rate_req_s']:.4g} req/s",
        f"  burstiness        {burst}: the coefficient of variation of the gaps",
        f"  input tokens      {_lengths(stats['input_tokens'])}",
        f"  output tokens     {_lengths(stats['output_tokens'])} ({stats['output_given']} of {stats['requests']} give "
        "output_length; the others take --max-tokens)",
        f"  prefix reuse      {stats['prefix_reuse']:.1%} of prompt tokens: what an unbounded prefix cache serves "
        f"in one pass (hash_ids blocks of {stats['block_tokens']} tokens)",
    ]
    if stats["models"]:
        lines.append(f"  models            {', '.join(stats['models'])}")
    if stats["sessions"]:
        lines.append(
            f"  sessions          {stats['sessions']}: turns {_lengths(stats['turns_per_session'])}; think times "
            f"(delay) {_lengths(stats['delay_ms'])} ms; each turn resends the history before it"
        )
    for speed, seconds in stats["duration_s"].items():
        lines.append(f"  at speed {speed:<8} one pass lasts {seconds:.1f} s")
    return "\n".join(lines)
