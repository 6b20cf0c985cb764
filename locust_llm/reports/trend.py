"""Capacity over time: one history line per run, and a drift gate for slow change. Pure.

``history.jsonl`` holds one line per run (``locust-llm-history/1``). A metric drifts when at least ``MIN_POINTS``
valid runs have it, its Theil-Sen drift across the window is worse than ``max_drift_pct``, and two thirds of the
non-zero pairwise slopes point the worse way: one bad night never alarms. docs/methodology.md, "Capacity over time:
the drift gate".
"""

from __future__ import annotations

import json
import statistics
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from locust_llm.measure.rows import series
from locust_llm.reports.files import ReportInputError, read_json_object
from locust_llm.reports.target import changes as target_changes

__all__ = [
    "CONSISTENCY",
    "MIN_POINTS",
    "SCHEMA",
    "Drift",
    "append_line",
    "changes",
    "drift_gate",
    "history_line",
    "judge",
    "load_history",
    "metric_series",
    "theil_sen",
    "wall_changes",
]

SCHEMA = "locust-llm-history/1"
MIN_POINTS = 5
CONSISTENCY = 2 / 3
_STEP_KEYS = ("ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "e2e_p50_ms", "e2e_p99_ms", "output_tok_s")
_REQUIRED = {"schema": str, "date": str, "model": str, "valid": bool, "knee": dict, "steps": list}


def _endpoint(host: str | None) -> str | None:
    if not host:
        return host
    parts = urllib.parse.urlsplit(host)
    netloc = parts.netloc.rpartition("@")[2]  # never credentials
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def history_line(summary: Mapping[str, Any], source: str = "") -> dict[str, Any]:
    """The history line of one run's ``summary.json`` (see the module docstring)."""
    run = summary.get("run") or {}
    model = summary.get("model")
    if not isinstance(model, str) or "knee" not in summary or "steps" not in summary or not run.get("started"):
        raise ReportInputError(
            f"{source or 'the summary'}: not a locust-llm summary.json (needs model, knee, steps and run.started)"
        )
    rows = [s for s in summary["steps"] if s.get("model") and series(s) == model]
    steps = []
    for row in rows:
        requests = row.get("requests") or 0
        step = {"users": row.get("offered_req_s") or row.get("users"), **{k: row.get(k) for k in _STEP_KEYS}}
        step["share_429"] = round((row.get("status_429") or 0) / requests, 4) if requests else None
        step["valid"] = row.get("valid", True)
        steps.append(step)
    ok = sum(r.get("client_ok") or r.get("ok") or 0 for r in rows)
    cost = sum(r.get("cost_usd") or 0 for r in rows)
    priced = any(r.get("cost_usd") is not None for r in rows)
    requests = sum(r.get("requests") or 0 for r in rows)
    return {
        "schema": SCHEMA,
        "date": run["started"],
        "model": model,
        # the embedded simulator listens on a new port each run: one endpoint, not a change every night
        "endpoint": "embedded simulator" if run.get("simulator") else _endpoint(run.get("host")),
        "tool_version": (run.get("versions") or {}).get("locust_llm") or summary.get("version"),
        "mode": summary.get("mode") or "users",
        "valid": bool(summary.get("valid")),
        "knee": summary["knee"],
        "wall": (summary.get("diagnosis") or {}).get("wall"),
        "target": {k: v for k, v in (summary.get("target") or {}).items() if k != "changed_during_run"},
        "steps": steps,
        "share_429": round(sum(r.get("status_429") or 0 for r in rows) / requests, 4) if requests else None,
        "cost_per_1k_responses_usd": round(1000 * cost / ok, 6) if priced and ok else None,
        "source": source,
    }


def load_history(path: str | Path) -> list[dict[str, Any]]:
    """History lines from ``history.jsonl`` (checked line by line) or from every summary below a directory, in
    start-time order. Raises :class:`ReportInputError` naming the file, the line and the problem."""
    path = Path(path)
    if path.is_dir():
        files = sorted({*path.rglob("summary.json"), *path.rglob("*_llm_summary.json")})
        if not files:
            raise ReportInputError(f"{path}: no summary.json below this directory")
        lines = [history_line(read_json_object(f, "the summary"), str(f)) for f in files]
    elif path.is_file():
        lines = [
            _check(_parse(text, path, n), path, n) for n, text in enumerate(_read_lines(path), start=1) if text.strip()
        ]
        if not lines:
            raise ReportInputError(f"{path}: the history is empty")
    else:
        raise ReportInputError(f"{path}: no such file or directory (expected history.jsonl or a directory of runs)")
    return sorted(lines, key=lambda line: _when(line["date"]))


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportInputError(f"{path}: cannot read it ({exc})") from None


def _parse(text: str, path: Path, number: int) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ReportInputError(f"{path}: line {number}: not JSON ({exc.__class__.__name__}: {exc})") from None


def _check(line: Any, path: Path, number: int) -> dict[str, Any]:
    where = f"{path}: line {number}"
    if not isinstance(line, dict):
        raise ReportInputError(f"{where}: not a JSON object")
    if line.get("schema") != SCHEMA:
        raise ReportInputError(
            f"{where}: schema {line.get('schema')!r}, expected {SCHEMA!r} (mixed histories: "
            "rebuild one with 'locust-llm trend DIR' from the kept reports)"
        )
    for key, kind in _REQUIRED.items():
        if not isinstance(line.get(key), kind):
            raise ReportInputError(f"{where}: {key!r} must be a {kind.__name__}, got {line.get(key)!r}")
    _when(line["date"], where)
    return line


def _when(text: str, where: str = "history") -> float:
    try:
        return datetime.fromisoformat(text).timestamp()
    except (TypeError, ValueError):
        raise ReportInputError(f"{where}: date {text!r} is not an ISO 8601 time") from None


def _json_line(line: Mapping[str, Any]) -> str:
    return json.dumps(line, separators=(",", ":"), sort_keys=True)


def append_line(history: str | Path, line: Mapping[str, Any]) -> None:
    """Append one line to ``history`` (created if missing), checking first that what is there is a history."""
    history = Path(history)
    if history.exists():
        load_history(history)  # refuse to append to something that is not a history
    history.parent.mkdir(parents=True, exist_ok=True)
    with history.open("a", encoding="utf-8") as handle:
        handle.write(_json_line(line) + "\n")


# -- metrics ----------------------------------------------------------------------------------------------------

WORSE_UP = ("ttft_p99_ms", "itl_p99_ms")  # every other metric is worse when it falls


def knee_value(line: Mapping[str, Any], name: str) -> Any:
    """``recommended`` or ``latency_knee`` of a history line, in its mode's unit (users, or req/s)."""
    return line["knee"].get(f"{name}_rate_req_s" if line.get("mode") == "rate" else f"{name}_users")


def _values(line: Mapping[str, Any]) -> dict[str, float]:
    steps = line["steps"]
    out: dict[str, float] = {}
    for name in ("recommended", "latency_knee"):
        value = knee_value(line, name)
        if isinstance(value, int | float):
            out[f"{name}_users"] = float(value)
    peaks = [s["output_tok_s"] for s in steps if isinstance(s.get("output_tok_s"), int | float)]
    if peaks:
        out["peak_output_tok_s"] = float(max(peaks))
    for step in steps:
        for key in WORSE_UP:
            if isinstance(step.get(key), int | float) and step.get("valid", True):
                out[f"{key}@{step['users']:g}"] = float(step[key])
    return out


def metric_series(lines: Sequence[Mapping[str, Any]]) -> dict[str, list[tuple[float, float, bool]]]:
    """``{metric: [(time s, value, valid), ...]}`` in time order, for every metric any run has."""
    series: dict[str, list[tuple[float, float, bool]]] = {}
    for line in lines:
        for name, value in _values(line).items():
            series.setdefault(name, []).append((_when(line["date"]), value, bool(line["valid"])))
    return series


def theil_sen(points: Sequence[tuple[float, float]]) -> tuple[float, float, float]:
    """Slope, intercept (at ``x = 0``) and the share of non-zero pairwise slopes that are positive."""
    slopes = [(y2 - y1) / (x2 - x1) for i, (x1, y1) in enumerate(points) for x2, y2 in points[i + 1 :] if x2 != x1]
    if not slopes:
        return 0.0, statistics.median(y for _, y in points), 0.5
    slope = statistics.median(slopes)
    intercept = statistics.median(y - slope * x for x, y in points)
    signed = [s for s in slopes if s != 0]
    up = sum(1 for s in signed if s > 0) / len(signed) if signed else 0.5
    return slope, intercept, up


@dataclass(frozen=True)
class Drift:
    metric: str
    points: int
    drift_pct: float | None  # the fitted change across the window, % of its fitted start (None: not judged)
    slope_pct_per_day: float | None
    worse_share: float | None  # share of pairwise slopes pointing the worse way
    verdict: str  # "drift", "ok" or "not sure"
    text: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "points": self.points,
            "drift_pct": self.drift_pct,
            "slope_pct_per_day": self.slope_pct_per_day,
            "worse_share": self.worse_share,
            "verdict": self.verdict,
            "text": self.text,
        }


