"""The Locust web UI as a locust-llm surface: the LLM tab, ``/llm/``, its JSON and downloads, start-form guards.

Through Locust's extension points only (``template_args``, ``extended_stats``, routes on ``web_ui.app``, each behind
``--web-login`` when on). ``/llm/steps.json`` is ``{"run", "state", "rows", "summary"}``. The start form may change
only Locust's start fields and locust-llm's shown flags; paths must lie in the working directory; with a key set, a
start against another host is refused unless ``--allow-new-host``.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
from functools import cache
from pathlib import Path
from typing import Any

from flask import Blueprint, Response, jsonify, make_response, redirect, request

from locust_llm.config.flags import FLAGS
from locust_llm.measure.rows import COLUMNS, StepRow, series
from locust_llm.reports.console import console_summary
from locust_llm.reports.summary import by_load
from locust_llm.runtime import outputs
from locust_llm.runtime.run import LLMRun

__all__ = ["TAB_KEY", "install_web_ui"]

logger = logging.getLogger("locust_llm")

TAB_KEY = "llm"
TAB_COLUMNS = (
    ("step", "Step"),
    ("users", "Users"),
    ("model", "Model"),
    ("requests", "Requests"),
    ("errors", "Errors"),
    ("share_429_pct", "429 %"),
    ("ttft_p50_ms", "TTFT p50 ms"),
    ("ttft_p99_ms", "TTFT p99 ms"),
    ("itl_p50_ms", "ITL p50 ms"),
    ("itl_p99_ms", "ITL p99 ms"),
    ("ttft_p99_ci", "TTFT p99 95% interval"),
    ("itl_p99_ci", "ITL p99 95% interval"),
    ("e2e_p99_ms", "E2E p99 ms"),
    ("answer_ttft_p50_ms", "Answer TTFT p50 ms"),
    ("cache_hit_pct", "Cache hit %"),
    ("output_tok_s", "Out tok/s"),
    ("server_kv_usage_max", "Server KV max"),
    ("server_waiting_p50", "Server waiting p50"),
    ("valid", "Valid"),
    ("invalid_reasons", "Reasons"),
    ("why", "Why (at the knee)"),
)
LOCUST_START_FIELDS = frozenset(
    {"user_count", "spawn_rate", "host", "run_time", "user_classes", "shape_class", "profile"}
)
PATH_FLAGS = frozenset({"prompts", "system_prompt", "baseline", "llm_report"})
_LIVE_PAGE = Path(__file__).with_name("webui_live.html")


_DECIMALS = {
    "ttft_p50_ms": 1,
    "ttft_p99_ms": 1,
    "e2e_p99_ms": 0,
    "itl_p50_ms": 2,
    "itl_p99_ms": 2,
    "output_tok_s": 1,
    "answer_ttft_p50_ms": 1,
}


def tab_rows(rows: list[StepRow], summary: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The rows of the LLM tab: the table's columns (rounded for reading), the 429 share in percent, validity in
    words; once the run's summary is made, its diagnosis on the primary model's knee step (its last step when the
    sweep shows no knee)."""
    out = []
    for row in rows:
        requests = row["requests"]
        shown: dict[str, Any] = {key: row.get(key) for key, _ in TAB_COLUMNS if key in row}
        for key, decimals in _DECIMALS.items():
            value = shown.get(key)
            shown[key] = None if value is None else round(float(value), decimals)
        shown["share_429_pct"] = round(100 * row["status_429"] / requests, 1) if requests else 0.0
        share = row.get("cache_hit_share")
        shown["cache_hit_pct"] = None if share is None else round(100 * share, 1)
        for metric, decimals in (("ttft", 1), ("itl", 2)):
            ends = [
                "open" if end in (None, "") else f"{float(str(end)):.{decimals}f}"
                for end in (row.get(f"{metric}_p99_ms_ci_low"), row.get(f"{metric}_p99_ms_ci_high"))
            ]
            shown[f"{metric}_p99_ci"] = None if row.get(f"{metric}_p99_ms") is None else f"{ends[0]} - {ends[1]}"
        shown["valid"] = "yes" if row["valid"] else "no"
        shown["why"] = None
        out.append(shown)
    diagnosis = (summary or {}).get("diagnosis")
    if diagnosis and summary is not None:
        primary = [i for i, row in enumerate(rows) if series(row) == summary.get("model")]
        knee = by_load(summary)["knee"].get("latency_knee_users")
        load = "offered_req_s" if summary.get("mode") == "rate" else "users"
        at_knee = [i for i in primary if knee is not None and rows[i].get(load) == knee]
        if primary:
            out[(at_knee or primary)[-1]]["why"] = diagnosis["sentence"]
    return out


