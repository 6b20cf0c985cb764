"""``report.html``: one self-contained page (plotly embedded, works offline) drawn from a summary.

The page records its rendering in ``#render-status`` (``rendered N charts, E errors``), which the browser test reads.
"""

from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from locust_llm.measure.rows import series
from locust_llm.reports.console import console_summary
from locust_llm.reports.files import write_text_atomic
from locust_llm.reports.summary import by_load

__all__ = ["render_html", "write_html"]

STATUS_COLUMNS = (
    ("ok", "ok", "#2ca02c"),
    ("status_429", "HTTP 429", "#d62728"),
    ("status_5xx", "HTTP 5xx", "#9467bd"),
    ("status_4xx_other", "other 4xx", "#8c564b"),
    ("timeouts", "timeout", "#ff7f0e"),
    ("conn_errors", "connection", "#7f7f7f"),
    ("protocol_errors", "protocol", "#bcbd22"),
)
OPEN_LOOP_COLUMNS = (
    ("offered_req_s", "offered req/s"),
    ("served_req_s", "served req/s"),
    ("in_flight_p50", "in flight p50"),
    ("dropped", "dropped"),
)
TABLE_COLUMNS = (
    ("step", "step"),
    ("users", "users"),
    ("model", "model"),
    ("requests", "requests"),
    ("errors", "errors"),
    ("status_429", "429"),
    ("ttft_p50_ms", "TTFT p50 ms"),
    ("ttft_p99_ms", "TTFT p99 ms"),
    ("itl_p50_ms", "ITL p50 ms"),
    ("itl_p99_ms", "ITL p99 ms"),
    ("e2e_p99_ms", "E2E p99 ms"),
    ("req_s", "req/s"),
    ("output_tok_s", "out tok/s"),
    ("goodput_req_s", "goodput req/s"),
    ("cost_usd", "cost $"),
    ("retries", "retries"),
    ("fallbacks", "fell back"),
    ("hedges", "hedges"),
    ("reconnects", "reconnects"),
    ("generator_cpu_max_pct", "gen CPU %"),
    ("valid", "valid"),
)


ROUTE_COLUMNS = (
    ("route", "route"),
    ("served", "served"),
    ("client_ttft_p99_ms", "client TTFT p99 ms"),
    ("route_cooldowns", "cool-downs"),
    ("extra_cost_usd", "extra cost $"),
)
"""With ``--routes``: the route after the model, the rest at the end (docs/methodology.md, "Routes")."""


def _x(users: float) -> float:
    """Concurrency axes are drawn in log2(users): doubling steps are evenly spaced, as the knee method sees them."""
    return math.log2(users)


def _users_axis(fig: go.Figure, users: list[int], title: str = "concurrent users") -> None:
    fig.update_xaxes(tickvals=[_x(u) for u in users], ticktext=[f"{u:g}" for u in users], title_text=title)


def _series(steps: list[dict[str, Any]], model: str, key: str) -> tuple[list[float], list[Any]]:
    """``key`` against log2(load), one point per load (a search's repeated probe: the last run at it)."""
    ordered = sorted((s for s in steps if series(s) == model and s["users"] > 0), key=lambda s: (s["users"], s["step"]))
    rows = list({s["users"]: s for s in ordered}.values())
    return [_x(s["users"]) for s in rows], [s.get(key) for s in rows]


def _vline(fig: go.Figure, users: float | None, text: str, color: str, dash: str = "dash") -> None:
    if users:
        fig.add_vline(
            x=_x(users), line_dash=dash, line_color=color, annotation_text=text, annotation_position="top left"
        )


