"""``summary.json`` (schema ``locust-llm/summary``, version 1) and the printed capacity summary. Pure.

The summary holds the run's settings (never the key), validity and reasons, the SLA and prices, the primary model's
``knee`` (latency knee, saturation, SLA capacity, provider cap, recommendation and its reason), each model's analysis,
the steps, and a search's record. In a search run only the steps that decided a probe can make the run invalid.
Its fields: docs/methodology.md, "summary.json".
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from locust_llm.measure.rows import series
from locust_llm.measure.sla import Prices, Sla
from locust_llm.measure.thresholds import ERROR_BUDGET
from locust_llm.reports.analysis import RATE_KEYS, Analysis, analyze
from locust_llm.reports.chain import route_prices, routes_summary, routes_text
from locust_llm.reports.diagnosis import diagnose
from locust_llm.reports.files import write_text_atomic
from locust_llm.reports.load import LoadedRun

__all__ = [
    "SCHEMA",
    "VERSION",
    "build_summary",
    "by_load",
    "console_summary",
    "knee_key",
    "load_text",
    "sim_kept_up",
    "write_json",
]

SCHEMA = "locust-llm/summary"
VERSION = 1
KNEE_KEYS = (
    "latency_knee_users",
    "latency_knee_bracket",
    "latency_knee_confidence",
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


def load_text(summary: dict[str, Any], value: float | None) -> str:
    """A load in ``summary``'s unit: ``32 users`` or ``6 req/s``; a replayed trace's rate also as its speed,
    ``8.725 req/s (4x your traffic)``."""
    if value is None:
        return "none"
    if summary.get("mode") != "rate":
        return f"{value:g} users"
    rate = (summary.get("knee") or {}).get("trace_rate_req_s")
    return f"{value:.4g} req/s ({value / rate:.3g}x your traffic)" if rate and value else f"{value:g} req/s"


def search_text(search: dict[str, Any]) -> str:
    """One line: what the search looked for, its answer and why it ended."""
    unit = search.get("unit", "users")
    answer = "none" if search["answer"] is None else f"{search['answer']:g} {unit}"
    probes = search["probes"]
    again = sum(1 for p in probes if p["kind"] != "probe")
    more = f", {again} run again" if again else ""
    done = "" if search["complete"] else " (incomplete)"
    return (
        f"search [{search['described']}]: {answer}{done} — {search['reason']} ({len(probes)} probes{more}, "
        f"precision {100 * search['precision']:g}%)"
    )


def sim_kept_up(open_loop: list[dict[str, Any]]) -> float | None:
    """The highest offered rate the simulator's open-loop replay kept up with, before the first it did not."""
    kept = None
    for point in sorted(open_loop, key=lambda p: p["rate_req_s"]):
        if not point["kept_up"]:
            break
        kept = point["rate_req_s"]
    return kept


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
    analyses: dict[str, Analysis] = {
        model: analyze(
            model,
            [s for s in run.steps if series(s) == model],
            sla,
            Prices(**own_prices[model]) if model in own_prices else prices,
            goodput_exact=exact,
            search=search if model == primary else None,
            error_budget=error_budget,
        )
        for model in run.models
    }
    primary_rows = [s for s in run.steps if series(s) == primary]
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
    keys = [RATE_KEYS.get(k, k) for k in KNEE_KEYS] if mode == "rate" else list(KNEE_KEYS)
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "mode": mode,
        "source": {"kind": run.source, "path": str(run.path), "approximate": run.approximate},
        "run": {k: v for k, v in run.run_meta.items() if k != "invalid_reasons"},
        "valid": not reasons,
        "invalid_reasons": reasons,
        "sla": {**sla.as_dict(), "error_limit": sla.error_limit, "described": sla.describe()},
        "error_budget": error_budget,
        "prices": prices.as_dict(),
        "model": primary,
        "knee": {
            **{k: primary_analysis[k] for k in keys},
            "search": search is not None,
            **trace_capacity(primary_analysis, (run.run_meta.get("settings") or {}).get("trace"), sla.given),
        },
        "verdicts": verdicts,
        "diagnosis": diagnose(primary_rows, primary_analysis),
        **({"routes": routes_summary(run.steps, settings["routes"], primary)} if settings.get("routes") else {}),
        "analyses": {m: a.as_dict() for m, a in analyses.items()},
        "steps": run.steps,
        **({"search": search} if search is not None else {}),
        **({"turns": run.turns} if run.turns else {}),
    }


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