def judge(metric: str, series: Sequence[tuple[float, float, bool]], window: int, max_drift_pct: float) -> Drift:
    """The drift rule of the module docstring for one metric."""
    valid = [(t, v) for t, v, ok in series if ok][-window:]
    worse_up = metric.split("@")[0] in WORSE_UP
    if len(valid) < MIN_POINTS:
        return Drift(
            metric,
            len(valid),
            None,
            None,
            None,
            "not sure",
            f"{metric}: not sure: {len(valid)} valid runs in the window, {MIN_POINTS} needed",
        )
    t0 = valid[0][0]
    days = [((t - t0) / 86400.0, v) for t, v in valid]
    slope, intercept, up = theil_sen(days)
    span = days[-1][0]
    start = intercept
    if start <= 0:
        return Drift(metric, len(valid), None, None, None, "not sure", f"{metric}: not sure: its fitted level is 0")
    drift = 100.0 * slope * span / start
    worse = drift if worse_up else -drift
    share = up if worse_up else 1.0 - up
    per_day = 100.0 * slope / start
    per_run = drift / (len(valid) - 1)
    what = (
        f"{metric} {'rose' if drift > 0 else 'fell'} {abs(drift):.1f}% over the last {len(valid)} valid runs "
        f"({_span(span)}; Theil-Sen slope {per_run:+.2f}% per run, {100 * share:.0f}% of pairs worse)"
    )
    if worse > max_drift_pct and share >= CONSISTENCY:
        return Drift(
            metric,
            len(valid),
            round(drift, 2),
            round(per_day, 3),
            round(share, 3),
            "drift",
            f"DRIFT: {what}, beyond {max_drift_pct:g}%",
        )
    return Drift(metric, len(valid), round(drift, 2), round(per_day, 3), round(share, 3), "ok", what)


