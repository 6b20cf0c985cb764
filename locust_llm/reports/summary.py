"""``summary.json`` (schema ``locust-llm/summary``, version 1) and the plain-text summary. Pure.

Schema, version 1::

    {
      "schema": "locust-llm/summary", "version": 1,
      "source": {"kind": "llm_steps" | "locust_history", "path": str, "approximate": bool},
      "run": {settings of the run, never the API key; "simulator": its analytic truth when it was the target},
      "valid": bool, "invalid_reasons": [str],
      "sla": {"ttft_p99_ms", "itl_p99_ms", "e2e_p99_ms", "max_error_rate"}, "prices": {...},
      "model": the primary model (most requests),
      "knee": {"latency_knee_users", "throughput_saturation_users", "sla_max_users", "provider_cap_users",
               "recommended_users", "recommended_reason", ...},          # of the primary model
      "analyses": {model: the same fields and more (latency knees of TTFT/ITL/E2E, goodput, cost)},
      "steps": [one row per step and model, the _llm_steps.csv columns]
    }
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from locust_llm.reports.analysis import Analysis, analyze
from locust_llm.reports.files import write_text_atomic
from locust_llm.reports.load import LoadedRun
from locust_llm.sla import Prices, Sla

__all__ = ["SCHEMA", "VERSION", "build_summary", "console_summary", "write_json"]

SCHEMA = "locust-llm/summary"
VERSION = 1
KNEE_KEYS = (
    "latency_knee_users",
    "latency_knee_bracket",
    "throughput_saturation_users",
    "sla_max_users",
    "sla_max_users_interpolated",
    "provider_cap_users",
    "provider_cap_share",
    "recommended_users",
    "recommended_reason",
    "provider_is_the_wall",
)


def _primary(run: LoadedRun) -> str:
    totals: dict[str, int] = {}
    for step in run.steps:
        totals[step["model"]] = totals.get(step["model"], 0) + (step.get("requests") or 0)
    return max(sorted(totals), key=lambda m: totals[m])


def build_summary(run: LoadedRun, sla: Sla, prices: Prices) -> dict[str, Any]:
    run_sla = run.run_meta.get("settings", {}).get("sla")
    exact = bool(run_sla) and run_sla == sla.as_dict() and not run.approximate
    analyses: dict[str, Analysis] = {
        model: analyze(model, [s for s in run.steps if s["model"] == model], sla, prices, goodput_exact=exact)
        for model in run.models
    }
    primary = _primary(run)
    reasons = sorted({f"step {s['step']}: {s['invalid_reasons']}" for s in run.steps if s.get("valid") is False})
    reasons += run.run_meta.get("invalid_reasons", [])
    if not any(s.get("ok") for s in run.steps) and not run.approximate:
        reasons.append("no successful request at any step")
    primary_analysis = analyses[primary].as_dict()
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "source": {"kind": run.source, "path": str(run.path), "approximate": run.approximate},
        "run": {k: v for k, v in run.run_meta.items() if k != "invalid_reasons"},
        "valid": not reasons,
        "invalid_reasons": reasons,
        "sla": {**sla.as_dict(), "error_limit": sla.error_limit, "described": sla.describe()},
        "prices": {"input_usd_per_mtok": prices.input_usd_per_mtok, "output_usd_per_mtok": prices.output_usd_per_mtok},
        "model": primary,
        "knee": {k: primary_analysis[k] for k in KNEE_KEYS},
        "analyses": {m: a.as_dict() for m, a in analyses.items()},
        "steps": run.steps,
    }


def write_json(summary: dict[str, Any], path: Path) -> None:
    write_text_atomic(path, json.dumps(summary, indent=2, default=str) + "\n")


def console_summary(summary: dict[str, Any]) -> str:
    """A few plain lines: validity, the knees, the binding limit and the recommendation."""
    knee = summary["knee"]
    a = summary["analyses"][summary["model"]]
    lines = [f"locust-llm capacity summary for {summary['model']}" + (" (approximate)" if summary["source"][
        "approximate"] else "")]  # fmt: skip
    if not summary["valid"]:
        lines.append("  INVALID RUN: " + "; ".join(summary["invalid_reasons"]) + " — do not trust the figures below")
    bracket = knee["latency_knee_bracket"]
    if knee["latency_knee_users"] is not None:
        where = f" (the bend lies between {bracket[0]} and {bracket[1]} users)" if bracket else ""
        lines.append(f"  latency knee (TTFT p99): {knee['latency_knee_users']} users{where}")
    else:
        lines.append(f"  latency knee (TTFT p99): none — {a['latency_knees']['ttft']['note']}")
    sat = knee["throughput_saturation_users"]
    lines.append(f"  throughput saturation: {sat} users — {a['throughput_note']}" if sat is not None
                 else f"  throughput saturation: none — {a['throughput_note']}")  # fmt: skip
    sla = summary["sla"]
    if any(sla.get(k) is not None for k in ("ttft_p99_ms", "itl_p99_ms", "e2e_p99_ms", "max_error_rate")):
        interp = knee["sla_max_users_interpolated"]
        extra = f" (interpolated ~{interp:g})" if interp is not None else ""
        described = f" [{sla['described']}]" if sla.get("described") else ""
        lines.append(f"  SLA capacity{described}: {knee['sla_max_users']} users{extra} — {a['sla_note']}")
    if knee["provider_cap_users"] is not None:
        lines.append(
            f"  provider cap: HTTP 429 on {100 * knee['provider_cap_share']:.1f}% of requests from "
            f"{knee['provider_cap_users']} users"
        )
    rec = knee["recommended_users"]
    lines.append(f"  recommended max concurrency: {rec} users ({knee['recommended_reason']})" if rec is not None
                 else f"  recommended max concurrency: none — {knee['recommended_reason']}")  # fmt: skip
    if knee["provider_is_the_wall"]:
        lines.append("  the wall is the provider's rate limit (HTTP 429), not the model: raise the limit or add keys")
    truth = summary["run"].get("simulator")
    if truth and truth.get("saturation_users") is not None:
        lines.append(f"  simulator's analytic knee: {truth['saturation_users']} users")
    return "\n".join(lines)
