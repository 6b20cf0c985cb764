"""``summary.json`` (schema ``locust-llm/summary``, version 1): the capacity analysis of a loaded run. Pure.

The run's settings (never the key), validity, the SLA, the primary model's ``knee`` (every limit, the recommendation,
what bound it, how sure), the steps each answer rests on, the diagnosis, each model's analysis, the steps and their
histograms, a search's record. Only the steps an answer rests on make a run invalid. Its fields:
docs/methodology.md, "summary.json"; its printed form: ``reports.console``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from locust_llm.measure.histogram import Histogram
from locust_llm.measure.knee import knee_resamples, share_of
from locust_llm.measure.rows import RouteBook, StepRow, series
from locust_llm.measure.sla import Prices, Sla
from locust_llm.measure.stats import STEADY, StatsTable, StepStats
from locust_llm.measure.thresholds import ERROR_BUDGET, OUTPUT_SHORT
from locust_llm.reports.analysis import RATE_KEYS, Analysis, analyze
from locust_llm.reports.chain import route_prices, routes_summary
from locust_llm.reports.diagnosis import diagnose
from locust_llm.reports.files import write_text_atomic
from locust_llm.reports.load import LoadedRun
from locust_llm.reports.repeats import merge_repeats, passes

__all__ = [
    "SCHEMA",
    "VERSION",
    "build_summary",
    "by_load",
    "knee_key",
    "trace_capacity",
    "write_json",
]

SCHEMA = "locust-llm/summary"
VERSION = 1
KNEE_KEYS = (
    "latency_knee_users",
    "latency_knee_bracket",
    "latency_knee_confidence",
    "latency_knee_agreement",
    "latency_knee_resampled",
    "throughput_saturation_users",
    "sla_max_users",
    "sla_max_users_interpolated",
    "provider_cap_users",
    "provider_cap_share",
    "server_queue_users",
    "error_budget_users",
    "recommended_users",
    "recommended_reason",
    "binding",
    "provider_is_the_wall",
)


def knee_key(summary: dict[str, Any], key: str) -> str:
    """The name of a ``*_users`` knee key in ``summary``'s mode (``*_rate_req_s`` in open loop)."""
    return RATE_KEYS.get(key, key) if summary.get("mode") == "rate" else key


def by_load(summary: dict[str, Any]) -> dict[str, Any]:
    """``summary`` with each step's ``users`` and the knee's ``*_users`` holding its loads (in open loop, the offered
    rates), and ``axis_title`` naming them: one view for whatever reads the loads (charts, the gate)."""
    if summary.get("mode") != "rate":
        return {**summary, "axis_title": "concurrent users"}
    inverse = {rate: users for users, rate in RATE_KEYS.items()}
    return {
        **summary,
        "steps": [{**step, "users": step.get("offered_req_s") or 0} for step in summary["steps"]],
        "knee": {inverse.get(k, k): v for k, v in summary["knee"].items()},
        "axis_title": "offered requests/s",
    }


def _decided_steps(search: dict[str, Any]) -> set[int]:
    """The steps whose samples decided a search probe (an invalid probe decides nothing: it was run again)."""
    return {step for probe in search["probes"] if probe["verdict"] != "invalid" for step in probe["steps"]}


def _load(row: Mapping[str, Any]) -> float:
    offered = row.get("offered_req_s")
    return float(offered) if offered not in (None, "") else float(row["users"])


def verdict_steps(rows: Sequence[Mapping[str, Any]], rests_on: dict[str, float | None]) -> dict[str, dict[str, Any]]:
    """For each answer, the steps it rests on (every step up to the load it rests on: the rows' loads, in users or
    offered req/s) and those of them that are invalid."""
    out = {}
    for name, limit in rests_on.items():
        steps = sorted({r["step"] for r in rows if limit is None or _load(r) <= limit})
        invalid = sorted({r["step"] for r in rows if r["step"] in steps and r.get("valid") is False})
        out[name] = {"load": limit, "steps": steps, "invalid_steps": invalid}
    return out


def output_length(rows: Sequence[Mapping[str, Any]], asked: Mapping[str, Any] | None) -> dict[str, Any]:
    """How the run asked for output lengths (``--output-length``, and where it was exact), and the steps whose
    successful requests got less than :data:`OUTPUT_SHORT` of the tokens they asked for: the model stopped early, so
    the step offered less decode load than planned."""
    short = [
        {"step": r["step"], "load": _load(r), "ratio": float(r["output_tokens_ratio"])}
        for r in rows
        if r.get("output_tokens_ratio") not in (None, "") and float(r["output_tokens_ratio"]) < OUTPUT_SHORT
    ]
    return {**(asked or {}), "short_steps": short, "short_below": OUTPUT_SHORT}