def _latency_chart(summary: dict[str, Any], metric: str, title: str) -> go.Figure:
    fig = go.Figure()
    for model in summary["analyses"]:
        for q, dash in (("p50", "solid"), ("p99", "dot")):
            users, values = _series(summary["steps"], model, f"{metric}_{q}_ms")
            bars = _interval_bars(summary["steps"], model, f"{metric}_{q}_ms", values)
            fig.add_trace(
                go.Scatter(x=users, y=values, error_y=bars, mode="lines+markers", name=f"{model} {q}", line_dash=dash)
            )
    knee = summary["knee"]
    if metric == "ttft":
        _vline(fig, knee["latency_knee_users"], "knee (p99)", "#d62728")
        if knee["recommended_users"] and knee["recommended_users"] != knee["latency_knee_users"]:
            _vline(fig, knee["recommended_users"], "recommended", "#2ca02c", "dot")
    else:
        knee_users = summary["analyses"][summary["model"]]["latency_knees"][metric]["users"]
        _vline(fig, knee_users, "knee (p99)", "#d62728")
    limit = summary["sla"].get(f"{metric}_p99_ms")
    if limit is not None:
        fig.add_hline(y=limit, line_dash="dash", line_color="#ff7f0e", annotation_text="SLA p99")
    fig.update_layout(title=title, yaxis_title="ms", legend_orientation="h")
    _users_axis(fig, _all_users(summary), summary["axis_title"])
    return fig


def _interval_bars(steps: list[dict[str, Any]], model: str, key: str, values: list[Any]) -> dict[str, Any]:
    """Each point's 95 % interval as asymmetric error bars (an open end: the bar stops at the point)."""
    _, low = _series(steps, model, f"{key}_ci_low")
    _, high = _series(steps, model, f"{key}_ci_high")
    plus = [None if v is None or h is None else h - v for v, h in zip(values, high, strict=True)]
    minus = [None if v is None or lo is None else v - lo for v, lo in zip(values, low, strict=True)]
    return {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus, "thickness": 1}


def _all_users(summary: dict[str, Any]) -> list[int]:
    return sorted({s["users"] for s in summary["steps"] if s["users"] > 0})


def _throughput_chart(summary: dict[str, Any]) -> go.Figure:
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    for model in summary["analyses"]:
        users, tok = _series(summary["steps"], model, "output_tok_s")
        _, req = _series(summary["steps"], model, "req_s")
        fig.add_trace(go.Scatter(x=users, y=tok, mode="lines+markers", name=f"{model} output tok/s"))
        fig.add_trace(
            go.Scatter(x=users, y=req, mode="lines+markers", name=f"{model} req/s", line_dash="dot"), secondary_y=True
        )
    _vline(fig, summary["knee"]["throughput_saturation_users"], "saturation", "#9467bd")
    fig.update_layout(title="Throughput vs concurrency", legend_orientation="h")
    fig.update_yaxes(title_text="output tokens/s", secondary_y=False)
    fig.update_yaxes(title_text="requests/s", secondary_y=True)
    _users_axis(fig, _all_users(summary), summary["axis_title"])
    return fig


def _status_chart(summary: dict[str, Any]) -> go.Figure:
    rows = sorted((s for s in summary["steps"] if series(s) == summary["model"]), key=lambda s: s["users"])
    labels = [f"{s['users']:g}" for s in rows]
    fig = go.Figure()
    for key, name, color in STATUS_COLUMNS:
        fig.add_trace(go.Bar(x=labels, y=[s.get(key) or 0 for s in rows], name=name, marker_color=color))
    fig.update_layout(
        barmode="stack",
        title=f"Outcomes per step ({summary['model']})",
        xaxis_title=summary["axis_title"],
        yaxis_title="requests",
        legend_orientation="h",
    )
    return fig


def _range(steps: list[dict[str, Any]], model: str, gauge: str) -> tuple[list[float], list[Any], dict[str, Any]]:
    """A gauge's median per load with its range (min to max over the step's scrapes) as asymmetric error bars."""
    x, mid = _series(steps, model, f"server_{gauge}_p50")
    _, top = _series(steps, model, f"server_{gauge}_max")
    _, bottom = _series(steps, model, f"server_{gauge}_min")
    plus = [None if m is None or t is None else t - m for m, t in zip(mid, top, strict=True)]
    minus = [None if m is None or b is None else m - b for m, b in zip(mid, bottom, strict=True)]
    return x, mid, {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus}


def _share(row: dict[str, Any], part: str) -> float | None:
    requests = row.get("requests") or 0
    if not requests:
        return None
    failed = (row.get("errors") or 0) - (row.get("status_429") or 0) if part == "errors" else row.get("status_429") or 0
    return round(100 * failed / requests, 2)


