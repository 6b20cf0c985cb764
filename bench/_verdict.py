"""The generator bench's verdicts: a goal is met, NOT met, or UNSURE, from paired runs whose server kept up.

``bench/generator.py`` runs each generator once per repeat; the i-th runs of two generators form a pair. Each rule is
a pure function here, tested in ``bench/tests/test_verdict.py``: a run whose pacing server fell behind (over
:data:`SERVER_BEHIND_PCT` % of its tokens 5 ms late) is disturbed and its pairs left out; accuracy is judged against
what the server delivered, a TTFT budget only on pairs whose servers were late alike; a goal is ``met`` when every
pair judged meets it, ``NOT met`` when none does, ``UNSURE`` otherwise or with no pair left. The CPU goal is judged
at once (:func:`reads_alike`, :data:`AT_ONCE_NOISE`); one pair decides only outside :data:`SINGLE_RUN_NOISE`, and
never an accuracy goal; :func:`split_cost` fits ``a + b / T`` per token over two answer lengths or more. Each rule in
full, and why: docs/performance.md, "How the bench judges a goal".
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AT_ONCE_NOISE",
    "SERVER_BEHIND_PCT",
    "SINGLE_RUN_NOISE",
    "WAKEUPS_ALIKE",
    "Verdict",
    "always",
    "cpu_ratio",
    "difference",
    "disturbed",
    "judge",
    "near",
    "pairs",
    "reads_alike",
    "split_cost",
]

SINGLE_RUN_NOISE = 0.2
"""How far (relative) one run's CPU ratio may be from the truth on a shared machine (module docstring)."""

AT_ONCE_NOISE = 0.03
"""How far (relative) the CPU ratio of one pair run at once (bench/_at_once.py) may be from the truth: three such
pairs at 256 streams gave 1.512-1.518, two at 512 gave 1.394 and 1.438 (2026-12-03)."""

WAKEUPS_ALIKE = 0.25
"""How far (relative) a generator's wake-ups per token in a pair run at once may be from the median of its runs
alone for the pair to be judged (:func:`reads_alike`)."""

SERVER_BEHIND_PCT = 1.0
"""A run whose pacing server wrote more than this share (%) of its tokens over 5 ms late was disturbed (module
docstring)."""

LEFT_OUT = "a pacing server behind, or the two late unalike"
"""Why a pair was not judged (module docstring)."""

Row = dict[str, Any]


@dataclass(frozen=True)
class Verdict:
    word: str
    """``met``, ``NOT met`` or ``UNSURE``."""
    values: tuple[float, ...]
    """The compared value of every pair judged, in repeat order."""
    left_out: int
    """Pairs not judged (a disturbed run, or servers late by amounts further apart than the budget)."""

    @property
    def median(self) -> float | None:
        return statistics.median(self.values) if self.values else None

    def text(self, goal: str) -> str:
        """One line's end: the median and every value, the goal and the word, and what was left out."""
        if not self.values:
            return f"no pair to judge ({self.left_out} left out: {LEFT_OUT}) (goal {goal}: UNSURE)"
        shown = ", ".join(f"{v:.2f}" for v in self.values)
        note = " one pair;" if len(self.values) == 1 else ""
        left = f" {self.left_out} pair(s) left out ({LEFT_OUT});" if self.left_out else ""
        return f"{self.median:.2f} [{shown}] (goal {goal}:{note}{left} {self.word})"


def late(row: Row) -> float | None:
    """The pacing server's token lateness p99 of a run (ms), or None when it was not measured."""
    value = row.get("server_late_p99_ms")
    return float(value) if isinstance(value, int | float) else None


def disturbed(row: Row) -> bool:
    """The run's pacing server fell behind (module docstring)."""
    value = row.get("server_late_5ms_pct")
    return isinstance(value, int | float) and value > SERVER_BEHIND_PCT


def pairs(ours: Sequence[Row], ref: Sequence[Row], budget_ms: float | None = None) -> tuple[list[tuple[Row, Row]], int]:
    """The i-th runs of two generators, paired; those judged and how many were left out (module docstring).
    ``budget_ms``: a TTFT comparison's budget, which the two servers' lateness must agree within."""
    kept: list[tuple[Row, Row]] = []
    left_out = 0
    for a, b in zip(ours, ref, strict=False):
        if disturbed(a) or disturbed(b):
            left_out += 1
            continue
        la, lb = late(a), late(b)
        if budget_ms is not None and la is not None and lb is not None and abs(la - lb) > budget_ms:
            left_out += 1
            continue
        kept.append((a, b))
    return kept, left_out