def _primary(run: LoadedRun) -> str:
    """The model with the most requests; with ``--routes`` the primary route of the most weight."""
    primaries = ((run.run_meta.get("settings") or {}).get("routes") or {}).get("primary") or {}
    if primaries:
        return str(max(primaries, key=lambda name: primaries[name]))
    totals: dict[str, int] = {}
    for step in run.steps:
        totals[series(step)] = totals.get(series(step), 0) + (step.get("requests") or 0)
    return max(sorted(totals), key=lambda m: totals[m])


def build_summary(run: LoadedRun, sla: Sla, prices: Prices, error_budget: float = ERROR_BUDGET) -> dict[str, Any]:
    run_sla = run.run_meta.get("settings", {}).get("sla")
    exact = bool(run_sla) and run_sla == sla.as_dict() and not run.approximate
    search = run.run_meta.get("search")
    if search is not None and not search.get("reason"):
        search = {**search, "reason": "the run stopped before the search ended", "complete": False}
    primary = _primary(run)
    settings = run.run_meta.get("settings") or {}
    own_prices = route_prices(settings)
    repeated = int(settings.get("repeats") or 1) > 1 and run.table is not None and search is None
    steps = merge_repeats(run.steps, run.table, _row_prices(settings, prices)) if repeated and run.table else run.steps
    analyses: dict[str, Analysis] = {
        model: analyze(
            model,
            [s for s in steps if series(s) == model],
            sla,
            Prices(**own_prices[model]) if model in own_prices else prices,
            goodput_exact=exact,
            search=search if model == primary else None,
            error_budget=error_budget,
        )
        for model in run.models
    }
    primary_rows = [s for s in run.steps if series(s) == primary]  # every pass's: an answer rests on each of its steps
    verdicts = verdict_steps(primary_rows, analyses[primary].rests_on)
    judged = _decided_steps(search) if search is not None else set(verdicts["recommended"]["steps"])
    reasons = sorted(
        {
            f"step {s['step']}: {s['invalid_reasons']}"
            for s in run.steps
            if s.get("valid") is False and s["step"] in judged
        }
    )
    reasons += run.run_meta.get("invalid_reasons", [])
    if search is not None and str(search.get("reason", "")).startswith("not sure"):
        reasons.append(f"the search could not decide: {search['reason']}")
    elif search is not None and list(search["bracket"]) == [None, None]:
        reasons.append(f"the search decided nothing: {search['reason'] or 'it did not end'}")
    if not any(s.get("ok") for s in run.steps) and not run.approximate:
        reasons.append("no successful request at any step")
    primary_analysis = analyses[primary].as_dict()
    mode = analyses[primary].mode
    if run.table is not None and search is None:
        resampled = _resampled(run.table, primary, steps, run.steps, analyses[primary])
        primary_analysis["latency_knee_resampled"] = resampled and [list(pair) for pair in resampled]
        primary_analysis["latency_knee_agreement"] = share_of(resampled, analyses[primary].latency_knee_users)
    keys = [RATE_KEYS.get(k, k) for k in KNEE_KEYS] if mode == "rate" else list(KNEE_KEYS)
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "mode": mode,
        "source": {"kind": run.source, "path": str(run.path), "approximate": run.approximate},
        "run": {k: v for k, v in run.run_meta.items() if k not in ("invalid_reasons", "target")},
        "target": run.run_meta.get("target"),
        "valid": not reasons,
        "invalid_reasons": reasons,
        "sla": {**sla.as_dict(), "error_limit": sla.error_limit, "described": sla.describe()},
        "error_budget": error_budget,
        "prices": prices.as_dict(),
        "model": primary,
        "knee": {
            **{k: primary_analysis.get(k) for k in keys},
            "search": search is not None,
            **trace_capacity(primary_analysis, (run.run_meta.get("settings") or {}).get("trace"), sla.given),
        },
        "verdicts": verdicts,
        "output_length": output_length(primary_rows, run.run_meta.get("output_length")),
        "diagnosis": diagnose(primary_rows, primary_analysis),
        **({"routes": routes_summary(run.steps, settings["routes"], primary)} if settings.get("routes") else {}),
        "analyses": {m: a.as_dict() for m, a in analyses.items()},
        "steps": steps,
        **({"repeats": repeat_summary(run.steps, primary, sla, error_budget, primary_analysis)} if repeated else {}),
        **({"search": search} if search is not None else {}),
        **({"turns": run.turns} if run.turns else {}),
        **({"histograms": step_histograms(run.table, primary, steps, run.steps)} if run.table is not None else {}),
    }


GATE_HISTOGRAMS = ("ttft", "itl", "e2e")