def _evidence_chart(summary: dict[str, Any]) -> go.Figure:
    """What the diagnosis read: the server's KV usage, running and waiting requests per step (median, and the range
    of the step's scrapes), the HTTP 429 and other error shares, with the knee, the recommendation and the wall."""
    model = summary["model"]
    steps = summary["steps"]
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        specs=[[{"secondary_y": True}], [{}]],
        vertical_spacing=0.1,
        row_heights=[0.65, 0.35],
    )
    for gauge, name, secondary in (
        ("running", "running", False),
        ("waiting", "waiting", False),
        ("kv_usage", "KV usage", True),
    ):
        x, mid, bars = _range(steps, model, gauge)
        trace = go.Scatter(x=x, y=mid, error_y=bars, mode="lines+markers", name=f"{name} (median, range)")
        fig.add_trace(trace, row=1, col=1, secondary_y=secondary)
    rows = sorted((r for r in steps if series(r) == model and r["users"] > 0), key=lambda r: r["users"])
    rows = list({r["users"]: r for r in rows}.values())
    for part, name, color in (("status_429", "HTTP 429 %", "#d62728"), ("errors", "other errors %", "#9467bd")):
        fig.add_trace(
            go.Bar(x=[_x(r["users"]) for r in rows], y=[_share(r, part) for r in rows], name=name, marker_color=color),
            row=2,
            col=1,
        )
    knee = summary["knee"]
    _vline(fig, knee["latency_knee_users"], "knee (p99)", "#d62728")
    if knee["recommended_users"] and knee["recommended_users"] != knee["latency_knee_users"]:
        _vline(fig, knee["recommended_users"], "recommended", "#2ca02c", "dot")
    diagnosis = summary.get("diagnosis") or {}
    wall = next(
        (r["users"] for r in rows if knee["recommended_users"] is not None and r["users"] > knee["recommended_users"]),
        None,
    )
    if wall is not None and diagnosis.get("wall") not in (None, "unknown"):
        _vline(fig, wall, f"wall: {diagnosis['wall']}", "#ff7f0e", "dashdot")
    fig.update_layout(
        title=f"What the diagnosis read ({model}): {diagnosis.get('sentence', 'no diagnosis')}"[:160],
        legend={"orientation": "h", "y": -0.12},
        barmode="group",
        height=620,
    )
    fig.update_yaxes(title_text="requests", row=1, col=1, secondary_y=False)
    fig.update_yaxes(title_text="KV usage", range=[0, 1.05], row=1, col=1, secondary_y=True)
    fig.update_yaxes(title_text="% of requests", row=2, col=1)
    users = _all_users(summary)
    fig.update_xaxes(tickvals=[_x(u) for u in users], ticktext=[f"{u:g}" for u in users], row=2, col=1)
    fig.update_xaxes(title_text=summary["axis_title"], row=2, col=1)
    return fig


def _timeline_chart(timeline: list[dict[str, Any]]) -> go.Figure:
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    t = [p["t_s"] for p in timeline]
    fig.add_trace(go.Scatter(x=t, y=[p["users"] for p in timeline], name="users", line_shape="hv"))
    fig.add_trace(go.Scatter(x=t, y=[p["req_s"] for p in timeline], name="requests/s"), secondary_y=True)
    fig.update_layout(
        title="Users and throughput over time (Locust's history)", xaxis_title="seconds", legend_orientation="h"
    )
    fig.update_yaxes(title_text="users", secondary_y=False)
    fig.update_yaxes(title_text="requests/s", secondary_y=True)
    return fig


def _cost_chart(summary: dict[str, Any]) -> go.Figure:
    cost = summary["analyses"][summary["model"]]["cost"]["steps"]
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    labels = [f"{c['users']:g}" for c in cost]
    fig.add_trace(go.Bar(x=labels, y=[c["cost_usd"] for c in cost], name="cost of the step's steady window, $"))
    fig.add_trace(
        go.Scatter(
            x=labels, y=[c["usd_per_1k_responses"] for c in cost], name="$ per 1,000 responses", mode="lines+markers"
        ),
        secondary_y=True,
    )
    fig.update_layout(title="Cost per step", xaxis_title=summary["axis_title"], legend_orientation="h")
    return fig


