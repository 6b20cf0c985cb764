"""From merged per-step statistics to the rows of ``{prefix}_llm_steps.csv`` (:class:`StepRow`). Pure.

Over a step's steady window of ``D`` seconds: ``req_s = requests / D``; ``output_tok_s = completion_tokens / D``;
``goodput_req_s = client_good / D``; ``cost_usd`` from the prices; percentiles nearest-rank, in milliseconds. In open
loop ``served_req_s = client_ok / D`` and ``users`` is the in-flight p99. Every column: docs/methodology.md, "The
per-step rows".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import ceil
from typing import Any, TypedDict, cast, get_type_hints

from locust_llm.measure.fleet import server_columns
from locust_llm.measure.intervals import quantile_interval
from locust_llm.measure.sla import Prices
from locust_llm.measure.stats import STEADY, StatsTable, StepStats

__all__ = [
    "COLUMNS",
    "WORKER_COLUMNS",
    "RouteBook",
    "StepRow",
    "StepWindow",
    "WorkerRow",
    "column_types",
    "format_done",
    "format_table",
    "interval_text",
    "series",
    "step_row",
    "step_rows",
    "value",
]


class StepRow(TypedDict):
    """One row of ``{csv_prefix}_llm_steps.csv``: a step's steady window for one model (each column:
    docs/methodology.md, "The per-step rows").

    ``None`` is an empty cell: a percentile with no sample, a cost without prices, a figure a single process has
    not (``workers``)."""

    step: int
    users: int
    model: str
    route: str
    repeat: int
    start_s: float
    duration_s: float
    requests: int
    ok: int
    errors: int
    status_429: int
    status_5xx: int
    status_4xx_other: int
    timeouts: int
    conn_errors: int
    protocol_errors: int
    prompt_tokens: int
    completion_tokens: int
    cached_prompt_tokens: int
    cache_hit_share: float | None
    reasoning_tokens: int
    tool_calls: int
    tool_call_tokens: int
    req_s: float
    output_tok_s: float
    ttft_p50_ms: float | None
    ttft_p90_ms: float | None
    ttft_p99_ms: float | None
    itl_p50_ms: float | None
    itl_p90_ms: float | None
    itl_p99_ms: float | None
    e2e_p50_ms: float | None
    e2e_p90_ms: float | None
    e2e_p99_ms: float | None
    tpot_p50_ms: float | None
    answer_ttft_p50_ms: float | None
    answer_ttft_p99_ms: float | None
    goodput_req_s: float
    cost_usd: float | None
    generator_cpu_max_pct: float | None
    warmup_s: float
    ttft_lag_p99_ms: float | None
    sched_lag_p99_ms: float | None
    tokens_estimated: bool
    workers: int | None
    workers_lost: int | None
    valid: bool
    invalid_reasons: str
    client_requests: int
    client_ok: int
    client_429: int
    client_ttft_p50_ms: float | None
    client_ttft_p99_ms: float | None
    client_e2e_p50_ms: float | None
    client_e2e_p99_ms: float | None
    retries: int
    retry_wait_s: float
    retry_waits_capped: int
    fallbacks: int
    reconnects: int
    hedges: int
    hedge_wins: int
    error_backoffs: int
    error_backoff_s: float
    no_done: int
    served: int
    route_cooldowns: int
    extra_cost_usd: float | None
    offered_req_s: float | None
    speed: float | None
    arrivals: int | None
    served_req_s: float | None
    in_flight_p50: float | None
    in_flight_max: float | None
    dropped: int
    backlog_growth: int | None
    sessions: int | None
    turns: int | None
    output_tokens_asked: int
    output_tokens_got: int
    output_tokens_ratio: float | None
    server_kv_usage_p50: float | None
    server_kv_usage_max: float | None
    server_kv_usage_min: float | None
    server_running_p50: float | None
    server_running_max: float | None
    server_running_min: float | None
    server_waiting_p50: float | None
    server_waiting_max: float | None
    server_waiting_min: float | None
    server_preemptions: int | None
    server_scrapes: int
    server_scrape_failures: int
    server_replicas: int | None
    server_kv_usage_median_p50: float | None
    server_busiest_share_p50: float | None
    ratelimit_limit_requests: int | None
    ratelimit_remaining_requests_min: int | None
    ratelimit_limit_tokens: int | None
    ratelimit_remaining_tokens_min: int | None
    ttft_p50_ms_ci_low: float | None
    ttft_p50_ms_ci_high: float | None
    ttft_p90_ms_ci_low: float | None
    ttft_p90_ms_ci_high: float | None
    ttft_p99_ms_ci_low: float | None
    ttft_p99_ms_ci_high: float | None
    itl_p50_ms_ci_low: float | None
    itl_p50_ms_ci_high: float | None
    itl_p90_ms_ci_low: float | None
    itl_p90_ms_ci_high: float | None
    itl_p99_ms_ci_low: float | None
    itl_p99_ms_ci_high: float | None
    e2e_p50_ms_ci_low: float | None
    e2e_p50_ms_ci_high: float | None
    e2e_p90_ms_ci_low: float | None
    e2e_p90_ms_ci_high: float | None
    e2e_p99_ms_ci_low: float | None
    e2e_p99_ms_ci_high: float | None


COLUMNS: tuple[str, ...] = tuple(StepRow.__annotations__)
"""The per-step CSV's columns, in order: the fields of :class:`StepRow`."""