def trace_text(summary: dict[str, Any]) -> str | None:
    """The printed line of a trace's capacity (:func:`trace_capacity`), or None without a trace."""
    knee = summary["knee"]
    if "capacity_multiple" not in knee:
        return None
    multiple = knee["capacity_multiple"]
    within = (
        f"within the SLA [{summary['sla']['described']}]"
        if knee["capacity_basis"] == "sla"
        else "below its knee (the recommended max rate)"
    )
    if multiple is None:
        return f"  your traffic: how many times of it fits is not known ({knee.get('recommended_reason')})"
    if not multiple:
        return f"  your traffic: no tested speed of it stayed {within}"
    if multiple < 1:
        return f"  your traffic is past capacity: the endpoint serves only {multiple:g}x of it {within}"
    return f"  your traffic can grow {multiple:g}x (speed) and stay {within}"


def _route_lines(summary: dict[str, Any]) -> list[str]:
    """With ``--routes``: the chain's line (:func:`~locust_llm.reports.chain.routes_text`) and each other route's
    provider cap and knee."""
    routes = summary.get("routes")
    if not routes:
        return []
    text = routes_text(routes)
    lines = [f"  routes: {text}"] if text else []
    for name in routes["routes"]:
        a = summary["analyses"].get(name)
        if a is None or name == summary["model"]:
            continue
        cap = a.get("provider_cap_users")
        knee = a.get("latency_knee_users")
        lines.append(
            f"  route {name}: latency knee {load_text(summary, knee)}, "
            + (f"HTTP 429 from {load_text(summary, cap)}" if cap is not None else "no provider cap seen")
        )
    return lines


VERDICT_NAMES = {
    "latency_knee": "the latency knee",
    "throughput_saturation": "the throughput saturation",
    "sla_capacity": "the SLA capacity",
    "provider_cap": "the provider cap",
    "server_queue": "the server queue",
    "error_budget": "the error budget",
}


def _trust_lines(summary: dict[str, Any]) -> list[str]:
    """Which answers rest on invalid steps: the invalid steps the recommendation does not rest on (the run stays
    valid), and each other answer that rests on one (not to be trusted)."""
    verdicts = summary.get("verdicts")
    if not verdicts or summary.get("search"):
        return []
    resting = set(verdicts["recommended"]["steps"])
    invalid = sorted({s["step"] for s in summary["steps"] if s.get("valid") is False})
    outside = [step for step in invalid if step not in resting]
    lines = []
    if outside:
        named = ", ".join(map(str, outside))
        lines.append(
            f"  invalid step(s) {named}: the recommendation does not rest on them (its steps: up to "
            f"{load_text(summary, verdicts['recommended']['load'])})"
        )
    for name, label in VERDICT_NAMES.items():
        bad = (verdicts.get(name) or {}).get("invalid_steps") or []
        if bad and any(step not in resting for step in bad):
            lines.append(f"  {label} rests on invalid step(s) {', '.join(map(str, bad))}: not to be trusted")
    return lines


def write_json(summary: dict[str, Any], path: Path) -> None:
    write_text_atomic(path, json.dumps(summary, indent=2, default=str) + "\n")