def step_histograms(
    table: StatsTable, model: str, rows: Sequence[StepRow], every: Sequence[StepRow]
) -> dict[str, dict[str, Any]]:
    """The ``model``'s steady histograms of TTFT, ITL and E2E for each of ``rows`` (their wire form; a load run in
    several passes: their steps' together, under its row's step), for the gate to read a percentile's interval at any
    confidence (:mod:`locust_llm.measure.intervals`)."""
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        if series(row) != model:
            continue
        members = {r["step"] for r in every if series(r) == model and _load(r) == _load(row)}
        stats = StepStats()
        for key, part in table:
            if key.phase == STEADY and key.model == model and key.step in members:
                stats.merge(part)
        hists = stats.hist
        if not stats.empty:
            out[str(row["step"])] = {name: hists[name].to_wire() for name in GATE_HISTOGRAMS if hists[name].count}
    return out


def _resampled(
    table: StatsTable, model: str, rows: Sequence[StepRow], every: Sequence[StepRow], analysis: Analysis
) -> list[tuple[float | None, float]] | None:
    """The knees of the block bootstrap's resamples with their shares (:func:`locust_llm.measure.knee.knee_resamples`),
    over the loads the analysis judged, each with its steps' one-second blocks (a load run in several passes: all of
    theirs)."""
    by_load = {_load(r): r for r in rows if series(r) == model}
    loads = list(analysis.users)
    blocks = []
    for load in loads:
        members = {r["step"] for r in every if series(r) == model and _load(r) == load}
        found: list[Histogram] = []
        for key, part in table:
            if key.phase == STEADY and key.model == model and key.step in members:
                found += part.blocks.values()
        blocks.append(found)
    decode = [by_load[u].get("itl_p50_ms") if u in by_load else None for u in loads]
    usable = [by_load[u].get("valid") is not False if u in by_load else True for u in loads]
    return knee_resamples(loads, blocks, decode, usable=usable)


def _row_prices(settings: Mapping[str, Any], prices: Prices) -> Prices | RouteBook:
    """The prices the run's rows were costed at: each route's own with ``--routes`` (as ``RunConfig.row_prices``)."""
    routes = (settings.get("routes") or {}).get("routes") or []
    if not routes:
        return prices
    own = route_prices(settings)
    models = {r["name"]: r.get("model", r["name"]) for r in routes}
    return RouteBook(models, {name: Prices(**own[name]) if name in own else prices for name in models})


def repeat_summary(
    rows: Sequence[StepRow], model: str, sla: Sla, error_budget: float, merged: Mapping[str, Any]
) -> dict[str, Any]:
    """Each pass analysed alone: its knee and recommendation, and how many passes found the merged run's knee."""
    key = "latency_knee_rate_req_s" if merged.get("mode") == "rate" else "latency_knee_users"
    knee = merged.get(key)
    out = []
    for number, part in sorted(passes([r for r in rows if series(r) == model]).items()):
        a = analyze(model, part, sla, error_budget=error_budget).as_dict()
        out.append(
            {
                "repeat": number,
                "latency_knee": a.get(key),
                "recommended": a.get(key.replace("latency_knee", "recommended")),
            }
        )
    agree = sum(1 for p in out if p["latency_knee"] == knee)
    return {"passes": out, "knee_agree": agree, "of": len(out), "steps": list(rows)}


def trace_capacity(analysis: dict[str, Any], trace: dict[str, Any] | None, sla_given: bool) -> dict[str, Any]:
    """With a replayed trace, the capacity in multiples of it: each rate over the trace's own (its speed).
    ``capacity_multiple`` is the SLA capacity (interpolated where it can be) when an SLA is given, else the
    recommended rate: how many times the user's traffic the endpoint serves; None when neither was found."""
    if not trace or not trace.get("rate_req_s"):
        return {}
    rate = float(trace["rate_req_s"])

    def speed(key: str) -> float | None:
        value = analysis.get(key)
        return None if value is None else round(float(value) / rate, 3)

    sla = speed("sla_max_rate_req_s_interpolated") or speed("sla_max_rate_req_s")
    multiple, basis = (sla, "sla") if sla_given else (speed("recommended_rate_req_s"), "recommended")
    if multiple is None and analysis.get("recommended_rate_req_s") == 0:
        multiple = 0.0  # no tested speed kept up, or met the SLA
    return {
        "trace_rate_req_s": rate,
        "latency_knee_speed": speed("latency_knee_rate_req_s"),
        "sla_max_speed": sla,
        "capacity_multiple": multiple,
        "capacity_basis": basis,
    }


def write_json(summary: dict[str, Any], path: Path) -> None:
    write_text_atomic(path, json.dumps(summary, indent=2, default=str) + "\n")