_VERDICT_COLORS = {"pass": "#2ca02c", "fail": "#d62728", "invalid": "#7f7f7f"}


def _search_chart(search: dict[str, Any], axis_title: str) -> go.Figure:
    """The search path: each probe's load in the order run, coloured by its verdict; the final bracket shaded."""
    probes = search["probes"]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=[p["order"] for p in probes],
            y=[p["load"] for p in probes],
            mode="lines",
            line_color="#bbbbbb",
            showlegend=False,
            hoverinfo="skip",
        )
    )
    for verdict, color in _VERDICT_COLORS.items():
        chosen = [p for p in probes if p["verdict"] == verdict]
        if chosen:
            fig.add_trace(
                go.Scatter(
                    x=[p["order"] for p in chosen],
                    y=[p["load"] for p in chosen],
                    mode="markers",
                    name=verdict,
                    marker={
                        "color": color,
                        "size": 11,
                        "symbol": ["diamond" if p["kind"] != "probe" else "circle" for p in chosen],
                    },
                    text=[f"step {'+'.join(map(str, p['steps']))} ({p['kind']}): {p['detail']}" for p in chosen],
                    hovertemplate="%{text}<extra></extra>",
                )
            )
    low, high = search["bracket"]
    if low is not None and high is not None:
        fig.add_hrect(
            y0=low,
            y1=high,
            fillcolor="#2ca02c",
            opacity=0.12,
            line_width=0,
            annotation_text="answer bracket",
            annotation_position="top left",
        )
    fig.update_layout(
        title=f"Search path [{search['described']}]: {search['reason']}",
        xaxis_title="probe (order run)",
        yaxis_title=axis_title,
        yaxis_type="log",
        legend_orientation="h",
    )
    fig.update_xaxes(dtick=1)
    return fig


def _turns_chart(turns: list[dict[str, Any]]) -> go.Figure:
    """TTFT p50 (solid) and p99 (dotted) against the turn of the conversation, one pair of lines per step; the
    median prompt of each turn in the hover text."""
    fig = go.Figure()
    for (step, users, model), rows in _groups(turns).items():
        for q, dash in (("p50", "solid"), ("p99", "dot")):
            fig.add_trace(
                go.Scatter(
                    x=[r["turn"] for r in rows],
                    y=[r[f"ttft_{q}_ms"] for r in rows],
                    mode="lines+markers",
                    name=f"step {step} ({users} users) {model} {q}",
                    line_dash=dash,
                    text=[
                        f"prompt p50 {r['prompt_tokens_p50']} tokens, cached {r['cached_prompt_tokens_p50']}"
                        for r in rows
                    ],
                )
            )
    fig.update_layout(
        title="Time to first token by conversation turn (each turn resends the history)",
        xaxis_title="turn",
        yaxis_title="ms",
        legend_orientation="h",
    )
    fig.update_xaxes(dtick=1)
    return fig


def _groups(turns: list[dict[str, Any]]) -> dict[tuple[Any, Any, Any], list[dict[str, Any]]]:
    groups: dict[tuple[Any, Any, Any], list[dict[str, Any]]] = {}
    for row in turns:
        groups.setdefault((row["step"], row["users"], row["model"]), []).append(row)
    return groups


def _figures(summary: dict[str, Any], timeline: list[dict[str, Any]]) -> list[go.Figure]:
    figures = [_search_chart(summary["search"], summary["axis_title"])] if summary.get("search") else []
    figures += [
        _latency_chart(summary, "ttft", "Time to first token vs concurrency"),
        _latency_chart(summary, "itl", "Inter-token latency vs concurrency"),
        _throughput_chart(summary),
        _evidence_chart(summary),
        _status_chart(summary),
    ]
    if summary.get("turns"):
        figures.append(_turns_chart(summary["turns"]))
    if timeline:
        figures.append(_timeline_chart(timeline))
    if summary["analyses"][summary["model"]]["cost"]:
        figures.append(_cost_chart(summary))
    return figures


def _cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 1000 else f"{value:,.0f}"
    return html.escape(str(value))


