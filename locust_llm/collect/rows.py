"""From merged per-step statistics to the rows of ``{csv_prefix}_llm_steps.csv`` and the console table. Pure.

For each step's steady window ``[began + warmup, next step began (or the end of the run))`` of length ``D``:

- ``req_s = requests / D``; ``output_tok_s = completion_tokens / D``; ``goodput_req_s = good / D`` where a
  request is good when it succeeded and met the run's SLA per request (see :mod:`locust_llm.sla`; with no SLA
  every success is good);
- ``errors = requests - ok``; percentiles are nearest-rank from the histograms, in milliseconds;
- ``cost_usd = prompt_tokens * price_in / 1e6 + completion_tokens * price_out / 1e6`` when prices are given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from locust_llm.collect.stats import STEADY, StatsTable, StepStats

__all__ = ["COLUMNS", "WORKER_COLUMNS", "StepWindow", "format_table", "step_rows"]

COLUMNS = (
    "step",
    "users",
    "model",
    "start_s",
    "duration_s",
    "requests",
    "ok",
    "errors",
    "status_429",
    "status_5xx",
    "status_4xx_other",
    "timeouts",
    "conn_errors",
    "protocol_errors",
    "prompt_tokens",
    "completion_tokens",
    "req_s",
    "output_tok_s",
    "ttft_p50_ms",
    "ttft_p90_ms",
    "ttft_p99_ms",
    "itl_p50_ms",
    "itl_p90_ms",
    "itl_p99_ms",
    "e2e_p50_ms",
    "e2e_p99_ms",
    "tpot_p50_ms",
    "goodput_req_s",
    "cost_usd",
    "generator_cpu_max_pct",
    "warmup_s",
    "ttft_lag_p99_ms",
    "sched_lag_p99_ms",
    "tokens_estimated",
    "workers",
    "valid",
    "invalid_reasons",
    "client_requests",
    "client_ok",
    "client_e2e_p50_ms",
    "client_e2e_p99_ms",
    "retries",
    "retry_wait_s",
    "fallbacks",
    "reconnects",
    "hedges",
    "hedge_wins",
)

WORKER_COLUMNS = ("step", "phase", "model", "worker", "requests", "ok", "completion_tokens", "cpu_max_pct")
"""``{csv_prefix}_llm_workers.csv`` (distributed runs): what each worker contributed to each step and phase."""


@dataclass(frozen=True)
class StepWindow:
    """A step's steady window, in seconds from the start of the run."""

    step: int
    users: int
    start_s: float
    duration_s: float
    warmup_s: float
    cpu_max_pct: float | None = None
    workers: int | None = None
    invalid_reasons: tuple[str, ...] = ()


def _ms(stats: StepStats, name: str, q: float) -> float | None:
    hist = stats.hist[name]
    return round(hist.quantile(q) / 1e6, 3) if hist.count else None


def _rate(n: int, duration_s: float) -> float:
    return round(n / duration_s, 4) if duration_s > 0 else 0.0


