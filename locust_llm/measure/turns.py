"""The rows of ``{prefix}_llm_turns.csv``: per (step, model, turn index) of conversations. Pure.

For a turn's successful requests in a step's steady window: their count, prompt and cached-prompt token p50s, and
TTFT and E2E p50/p99. Later turns resend the whole history: the table shows what that growth costs, and how much
of it a prefix cache serves.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TypedDict

from locust_llm.measure.rows import StepWindow
from locust_llm.measure.stats import STEADY, StatsTable, TurnStats

__all__ = ["TURN_COLUMNS", "TurnRow", "turn_rows", "turns_csv_path"]


class TurnRow(TypedDict):
    step: int
    users: int
    model: str
    turn: int
    requests: int
    prompt_tokens_p50: float | None
    cached_prompt_tokens_p50: float | None
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    e2e_p50_ms: float | None
    e2e_p99_ms: float | None


TURN_COLUMNS: tuple[str, ...] = tuple(TurnRow.__annotations__)


def turns_csv_path(csv_prefix: str | Path) -> Path:
    return Path(f"{csv_prefix}_llm_turns.csv")


def _q(stats: TurnStats, name: str, q: float, scale: float) -> float | None:
    hist = stats.hist[name]
    return round(hist.quantile(q) / scale, 3) if hist.count else None


def turn_row(window: StepWindow, model: str, turn: int, stats: TurnStats) -> TurnRow:
    return {
        "step": window.step,
        "users": window.users,
        "model": model,
        "turn": turn,
        "requests": stats.requests,
        "prompt_tokens_p50": _q(stats, "prompt_tokens", 0.5, 1.0),
        "cached_prompt_tokens_p50": _q(stats, "cached_prompt_tokens", 0.5, 1.0),
        "ttft_p50_ms": _q(stats, "ttft", 0.5, 1e6),
        "ttft_p99_ms": _q(stats, "ttft", 0.99, 1e6),
        "e2e_p50_ms": _q(stats, "e2e", 0.5, 1e6),
        "e2e_p99_ms": _q(stats, "e2e", 0.99, 1e6),
    }


def turn_rows(table: StatsTable, windows: Sequence[StepWindow]) -> list[TurnRow]:
    """Every (step, model, turn) with steady samples, in step, model and turn order (none without conversations)."""
    by_step = {w.step: w for w in windows}
    rows = [
        turn_row(by_step[key.step], key.model, turn, stats)
        for key, step_stats in table
        if key.phase == STEADY and key.step in by_step
        for turn, stats in sorted(step_stats.turns.items())
    ]
    return sorted(rows, key=lambda r: (r["step"], r["model"], r["turn"]))
