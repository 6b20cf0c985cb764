"""``trend.html``: capacity over time, drawn with plotly (offline) from history lines.

Invalid runs are hollow grey crosses (shown, never judged); a change of version, model or endpoint is a dotted line.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from locust_llm.reports.files import write_text_atomic
from locust_llm.reports.html import PAGE
from locust_llm.reports.trend import CONSISTENCY, MIN_POINTS, Drift, changes, drift_gate, knee_value, wall_changes

__all__ = ["render_trend", "trend_text", "write_trend"]

_INVALID = {"symbol": "x-open", "color": "#999", "size": 10}


def _split(lines: Sequence[Mapping[str, Any]], value: Any) -> list[tuple[list[Any], list[Any], bool]]:
    """The points of the valid runs (a line) and of the invalid ones (crosses) for ``value(line)``."""
    traces = []
    for valid in (True, False):
        xs = [line["date"] for line in lines if bool(line["valid"]) == valid]
        ys = [value(line) for line in lines if bool(line["valid"]) == valid]
        if xs:
            traces.append((xs, ys, valid))
    return traces


def _add(
    fig: go.Figure,
    lines: Sequence[Mapping[str, Any]],
    name: str,
    value: Any,
    color: str | None = None,
    error: Any = None,
) -> None:
    for xs, ys, valid in _split(lines, value):
        extra: dict[str, Any] = {}
        if valid and error is not None:
            bars = [error(line) for line in lines if line["valid"]]
            extra["error_y"] = {
                "type": "data",
                "symmetric": False,
                "array": [b[1] for b in bars],
                "arrayminus": [b[0] for b in bars],
            }
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                name=name if valid else f"{name} (invalid run)",
                mode="lines+markers" if valid else "markers",
                marker=_INVALID if not valid else {"color": color} if color else {},
                line={"color": color} if color else {},
                **extra,
            )
        )


def _bracket(line: Mapping[str, Any]) -> tuple[float, float]:
    knee, value = line["knee"].get("latency_knee_bracket"), knee_value(line, "latency_knee")
    if not knee or value is None:
        return 0.0, 0.0
    return 0.0, max(0.0, float(knee[1]) - float(value))


def _step(line: Mapping[str, Any], load: float, key: str) -> Any:
    for step in line["steps"]:
        if step.get("users") == load:
            return step.get(key)
    return None


def _at_knee(line: Mapping[str, Any]) -> Any:
    load = knee_value(line, "latency_knee") or knee_value(line, "recommended")
    return _step(line, load, "output_tok_s") if load is not None else None


def _mark_changes(fig: go.Figure, lines: Sequence[Mapping[str, Any]]) -> None:
    for when, what in changes(lines):
        fig.add_vline(x=when, line={"dash": "dot", "color": "#9467bd"})
        fig.add_annotation(
            x=when,
            y=1,
            yref="paper",
            text=html.escape(what),
            showarrow=False,
            yanchor="bottom",
            font={"size": 10, "color": "#9467bd"},
        )


def _figure(title: str, y_title: str) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(
        title=title,
        xaxis_title="run start (UTC)",
        yaxis_title=y_title,
        height=400,
        margin={"t": 70},
        legend={"orientation": "h", "y": -0.25},
    )
    return fig


def _figures(lines: Sequence[Mapping[str, Any]]) -> list[go.Figure]:
    unit = "req/s" if any(line.get("mode") == "rate" for line in lines) else "users"
    valid = [line for line in lines if line["valid"]] or list(lines)
    loads = sorted(set.intersection(*({s["users"] for s in line["steps"]} for line in valid)))
    figures = []
    cap = _figure("Recommended load and latency knee (bracket: where the bend lies)", unit)
    _add(cap, lines, "recommended", lambda line: knee_value(line, "recommended"), "#2ca02c")
    _add(cap, lines, "latency knee (TTFT p99)", lambda line: knee_value(line, "latency_knee"), "#d62728", _bracket)
    figures.append(cap)
    for key, title in (("ttft_p99_ms", "TTFT p99 at each load (ms)"), ("itl_p99_ms", "ITL p99 at each load (ms)")):
        fig = _figure(title, "ms (log scale)")
        fig.update_yaxes(type="log")  # a rise from 30 to 120 ms shows beside one from 700 to 1,100 ms
        for load in loads:
            _add(fig, lines, f"{load:g} {unit}", lambda line, load=load, key=key: _step(line, load, key))
        figures.append(fig)
    tput = _figure("Output tokens/s at the knee", "tokens/s")
    _add(tput, lines, "output tok/s at the knee", _at_knee, "#1f77b4")
    figures.append(tput)
    share = _figure("Share of requests answered HTTP 429", "share")
    _add(share, lines, "429 share", lambda line: line.get("share_429"), "#ff7f0e")
    figures.append(share)
    if any(line.get("cost_per_1k_responses_usd") is not None for line in lines):
        cost = _figure("Cost per 1,000 responses (USD)", "USD")
        _add(cost, lines, "cost per 1k responses", lambda line: line.get("cost_per_1k_responses_usd"), "#8c564b")
        figures.append(cost)
    for fig in figures:
        _mark_changes(fig, lines)
    return figures


def _table(drifts: Sequence[Drift]) -> str:
    head = "<tr><th>metric</th><th>verdict</th><th>runs</th><th>drift %</th><th>slope %/day</th><th>text</th></tr>"
    rows = [
        f"<tr{' class=invalid' if d.verdict == 'drift' else ''}><td>{html.escape(d.metric)}</td>"
        f"<td>{d.verdict}</td><td>{d.points}</td><td>{'' if d.drift_pct is None else d.drift_pct}</td>"
        f"<td>{'' if d.slope_pct_per_day is None else d.slope_pct_per_day}</td><td style='text-align:left'>"
        f"{html.escape(d.text)}</td></tr>"
        for d in drifts
    ]
    return f"<table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"


def render_trend(
    lines: Sequence[Mapping[str, Any]], drifts: Sequence[Drift], verdict: str, code: int, settings: Mapping[str, Any]
) -> str:
    """The page: the verdict, the charts, the drift table and the gate's settings."""
    specs = [json.loads(fig.to_json()) for fig in _figures(lines)]
    models = sorted({str(line["model"]) for line in lines})
    return PAGE.format(
        heading="locust-llm capacity trend",
        table_title="Drift, metric by metric",
        settings_title="Gate settings",
        title=html.escape(", ".join(models)),
        plotly=get_plotlyjs(),
        banner_class="ok" if code == 0 else "bad",
        verdict=html.escape(verdict),
        charts="\n".join(f'<div class="chart" id="chart-{i}"></div>' for i in range(len(specs))),
        table=_table(drifts),
        settings=f"<pre>{html.escape(json.dumps(dict(settings), indent=2))}</pre>",
        specs=json.dumps(specs).replace("</", "<\\/"),
    )