class WorkerRow(TypedDict):
    """One row of ``{csv_prefix}_llm_workers.csv`` (distributed runs): what a worker contributed to a step's phase."""

    step: int
    phase: str
    model: str
    worker: str
    requests: int
    ok: int
    completion_tokens: int
    cpu_max_pct: float | None
    last_heard_s: float | None  # when the master last heard from the worker (report or heartbeat), into the run
    lost_in_step: int | None  # the step it was lost in, if it was


WORKER_COLUMNS: tuple[str, ...] = tuple(WorkerRow.__annotations__)


@dataclass(frozen=True)
class RouteBook:
    """With ``--routes``: rows are per route (the statistics' key), each with its route's model and prices."""

    models: Mapping[str, str]
    prices: Mapping[str, Prices]


def series(row: Mapping[str, Any]) -> str:
    """What a row's figures belong to: its route (``--routes``), else its model. Rows are grouped by it."""
    return str(row.get("route") or row["model"])


def value(row: StepRow, column: str) -> Any:
    """``row[column]`` for a column named at run time (``f"{metric}_p99_ms"``); ``None`` when absent."""
    return cast(Mapping[str, Any], row).get(column)


def column_types(row_type: type = StepRow) -> dict[str, type]:
    """The Python type of each column of a row type (:class:`StepRow` by default): ``int``, ``float``, ``bool`` or
    ``str``, ``None`` aside."""
    out: dict[str, type] = {}
    for name, hint in get_type_hints(row_type).items():
        args = [a for a in getattr(hint, "__args__", (hint,)) if a is not type(None)]
        out[name] = args[0]
    return out


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
    rate: float | None = None  # open loop: the offered rate, requests/s
    speed: float | None = None  # a trace's replay speed (the rate over the trace's own)
    repeat: int = 1  # the pass over the plan (--repeats)
    workers_lost: int | None = None  # master: workers lost during the step


def _ms(stats: StepStats, name: str, q: float) -> float | None:
    hist = stats.hist[name]
    return round(hist.quantile(q) / 1e6, 3) if hist.count else None