def _table(summary: dict[str, Any]) -> str:
    columns: tuple[tuple[str, str], ...] = (
        TABLE_COLUMNS[:1] + OPEN_LOOP_COLUMNS + TABLE_COLUMNS[1:] if summary.get("mode") == "rate" else TABLE_COLUMNS
    )
    if summary.get("routes"):  # per route: what each served and what the chain's fallbacks and hedges cost there
        at = [k for k, _ in columns].index("model") + 1
        columns = columns[:at] + ROUTE_COLUMNS[:1] + columns[at:] + ROUTE_COLUMNS[1:]
    head = "".join(f"<th>{html.escape(t)}</th>" for _, t in columns)
    rows = []
    for step in sorted(summary["steps"], key=lambda s: (series(s), s["step"])):
        css = ' class="invalid"' if step.get("valid") is False else ""
        rows.append(f"<tr{css}>" + "".join(f"<td>{_cell(step.get(k))}</td>" for k, _ in columns) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _settings(summary: dict[str, Any]) -> str:
    items = {**summary["run"].get("settings", {}), "source": summary["source"]}
    for key in ("model", "host", "started", "simulator"):
        if key in summary["run"]:
            items[key] = summary["run"][key]
    text = json.dumps(items, indent=2, default=str)
    return f"<pre>{html.escape(text)}</pre>"


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{heading}: {title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }}
.banner {{ padding: .8em 1em; border-radius: 6px; margin: 1em 0; white-space: pre-wrap; font-family: monospace; }}
.ok {{ background: #eef8ee; }} .bad {{ background: #fde8e8; border: 2px solid #d62728; }}
table {{ border-collapse: collapse; font-size: 13px; }} td, th {{ border: 1px solid #ccc; padding: 3px 6px; }}
td {{ text-align: right; }} tr.invalid td {{ background: #fde8e8; }} .chart {{ height: 420px; }}
#render-status {{ color: #999; font-size: 11px; }}
</style>
<script>window.__llmErrors = 0; window.addEventListener("error", function () {{ window.__llmErrors += 1; }});</script>
<script>{plotly}</script>
</head><body>
<h1>{heading}</h1>
<div class="banner {banner_class}">{verdict}</div>
{charts}
<h2>{table_title}</h2>
{table}
<h2>{settings_title}</h2>
{settings}
<p id="render-status">rendering</p>
<script>
(function () {{
  var specs = {specs};
  var done = specs.map(function (spec, i) {{
    return Plotly.newPlot("chart-" + i, spec.data, spec.layout, {{responsive: true, displaylogo: false}});
  }});
  Promise.all(done).then(function () {{
    document.getElementById("render-status").textContent =
      "rendered " + document.querySelectorAll(".chart.js-plotly-plot").length + " charts, " +
      window.__llmErrors + " errors";
  }}, function (err) {{
    window.__llmErrors += 1;
    document.getElementById("render-status").textContent = "render failed: " + err;
  }});
}})();
</script>
</body></html>
"""


def _height(spec: dict[str, Any]) -> str:
    """A chart taller than the page's default (420 px) says so in its layout: its box is made that tall."""
    height = spec.get("layout", {}).get("height")
    return f' style="height: {int(height)}px"' if height else ""


def render_html(summary: dict[str, Any], timeline: list[dict[str, Any]] | None = None) -> str:
    figures = _figures(by_load(summary), timeline or [])
    specs = [json.loads(fig.to_json()) for fig in figures]
    charts = "\n".join(f'<div class="chart" id="chart-{i}"{_height(spec)}></div>' for i, spec in enumerate(specs))
    return PAGE.format(
        heading="locust-llm capacity report",
        table_title="Per-step results",
        settings_title="Run settings and validity",
        title=html.escape(summary["model"]),
        plotly=get_plotlyjs(),
        banner_class="ok" if summary["valid"] else "bad",
        verdict=html.escape(console_summary(summary)),
        charts=charts,
        table=_table(summary),
        settings=_settings(summary),
        specs=json.dumps(specs).replace("</", "<\\/"),
    )


def write_html(summary: dict[str, Any], timeline: list[dict[str, Any]] | None, path: Path) -> None:
    write_text_atomic(path, render_html(summary, timeline))