def live_view(rows: list[StepRow], summary: dict[str, Any] | None) -> dict[str, Any]:
    """What the live page draws besides the rows: the load axis (users, or the offered rate in open loop), the
    latency knee on it, and the console's capacity text (one wording for the console and the page)."""
    rate = any(row.get("offered_req_s") is not None for row in rows) or bool(summary and summary.get("mode") == "rate")
    load = {"key": "offered_req_s", "title": "offered requests/s"} if rate else {"key": "users", "title": "users"}
    if summary is None:
        return {"summary": None, "load": load, "knee": None, "text": None}
    return {
        "summary": summary,
        "load": load,
        "knee": by_load(summary)["knee"]["latency_knee_users"],
        "text": console_summary(summary),
    }


def run_state(run: LLMRun) -> str:
    if not run.number:
        return "idle"
    if run.recording:
        return "running"
    return "finished" if run.finished else "finishing"


@cache
def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    return str(get_plotlyjs())


def install_web_ui(environment: Any, run: LLMRun) -> None:
    """Add the LLM tab, the ``/llm`` routes and the start-form guards to the environment's web UI (if any)."""
    web_ui = environment.web_ui
    if web_ui is None:
        return
    base = getattr(environment.parsed_options, "web_base_path", "") or ""
    web_ui.template_args["extended_tabs"] = [{"title": "LLM", "key": TAB_KEY}]
    web_ui.template_args["extended_tables"] = [
        {"key": TAB_KEY, "structure": [{"key": key, "title": title} for key, title in TAB_COLUMNS]}
    ]
    web_ui.template_args["extended_csv_files"] = [
        {"href": f"{base}/llm/", "title": "LLM live capacity page (charts, summary)"},
        {"href": f"{base}/llm/steps.csv", "title": "Download LLM per-step CSV (steady state, exact)"},
    ]
    blueprint = Blueprint("locust_llm", __name__, url_prefix=base)
    _routes(blueprint, web_ui.auth_required_if_enabled, run)
    web_ui.app.register_blueprint(blueprint)
    _extend_stats(web_ui.app, base, run)
    _guard_start_form(web_ui.app, base, environment, run)
    _warn_if_exposed(environment, run)


def _routes(blueprint: Blueprint, auth: Any, run: LLMRun) -> None:
    @blueprint.route("/llm")
    @auth
    def llm_redirect() -> Any:
        return redirect(request.path + "/")

    @blueprint.route("/llm/")
    @auth
    def llm_page() -> Response:
        return make_response(_LIVE_PAGE.read_text(encoding="utf-8"))

    @blueprint.route("/llm/plotly.min.js")
    @auth
    def llm_plotly() -> Response:
        response = make_response(_plotly_js())
        response.headers["Content-Type"] = "application/javascript"
        return response

    @blueprint.route("/llm/steps.json")
    @auth
    def llm_steps() -> Response:
        rows = outputs.rows(run) if run.number else []
        view = live_view(rows, run.summary)
        return jsonify({"run": run.number, "state": run_state(run), "rows": rows, **view, "search": run.search})

    @blueprint.route("/llm/steps.csv")
    @auth
    def llm_steps_csv() -> Response:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(COLUMNS), extrasaction="ignore")
        writer.writeheader()
        for row in outputs.rows(run) if run.number else []:
            writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
        response = make_response(buffer.getvalue())
        response.headers["Content-Type"] = "text/csv"
        response.headers["Content-Disposition"] = f"attachment;filename=llm_steps_run{run.number}.csv"
        return response

    @blueprint.route("/llm/summary.json")
    @auth
    def llm_summary() -> Response:
        if run.summary is None:
            return make_response(jsonify({"error": "no finished run yet"}), 404)
        return jsonify(run.summary)

    @blueprint.route("/llm/report.html")
    @auth
    def llm_report() -> Response:
        if run.summary is None:
            return make_response("no finished run yet: the report is made when a run ends", 404)
        from locust_llm.reports.html import render_html

        return make_response(render_html(run.summary, []))