def _in_flight(stats: StepStats, q: float) -> float | None:
    """Requests in flight (recorded times 1,000): exact below 128, within 0.8 % above."""
    hist = stats.hist["in_flight"]
    if not hist.count:
        return None
    return float(hist.max // 1000) if q >= 1 else float(hist.quantile(q) // 1000)


def _rate(n: int, duration_s: float) -> float:
    return round(n / duration_s, 4) if duration_s > 0 else 0.0


def step_row(window: StepWindow, model: str, stats: StepStats, prices: Prices | RouteBook | None = None) -> StepRow:
    """The row of ``model`` (with a :class:`RouteBook`: of that route) in ``window`` (formulas in the module
    docstring; ``extra_cost_usd`` is the cost of the tokens of attempts that were another route's fallback or
    hedge)."""
    c = stats.counts
    d = window.duration_s
    route = ""
    if isinstance(prices, RouteBook):
        route, model, prices = model, prices.models.get(model, model), prices.prices.get(model)
    cost = extra = None
    if prices and prices.given:
        cost = round(prices.cost_usd(c["prompt_tokens"], c["completion_tokens"], c["cached_prompt_tokens"]), 6)
        extra = round(
            prices.cost_usd(
                c["secondary_prompt_tokens"], c["secondary_completion_tokens"], c["secondary_cached_tokens"]
            ),
            6,
        )
    row: dict[str, Any] = {
        "step": window.step,
        "users": window.users if window.rate is None else ceil(_in_flight(stats, 0.99) or 0),
        "model": model,
        "route": route,
        "repeat": window.repeat,
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
        "cached_prompt_tokens": c["cached_prompt_tokens"],
        "cache_hit_share": round(c["cached_prompt_tokens"] / c["prompt_tokens"], 4) if c["prompt_tokens"] else None,
        "reasoning_tokens": c["reasoning_tokens"],
        "tool_calls": c["tool_calls"],
        "tool_call_tokens": c["tool_call_tokens"],
        "req_s": _rate(c["requests"], d),
        "output_tok_s": _rate(c["completion_tokens"], d),
        "ttft_p50_ms": _ms(stats, "ttft", 0.5),
        "ttft_p90_ms": _ms(stats, "ttft", 0.9),
        "ttft_p99_ms": _ms(stats, "ttft", 0.99),
        "itl_p50_ms": _ms(stats, "itl", 0.5),
        "itl_p90_ms": _ms(stats, "itl", 0.9),
        "itl_p99_ms": _ms(stats, "itl", 0.99),
        "e2e_p50_ms": _ms(stats, "e2e", 0.5),
        "e2e_p90_ms": _ms(stats, "e2e", 0.9),
        "e2e_p99_ms": _ms(stats, "e2e", 0.99),
        "tpot_p50_ms": _ms(stats, "tpot", 0.5),
        "answer_ttft_p50_ms": _ms(stats, "answer_ttft", 0.5),
        "answer_ttft_p99_ms": _ms(stats, "answer_ttft", 0.99),
        "goodput_req_s": _rate(c["client_good"], d),
        "cost_usd": cost,
        "generator_cpu_max_pct": window.cpu_max_pct,
        "warmup_s": round(window.warmup_s, 3),
        "ttft_lag_p99_ms": _ms(stats, "ttft_lag", 0.99),
        "sched_lag_p99_ms": _ms(stats, "lag", 0.99),
        "tokens_estimated": c["estimated_token_requests"] > 0,
        "workers": window.workers,
        "workers_lost": window.workers_lost,
        "valid": not window.invalid_reasons,
        "invalid_reasons": "; ".join(window.invalid_reasons),
        "client_requests": c["client_requests"],
        "client_ok": c["client_ok"],
        "client_429": c["client_429"],
        "client_ttft_p50_ms": _ms(stats, "client_ttft", 0.5),
        "client_ttft_p99_ms": _ms(stats, "client_ttft", 0.99),
        "client_e2e_p50_ms": _ms(stats, "client_e2e", 0.5),
        "client_e2e_p99_ms": _ms(stats, "client_e2e", 0.99),
        "retries": c["retries"],
        "retry_wait_s": round(c["retry_wait_ms"] / 1000.0, 3),
        "retry_waits_capped": c["retry_waits_capped"],
        "fallbacks": c["fallbacks"],
        "reconnects": c["reconnects"],
        "hedges": c["hedges"],
        "hedge_wins": c["hedge_wins"],
        "error_backoffs": c["error_backoffs"],
        "error_backoff_s": round(c["error_backoff_ms"] / 1000.0, 3),
        "no_done": c["no_done"],
        "served": c["served"],
        "route_cooldowns": c["route_cooldowns"],
        "extra_cost_usd": extra,
        "offered_req_s": window.rate,
        "speed": window.speed,
        "arrivals": None if window.rate is None else c["arrivals"],
        "served_req_s": None if window.rate is None else _rate(c["client_ok"], d),
        "in_flight_p50": _in_flight(stats, 0.5),
        "in_flight_max": _in_flight(stats, 1.0),
        "dropped": c["dropped"],
        # arrivals that entered less client requests that ended, in the window: the rise of the in-flight count
        "backlog_growth": None if window.rate is None else c["arrivals"] - c["dropped"] - c["client_requests"],
        "sessions": None if window.rate is None else c["sessions"],
        "turns": None if window.rate is None else c["turns"],
        "output_tokens_asked": c["output_tokens_asked"],
        "output_tokens_got": c["output_tokens_got"],
        "output_tokens_ratio": (
            round(c["output_tokens_got"] / c["output_tokens_asked"], 4) if c["output_tokens_asked"] else None
        ),
        **server_columns(stats),
        **_intervals(stats),
    }
    return cast("StepRow", row)


INTERVAL_METRICS = ("ttft", "itl", "e2e")
INTERVAL_QUANTILES = (0.5, 0.9, 0.99)


def _intervals(stats: StepStats) -> dict[str, float | None]:
    """Each percentile's 95 % interval, in ms (:mod:`locust_llm.measure.intervals`; an open end is empty)."""
    out: dict[str, float | None] = {}
    for metric in INTERVAL_METRICS:
        hist = stats.hist[metric]
        for q in INTERVAL_QUANTILES:
            low, high = quantile_interval(hist, q) if hist.count else (None, None)
            name = f"{metric}_p{round(100 * q)}_ms"
            out[f"{name}_ci_low"] = None if low is None else round(low / 1e6, 3)
            out[f"{name}_ci_high"] = None if high is None else round(high / 1e6, 3)
    return out


def step_rows(table: StatsTable, windows: list[StepWindow], prices: Prices | RouteBook | None = None) -> list[StepRow]:
    """One row per (step, model) with steady-state samples, in step order; models sorted by name. A step with no
    steady sample at all still has a row (of the first model seen, with zero requests), so its reasons show."""
    by_step = {w.step: w for w in windows}
    rows = []
    seen: set[int] = set()
    for key, stats in table:
        if key.phase != STEADY or key.step not in by_step or stats.empty:
            continue
        seen.add(key.step)
        rows.append(step_row(by_step[key.step], key.model, stats, prices))
    model = next((key.model for key, _ in table if key.model), "")
    rows += [step_row(w, model, StepStats(), prices) for w in windows if w.step not in seen and w.step > 0]
    return sorted(rows, key=lambda r: (r["step"], series(r)))


_TABLE = (
    ("step", "step", "{}"),
    ("users", "users", "{}"),
    ("model", "model", "{}"),
    ("route", "route", "{}"),
    ("requests", "requests", "{}"),
    ("errors", "errors", "{}"),
    ("ttft_p50_ms", "TTFT p50 ms", "{:.1f}"),
    ("ttft_p99_ms", "TTFT p99 ms", "{:.1f}"),
    ("itl_p50_ms", "ITL p50 ms", "{:.2f}"),
    ("itl_p99_ms", "ITL p99 ms", "{:.2f}"),
    ("output_tok_s", "out tok/s", "{:.1f}"),
    ("valid", "valid", "{}"),
)


_OPEN_LOOP_TABLE = (
    ("speed", "speed", "{:g}x"),
    ("offered_req_s", "offered/s", "{:g}"),
    ("served_req_s", "served/s", "{:.1f}"),
    ("dropped", "dropped", "{}"),
)


def _cell(row: Mapping[str, Any], key: str, fmt: str) -> str:
    """One cell of :func:`format_table`: ``-`` when missing; a p99 with its interval when that is wide
    (:func:`interval_text`)."""
    value = row.get(key)
    if value is None or value == "":
        return "-"
    wide = interval_text(row, key, 1 if key.startswith("ttft") else 2) if key.endswith("_p99_ms") else ""
    return fmt.format(value) + wide


def format_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """Fixed-width text table of the main columns (open loop: with the offered and completed rates and the dropped
    arrivals, ``users`` being the in-flight p99); ``-`` where a value is missing."""
    table: tuple[tuple[str, str, str], ...] = _TABLE
    if not any(row.get("route") for row in rows):
        table = tuple(column for column in table if column[0] != "route")
    if any(row.get("offered_req_s") is not None for row in rows):
        traced = any(row.get("speed") not in (None, "") for row in rows)
        table = table[:1] + _OPEN_LOOP_TABLE[0 if traced else 1 :] + table[1:]
    header = [title for _, title, _ in table]
    body = [[_cell(row, key, fmt) for key, _, fmt in table] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in body)) if body else len(h) for i, h in enumerate(header)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)) for r in body]
    return "\n".join(lines)