def _span(days: float) -> str:
    if days >= 1:
        return f"{days:.1f} days"
    return f"{days * 24:.1f} hours" if days * 24 >= 1 else f"{days * 1440:.0f} minutes"


def drift_gate(lines: Sequence[Mapping[str, Any]], window: int, max_drift_pct: float) -> tuple[int, list[Drift]]:
    """Judge every metric that the last ``window`` valid runs all share; exit code 1 if any drifted, else 0."""
    valid = [line for line in lines if line["valid"]][-window:]
    shared = set.intersection(*(set(_values(line)) for line in valid)) if valid else set()
    series = metric_series(lines)
    drifts = [judge(m, series[m], window, max_drift_pct) for m in sorted(shared)]
    return (1 if any(d.verdict == "drift" for d in drifts) else 0), drifts


def changes(lines: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """``(date, what changed)`` where the tool version, the model, the endpoint or the target's fingerprint
    (``reports.target.changes``, where both runs read one) differs from the run before."""
    out: list[tuple[str, str]] = []
    before: tuple[Any, ...] | None = None
    target: Mapping[str, Any] | None = None
    for line in lines:
        now = (line.get("tool_version"), line.get("model"), line.get("endpoint"))
        what = (
            []
            if before is None
            else [
                f"{k} {a} -> {b}" for k, a, b in zip(("tool", "model", "endpoint"), before, now, strict=True) if a != b
            ]
        )
        what += [f"target {c}" for c in target_changes(target, line.get("target"))]
        if what:
            out.append((str(line["date"]), ", ".join(what)))
        before, target = now, line.get("target") or target
    return out


def wall_changes(lines: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """``(date, "wall A -> B")`` where a valid run's diagnosed wall differs from the valid run's before (lines from
    before the diagnosis have none and are passed over)."""
    out, before = [], None
    for line in lines:
        wall = line.get("wall")
        if not line.get("valid") or not wall:
            continue
        if before is not None and wall != before:
            out.append((str(line["date"]), f"wall {before} -> {wall}"))
        before = wall
    return out