def _extend_stats(app: Any, base: str, run: LLMRun) -> None:
    @app.after_request
    def add_llm_rows(response: Response) -> Response:
        if request.path != f"{base}/stats/requests" or response.status_code != 200:
            return response
        body = json.loads(response.get_data())
        rows = tab_rows(outputs.rows(run), run.summary) if run.number else []
        body["extended_stats"] = [{"key": TAB_KEY, "data": rows}]
        response.set_data(json.dumps(body, default=str))
        return response


def _refusal(message: str, host: str) -> Response:
    logger.error("locust-llm: refused a start from the web UI: %s", message)
    return jsonify({"success": False, "message": message, "host": host})


def _guard_start_form(app: Any, base: str, environment: Any, run: LLMRun) -> None:
    allowed = LOCUST_START_FIELDS | {f.dest for f in FLAGS if f.web_ui}
    key_host = environment.host or ""

    @app.before_request
    def guard_swarm() -> Response | None:
        if request.path != f"{base}/swarm" or request.method != "POST":
            return None
        current = environment.host or ""
        options = vars(environment.parsed_options) if environment.parsed_options is not None else {}
        mangled = {}
        for field in request.form:
            dest = field if field in options else _unmangle(field)
            if dest is None:
                continue  # not an option: Locust ignores it too
            if dest not in allowed:
                return _refusal(f"the start form may not change {dest!r}: it is fixed when locust starts", current)
            value = request.form[field]
            if dest in PATH_FLAGS and value and not _inside_cwd(value):
                return _refusal(f"{dest} must be a file in the working directory {os.getcwd()}, got {value!r}", current)
            if dest != field:
                mangled[dest] = value
        host = request.form.get("host", current).strip()
        config = run.require_config()
        if config.routes is not None:  # every route's endpoint, model and key come from the routes file
            changed = [
                name
                for name, value in (
                    ("host", host.rstrip("/") != key_host.rstrip("/") and host),
                    ("model", request.form.get("model", "").strip()),
                )
                if value
            ]
            if changed:
                return _refusal(
                    f"with --routes the start form may not change {changed[0]!r}: every route's endpoint and model "
                    f"come from {config.routes.path}",
                    current,
                )
        elif host and host.rstrip("/") != key_host.rstrip("/") and config.credentials and not config.allow_new_host:
            return _refusal(
                f"a key is set for {key_host or 'the configured host'}: it is not sent to {host}; start locust with "
                "--host for that endpoint, or with --allow-new-host to let the key go to a host given here",
                current,
            )
        for dest, value in mangled.items():  # what Locust's /swarm would copy, had the UI kept the name
            setattr(environment.parsed_options, dest, value)
        return None


def _unmangle(field: str) -> str | None:
    """The flag a start-form field names: Locust's UI turns ``sla_ttft_p99_ms`` into ``sla_ttft_p9_9ms`` (camel case
    and back), which Locust's ``/swarm`` then ignores."""
    squeezed = field.replace("_", "")
    return next((f.dest for f in FLAGS if f.dest.replace("_", "") == squeezed), None)


def _inside_cwd(path: str) -> bool:
    cwd = Path.cwd().resolve()
    resolved = (cwd / path).resolve()
    return resolved == cwd or cwd in resolved.parents


def _warn_if_exposed(environment: Any, run: LLMRun) -> None:
    options = environment.parsed_options
    web_host = getattr(options, "web_host", "") or ""
    loopback = web_host in ("127.0.0.1", "localhost", "::1")
    if run.require_config().credentials and not loopback and not getattr(options, "web_login", False):
        logger.warning(
            "locust-llm: a key is set and the web UI listens on %s without a login: anyone who can reach it can "
            "start runs that use the key. Listen on loopback only (--web-host 127.0.0.1) or require a login "
            "(--web-login).",
            web_host or "all interfaces",
        )