def interval_text(row: Mapping[str, Any], key: str, digits: int = 0) -> str:
    """`` [171, 240]`` after a percentile whose 95 % interval reaches more than 10 % from it (``-`` for an open end);
    nothing when it is that tight, or has no interval."""
    value, low, high = (row.get(k) for k in (key, f"{key}_ci_low", f"{key}_ci_high"))
    if value in (None, "") or (low in (None, "") and high in (None, "")):
        return ""
    v = float(value)
    wide = low in (None, "") or high in (None, "") or float(low) < 0.9 * v or float(high) > 1.1 * v
    if not wide:
        return ""
    ends = ["-" if end in (None, "") else f"{float(end):.{digits}f}" for end in (low, high)]
    return f" [{ends[0]}, {ends[1]}]"


def format_done(row: Mapping[str, Any]) -> str:
    """A step's result in one line, from its row: its load, TTFT p99 (ms, 1 decimal), ITL p99 (ms, 2 decimals),
    output tok/s (whole), the share of attempts answered 429 (1 decimal) and its validity with the reasons, e.g.
    ``16 users (sim-llm): TTFT p99 29.3 ms [29.0, -], ITL p99 15.03 ms, 1,131 tok/s, 0.0% 429, valid``. ``-`` for
    no sample; a p99 whose interval reaches more than 10 % from it is followed by it (:func:`interval_text`)."""

    def ms(key: str, digits: int) -> str:
        value = row.get(key)
        if value is None or value == "":
            return "-"
        return f"{float(value):.{digits}f} ms" + interval_text(row, key, digits)

    offered, speed = row.get("offered_req_s"), row.get("speed")
    load = f"{row['users']} users" if offered is None or offered == "" else f"{float(offered):g} req/s"
    if speed is not None and speed != "":
        load = f"{float(speed):g}x the trace ({load})"
    requests = int(row.get("requests") or 0)
    share = int(row.get("status_429") or 0) / requests if requests else 0.0
    validity = "valid" if row.get("valid") in (True, "True") else f"INVALID: {row.get('invalid_reasons')}"
    return (
        f"{load} ({series(row)}): TTFT p99 {ms('ttft_p99_ms', 1)}, ITL p99 {ms('itl_p99_ms', 2)}, "
        f"{float(row.get('output_tok_s') or 0.0):,.0f} tok/s, {share:.1%} 429, {validity}"
    )