def judge(
    ours: Sequence[Row],
    ref: Sequence[Row],
    value: Callable[[Row, Row], float | None],
    ok: Callable[[float], bool],
    budget_ms: float | None = None,
    alone_unsure: Callable[[float], bool] = lambda v: False,
) -> Verdict:
    """Compare each judged pair by ``value`` (None: not measured, left out) and say whether ``ok`` holds for all,
    none or some of them; when one pair is judged, ``UNSURE`` where ``alone_unsure`` holds (module docstring)."""
    kept, left_out = pairs(ours, ref, budget_ms)
    values: list[float] = []
    for a, b in kept:
        v = value(a, b)
        if v is None:
            left_out += 1
        else:
            values.append(v)
    if not values:
        return Verdict("UNSURE", (), left_out)
    if len(values) == 1 and alone_unsure(values[0]):
        return Verdict("UNSURE", tuple(values), left_out)
    met = [ok(v) for v in values]
    word = "met" if all(met) else "NOT met" if not any(met) else "UNSURE"
    return Verdict(word, tuple(values), left_out)


def near(goal: float, noise: float = SINGLE_RUN_NOISE) -> Callable[[float], bool]:
    """``alone_unsure`` of a CPU ratio goal: within ``noise`` (relative; :data:`SINGLE_RUN_NOISE` for runs one after
    the other, :data:`AT_ONCE_NOISE` for a pair run at once) of it."""
    return lambda ratio: abs(ratio - goal) <= noise * goal


def always(value: float) -> bool:
    """``alone_unsure`` of an accuracy goal: one pair never decides it."""
    return True


def cpu_ratio(a: Row, b: Row) -> float | None:
    """``a``'s CPU per token over ``b``'s."""
    x, y = a.get("us_per_token"), b.get("us_per_token")
    if isinstance(x, int | float) and isinstance(y, int | float) and y > 0:
        return float(x) / float(y)
    return None


def difference(name: str) -> Callable[[Row, Row], float | None]:
    """``a``'s field ``name`` minus ``b``'s."""

    def value(a: Row, b: Row) -> float | None:
        x, y = a.get(name), b.get(name)
        if isinstance(x, int | float) and isinstance(y, int | float):
            return float(x) - float(y)
        return None

    return value


def reads_alike(pair: Row, ours_alone: Sequence[Row], floor_alone: Sequence[Row]) -> bool:
    """Whether a pair run at once (``wakeups_per_100_tokens`` and ``floor_wakeups_per_100_tokens``) read as each
    generator reads alone: each within :data:`WAKEUPS_ALIKE` of the median of its undisturbed runs alone (module
    docstring). Sharing a core changes what a token costs a generator when it changes how many tokens it reads per
    wake-up; a generator that needs much of the core (the asyncio floor at 512 streams: 4.4-5.7 wake-ups per 100
    tokens at once, 9.3 alone) batches more at once. Without runs alone to compare, a pair is taken as alike."""
    for key, runs in (("wakeups_per_100_tokens", ours_alone), ("floor_wakeups_per_100_tokens", floor_alone)):
        alone = [
            float(r["wakeups_per_100_tokens"])
            for r in runs
            if isinstance(r.get("wakeups_per_100_tokens"), int | float) and not disturbed(r)
        ]
        value, median = pair.get(key), statistics.median(alone) if alone else 0.0
        if median > 0 and isinstance(value, int | float) and abs(float(value) / median - 1) > WAKEUPS_ALIKE:
            return False
    return True


def split_cost(runs: Sequence[Row]) -> tuple[float, float] | None:
    """``(µs per token, µs per request)`` of one generator's ``runs`` (rows with ``tokens`` per answer and
    ``us_per_token``) by the module docstring's rule; None when fewer than two answer lengths have an undisturbed
    run."""
    by_length: dict[int, list[float]] = {}
    for row in runs:
        us, tokens = row.get("us_per_token"), row.get("tokens")
        if isinstance(us, int | float) and isinstance(tokens, int) and tokens > 0 and not disturbed(row):
            by_length.setdefault(tokens, []).append(float(us))
    if len(by_length) < 2:
        return None
    per_request, per_token = statistics.linear_regression(
        [1.0 / tokens for tokens in by_length], [statistics.median(values) for values in by_length.values()]
    )
    return per_token, per_request