def console_summary(summary: dict[str, Any]) -> str:
    """A few plain lines: validity, the knees, the binding limit and the recommendation."""
    knee = summary["knee"]
    a = summary["analyses"][summary["model"]]
    lines = [
        f"locust-llm capacity summary for {summary['model']}"
        + (" (approximate)" if summary["source"]["approximate"] else "")
    ]
    if not summary["valid"]:
        lines.append("  INVALID RUN: " + "; ".join(summary["invalid_reasons"]) + " — do not trust the figures below")
    if (summary["run"].get("settings", {}).get("tls") or {}).get("insecure"):
        lines.append("  --insecure: the endpoint's TLS certificate and host name were NOT verified")
    unended = ((summary["run"].get("totals") or {}).get("open_loop") or {}).get("unended")
    if unended:
        lines.append(
            f"  {unended} request(s) sent were still in flight when the run stopped and were cancelled, in no"
            " figure: --stop-timeout 60s lets them finish"
        )
    search = summary.get("search")
    if search is not None:
        lines.append("  " + search_text(search))
    bracket = knee["latency_knee_bracket"]

    def at(key: str) -> Any:
        return knee[knee_key(summary, key)]

    knee_note = a["latency_knees"]["ttft"]
    if at("latency_knee_users") is not None:
        where = f" (the bend lies between {bracket[0]:g} and {load_text(summary, bracket[1])})" if bracket else ""
        doubt = f"; low confidence: {knee_note['note']}" if knee.get("latency_knee_confidence") == "low" else ""
        lines.append(f"  latency knee (TTFT p99): {load_text(summary, at('latency_knee_users'))}{where}{doubt}")
    else:
        lines.append(f"  latency knee (TTFT p99): none — {knee_note['note']}")
    sat = at("throughput_saturation_users")
    lines.append(
        f"  throughput saturation: {load_text(summary, sat)} — {a['throughput_note']}"
        if sat is not None
        else f"  throughput saturation: none — {a['throughput_note']}"
    )
    sla = summary["sla"]
    if any(sla.get(k) is not None for k in ("ttft_p99_ms", "itl_p99_ms", "e2e_p99_ms", "max_error_rate")):
        interp = at("sla_max_users_interpolated")
        extra = f" (interpolated ~{interp:g})" if interp is not None else ""
        described = f" [{sla['described']}]" if sla.get("described") else ""
        lines.append(f"  SLA capacity{described}: {load_text(summary, at('sla_max_users'))}{extra} — {a['sla_note']}")
    if at("provider_cap_users") is not None:
        lines.append(
            f"  provider cap: HTTP 429 on {100 * knee['provider_cap_share']:.1f}% of requests from "
            f"{load_text(summary, at('provider_cap_users'))}"
        )
    if at("server_queue_users") is not None:
        lines.append(f"  server queue: from {load_text(summary, at('server_queue_users'))} — {a['server_queue_note']}")
    if at("error_budget_users") is not None:
        lines.append(
            f"  error budget: exceeded from {load_text(summary, at('error_budget_users'))} — {a['error_budget_note']}"
        )
    rec = at("recommended_users")
    noun = "rate" if summary.get("mode") == "rate" else "concurrency"
    reason = knee["recommended_reason"]
    lines.append(
        f"  recommended max {noun}: {load_text(summary, rec)} ({reason})"
        if rec is not None
        else f"  recommended max {noun}: none — {reason}"
    )
    if knee["provider_is_the_wall"]:
        lines.append("  the wall is the provider's rate limit (HTTP 429), not the model: raise the limit or add keys")
    lines += _trust_lines(summary)
    lines += _route_lines(summary)
    traced = trace_text(summary)
    if traced:
        lines.append(traced)
    diagnosis = summary.get("diagnosis")
    if diagnosis:
        low = " (low confidence)" if diagnosis["confidence"] == "low" and diagnosis["wall"] != "unknown" else ""
        lines.append(f"  why: {diagnosis['sentence']}{low}")
    truth = summary["run"].get("simulator")
    if truth and truth.get("saturation_users") is not None:
        in_flight = " in flight" if summary.get("mode") == "rate" else ""
        lines.append(f"  simulator's analytic knee: {truth['saturation_users']} users{in_flight}")
    if truth and truth.get("open_loop"):
        kept = sim_kept_up(truth["open_loop"])
        lines.append(
            f"  simulator's open-loop truth: kept up with {load_text(summary, kept)}"
            if kept is not None
            else "  simulator's open-loop truth: behind at every offered rate"
        )
    return "\n".join(lines)