def step_row(
    window: StepWindow,
    model: str,
    stats: StepStats,
    price_in_usd_per_mtok: float | None = None,
    price_out_usd_per_mtok: float | None = None,
) -> dict[str, Any]:
    c = stats.counts
    d = window.duration_s
    cost = None
    if price_in_usd_per_mtok is not None or price_out_usd_per_mtok is not None:
        cost = round(
            c["prompt_tokens"] * (price_in_usd_per_mtok or 0.0) / 1e6
            + c["completion_tokens"] * (price_out_usd_per_mtok or 0.0) / 1e6,
            6,
        )
    return {
        "step": window.step,
        "users": window.users,
        "model": model,
        "start_s": round(window.start_s, 3),
        "duration_s": round(d, 3),
        "requests": c["requests"],
        "ok": c["ok"],
        "errors": c["requests"] - c["ok"],
        "status_429": c["status_429"],
        "status_5xx": c["status_5xx"],
        "status_4xx_other": c["status_4xx_other"],
        "timeouts": c["timeouts"],
        "conn_errors": c["conn_errors"],
        "protocol_errors": c["protocol_errors"],
        "prompt_tokens": c["prompt_tokens"],
        "completion_tokens": c["completion_tokens"],
        "req_s": _rate(c["requests"], d),
        "output_tok_s": _rate(c["completion_tokens"], d),
        "ttft_p50_ms": _ms(stats, "ttft", 0.5),
        "ttft_p90_ms": _ms(stats, "ttft", 0.9),
        "ttft_p99_ms": _ms(stats, "ttft", 0.99),
        "itl_p50_ms": _ms(stats, "itl", 0.5),
        "itl_p90_ms": _ms(stats, "itl", 0.9),
        "itl_p99_ms": _ms(stats, "itl", 0.99),
        "e2e_p50_ms": _ms(stats, "e2e", 0.5),
        "e2e_p99_ms": _ms(stats, "e2e", 0.99),
        "tpot_p50_ms": _ms(stats, "tpot", 0.5),
        "goodput_req_s": _rate(c["good"], d),
        "cost_usd": cost,
        "generator_cpu_max_pct": window.cpu_max_pct,
        "warmup_s": round(window.warmup_s, 3),
        "ttft_lag_p99_ms": _ms(stats, "ttft_lag", 0.99),
        "sched_lag_p99_ms": _ms(stats, "lag", 0.99),
        "tokens_estimated": c["estimated_token_requests"] > 0,
        "workers": window.workers,
        "valid": not window.invalid_reasons,
        "invalid_reasons": "; ".join(window.invalid_reasons),
        "client_requests": c["client_requests"],
        "client_ok": c["client_ok"],
        "client_e2e_p50_ms": _ms(stats, "client_e2e", 0.5),
        "client_e2e_p99_ms": _ms(stats, "client_e2e", 0.99),
        "retries": c["retries"],
        "retry_wait_s": round(c["retry_wait_ms"] / 1000.0, 3),
        "fallbacks": c["fallbacks"],
        "reconnects": c["reconnects"],
        "hedges": c["hedges"],
        "hedge_wins": c["hedge_wins"],
    }


def step_rows(
    table: StatsTable,
    windows: list[StepWindow],
    price_in_usd_per_mtok: float | None = None,
    price_out_usd_per_mtok: float | None = None,
) -> list[dict[str, Any]]:
    """One row per (step, model) with steady-state samples, in step order; models sorted by name."""
    by_step = {w.step: w for w in windows}
    rows = []
    for key, stats in table:
        if key.phase != STEADY or key.step not in by_step or stats.empty:
            continue
        rows.append(step_row(by_step[key.step], key.model, stats, price_in_usd_per_mtok, price_out_usd_per_mtok))
    return rows


_TABLE = (
    ("step", "step", "{}"),
    ("users", "users", "{}"),
    ("model", "model", "{}"),
    ("requests", "requests", "{}"),
    ("errors", "errors", "{}"),
    ("ttft_p50_ms", "TTFT p50 ms", "{:.1f}"),
    ("ttft_p99_ms", "TTFT p99 ms", "{:.1f}"),
    ("itl_p50_ms", "ITL p50 ms", "{:.2f}"),
    ("itl_p99_ms", "ITL p99 ms", "{:.2f}"),
    ("output_tok_s", "out tok/s", "{:.1f}"),
    ("valid", "valid", "{}"),
)


def format_table(rows: list[dict[str, Any]]) -> str:
    """Fixed-width text table of the main columns; ``-`` where a value is missing."""
    header = [title for _, title, _ in _TABLE]
    body = [
        [("-" if row.get(key) is None or row.get(key) == "" else fmt.format(row[key])) for key, _, fmt in _TABLE]
        for row in rows
    ]
    widths = [max(len(h), *(len(r[i]) for r in body)) if body else len(h) for i, h in enumerate(header)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)) for r in body]
    return "\n".join(lines)