def trend_text(lines: Sequence[Mapping[str, Any]], drifts: Sequence[Drift], window: int, max_drift_pct: float) -> str:
    """The verdict: one line per drifted metric, else one line saying there was none; and what was not judged."""
    valid = sum(1 for line in lines if line["valid"])
    head = (
        f"locust-llm trend: {len(lines)} runs ({valid} valid, {len(lines) - valid} invalid, shown and not "
        f"judged) from {lines[0]['date']} to {lines[-1]['date']}"
    )
    drifted = [d for d in drifts if d.verdict == "drift"]
    unsure = [d.metric for d in drifts if d.verdict == "not sure"]
    body = [f"  {d.text}" for d in drifted] or [
        f"  no drift beyond {max_drift_pct:g}% over the last {window} valid runs ({len(drifts)} metrics judged)"
    ]
    if unsure:
        body.append(f"  not sure (too few valid runs): {', '.join(unsure)}")
    walls = [line.get("wall") for line in lines if line["valid"] and line.get("wall")]
    if walls:
        moved = wall_changes(lines)
        since = f" (since {moved[-1][0]}; {moved[-1][1]})" if moved else ""
        body.append(f"  wall of the last valid run: {walls[-1]}{since}")
    return "\n".join([head, *body])


def write_trend(lines: Sequence[Mapping[str, Any]], out: Path, window: int, max_drift_pct: float) -> tuple[int, str]:
    """Judge ``lines`` and write ``trend.html`` and ``trend.json`` to ``out``; the exit code and the verdict."""
    code, drifts = drift_gate(lines, window, max_drift_pct)
    text = trend_text(lines, drifts, window, max_drift_pct)
    settings = {
        "window": window,
        "max_drift_pct": max_drift_pct,
        "min_points": MIN_POINTS,
        "consistency": round(CONSISTENCY, 3),
    }
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "trend.html", render_trend(lines, drifts, text, code, settings))
    data = {
        "schema": "locust-llm-trend/1",
        "settings": settings,
        "exit_code": code,
        "verdict": text,
        "metrics": [d.as_dict() for d in drifts],
        "changes": [list(c) for c in changes(lines)],
        "wall_changes": [list(c) for c in wall_changes(lines)],
        "runs": [
            {
                "date": line["date"],
                "model": line["model"],
                "endpoint": line.get("endpoint"),
                "tool_version": line.get("tool_version"),
                "valid": line["valid"],
                "knee": line["knee"],
            }
            for line in lines
        ],
    }
    write_text_atomic(out / "trend.json", json.dumps(data, indent=2) + "\n")
    return code, text
