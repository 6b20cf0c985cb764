"""The printed capacity summary: a few plain lines from ``summary.json``, for the console, report.html and the live
page. Pure.

Validity, the search, each knee and limit with its evidence, how sure the knee is (its bootstrap, its passes), which
answers rest on invalid steps, the routes, a trace's capacity, the diagnosis and the simulator's truth. What each
line says: docs/results.md, "Reports: knee, SLA capacity, cost".
"""

from __future__ import annotations

from typing import Any

from locust_llm.measure.thresholds import KNEE_AGREEMENT
from locust_llm.reports.chain import routes_text
from locust_llm.reports.summary import knee_key

__all__ = ["console_summary", "load_text", "search_text", "sim_kept_up", "trace_text"]


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


def _knee_certainty(summary: dict[str, Any]) -> list[str]:
    """How sure the knee is of its samples (its bootstrap's agreement) and, with ``--repeats``, of its passes."""
    knee, lines = summary["knee"], []
    share = knee.get("latency_knee_agreement")
    if share is not None:
        bracket = knee.get(knee_key(summary, "latency_knee_bracket")) or knee.get("latency_knee_bracket")
        found = f"{100 * share:.0f}% of resamples of the steps' seconds find this knee"
        if share < KNEE_AGREEMENT:
            inside = f" inside {bracket[0]:g}-{bracket[1]:g}" if bracket else ""
            found += f": uncertain, add steps{inside} or run --repeats"
        lines.append(f"    {found}")
    repeats = summary.get("repeats")
    if repeats:
        knees = ", ".join("none" if p["latency_knee"] is None else f"{p['latency_knee']:g}" for p in repeats["passes"])
        lines.append(f"    {repeats['knee_agree']} of {repeats['of']} passes find it (each pass's knee: {knees})")
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


def _output_lines(summary: dict[str, Any]) -> list[str]:
    """The steps whose model stopped early (``summary.output_length``): they offered less decode load than asked."""
    lengths = summary.get("output_length") or {}
    short = lengths.get("short_steps") or []
    if not short:
        return []
    where = ", ".join(f"{load_text(summary, s['load'])} ({s['ratio']:.2f})" for s in short)
    if any((lengths.get("exact") or {}).values()):
        advice = "; they were asked for exact lengths, which the server ignored"
    elif lengths.get("mode") == "auto":
        advice = "; the server does not honour min_tokens, so these are the model's own lengths"
    else:
        advice = "; --output-length auto asks for exact lengths where the server honours them"
    return [
        f"  output lengths: the server stopped early, under {lengths.get('short_below', 0.9):.0%} of the tokens "
        f"asked at {where}: those steps offered less decode load than planned{advice}"
    ]


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
    lines += _knee_certainty(summary)
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
    lines += _output_lines(summary)
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
        lines.append(
            f"  simulator's analytic knee: {truth['saturation_users']} users{in_flight} (where it queues on average)"
        )
    if truth and truth.get("open_loop"):
        kept = sim_kept_up(truth["open_loop"])
        lines.append(
            f"  simulator's open-loop truth: kept up with {load_text(summary, kept)}"
            if kept is not None
            else "  simulator's open-loop truth: behind at every offered rate"
        )
    return "\n".join(lines)
