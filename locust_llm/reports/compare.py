"""The regression gate: compare a run's ``summary.json`` with a baseline's. Pure.

Rules (thresholds are :class:`Thresholds`):

1. **Capacity**: the recommended concurrency, and separately the latency knee, regress when they fall by more than
   ``max(knee_drop_steps steps, knee_drop_pct %)``: a fall counts when it is more than one step of the baseline's
   sweep *and* more than 10 % of the baseline's value.
2. **Latency**: at each step both runs share (same users, same model), p99 TTFT and p99 ITL regress when they rise
   by more than ``p99_rise_pct`` % *and* by more than the metric's minimum (``min_ttft_rise_ms``,
   ``min_itl_rise_ms``). Steps at or beyond either run's latency knee are not compared: from the knee on, p99 is
   on the bend and dominated by queueing noise (between two runs of the same simulator, p99 TTFT at the knee step
   varied from 125 to 264 ms), which the capacity rule covers.
3. **Errors**: at a shared step the error rate regresses when it rises by more than ``error_rate_rise_pp``
   percentage points.

A run marked invalid cannot be judged: :func:`compare` raises :class:`GateInputError` (exit code 2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from locust_llm.sla import error_rate

__all__ = ["Comparison", "GateInputError", "Thresholds", "compare", "format_comparison"]


class GateInputError(ValueError):
    """The two summaries cannot be compared; one line, ready for the user."""


@dataclass(frozen=True)
class Thresholds:
    knee_drop_steps: int = 1
    knee_drop_pct: float = 10.0
    p99_rise_pct: float = 15.0
    min_ttft_rise_ms: float = 20.0
    min_itl_rise_ms: float = 2.0
    error_rate_rise_pp: float = 0.5


@dataclass
class Check:
    step: str
    metric: str
    baseline: float | None
    current: float | None
    verdict: str  # "ok", "REGRESSION", "skipped"
    note: str = ""


@dataclass
class Comparison:
    checks: list[Check] = field(default_factory=list)

    @property
    def regressions(self) -> list[Check]:
        return [c for c in self.checks if c.verdict == "REGRESSION"]

    @property
    def regressed(self) -> bool:
        return bool(self.regressions)


def _validate(summary: Any, label: str) -> None:
    if not isinstance(summary, dict) or summary.get("schema") != "locust-llm/summary":
        raise GateInputError(f"{label} is not a locust-llm summary.json (no 'schema': 'locust-llm/summary')")
    if summary.get("version") != 1:
        raise GateInputError(f"{label} has summary version {summary.get('version')!r}; this locust-llm reads 1")
    for key in ("knee", "steps", "model", "valid"):
        if key not in summary:
            raise GateInputError(f"{label} is truncated or malformed: no {key!r}")
    if not summary["valid"]:
        reasons = "; ".join(summary.get("invalid_reasons") or []) or "no reason given"
        raise GateInputError(f"{label} is an invalid run and cannot be judged: {reasons}")


def _capacity(baseline: dict[str, Any], current: dict[str, Any], key: str, t: Thresholds) -> Check:
    b, c = baseline["knee"].get(key), current["knee"].get(key)
    metric = key.replace("_users", "")
    if b is None or c is None:
        return Check("-", metric, b, c, "skipped", "not found in both runs")
    sweep = sorted({s["users"] for s in baseline["steps"]})
    steps_dropped = sum(1 for u in sweep if c < u <= b)
    pct = 100.0 * (b - c) / b if b else 0.0
    if steps_dropped > t.knee_drop_steps and pct > t.knee_drop_pct:
        return Check("-", metric, b, c, "REGRESSION", f"fell {steps_dropped} steps ({pct:.0f}%)")
    return Check("-", metric, b, c, "ok", f"{c - b:+g} users")


def _step_checks(baseline: dict[str, Any], current: dict[str, Any], t: Thresholds) -> list[Check]:
    model = current["model"]
    base = {s["users"]: s for s in baseline["steps"] if s["model"] == model}
    cur = {s["users"]: s for s in current["steps"] if s["model"] == model}
    knees = [k for k in (baseline["knee"].get("latency_knee_users"), current["knee"].get("latency_knee_users")) if k]
    limit = min(knees) if knees else None
    checks = []
    for users in sorted(base.keys() & cur.keys()):
        label = f"{users} users"
        if limit is not None and users >= limit:
            checks.append(Check(label, "p99 TTFT/ITL, errors", None, None, "skipped", f"at or past the knee ({limit})"))
            continue
        for column, minimum in (("ttft_p99_ms", t.min_ttft_rise_ms), ("itl_p99_ms", t.min_itl_rise_ms)):
            b, c = base[users].get(column), cur[users].get(column)
            if b is None or c is None:
                checks.append(Check(label, column, b, c, "skipped", "missing in one run"))
                continue
            rise = c - b
            pct = 100.0 * rise / b if b else 0.0
            bad = pct > t.p99_rise_pct and rise > minimum
            checks.append(Check(label, column, b, c, "REGRESSION" if bad else "ok", f"{pct:+.0f}% ({rise:+.1f} ms)"))
        eb, ec = error_rate(base[users]), error_rate(cur[users])
        bad = 100.0 * (ec - eb) > t.error_rate_rise_pp
        checks.append(Check(label, "error_rate_pct", round(100 * eb, 2), round(100 * ec, 2),
                            "REGRESSION" if bad else "ok", f"{100 * (ec - eb):+.2f} pp"))  # fmt: skip
    return checks


def compare(baseline: Any, current: Any, thresholds: Thresholds | None = None) -> Comparison:
    thresholds = thresholds or Thresholds()
    _validate(baseline, "the baseline")
    _validate(current, "the current run")
    if baseline["model"] != current["model"]:
        raise GateInputError(
            f"the runs test different models: baseline {baseline['model']!r}, current {current['model']!r}"
        )
    result = Comparison()
    result.checks.append(_capacity(baseline, current, "recommended_users", thresholds))
    result.checks.append(_capacity(baseline, current, "latency_knee_users", thresholds))
    result.checks += _step_checks(baseline, current, thresholds)
    return result


def format_comparison(result: Comparison) -> str:
    def fmt(v: float | None) -> str:
        return "-" if v is None else f"{v:g}"

    rows = [("step", "metric", "baseline", "current", "verdict", "note")]
    rows += [(c.step, c.metric, fmt(c.baseline), fmt(c.current), c.verdict, c.note) for c in result.checks]
    widths = [max(len(r[i]) for r in rows) for i in range(6)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    verdict = f"REGRESSION ({len(result.regressions)} check(s) failed)" if result.regressed else "no regression"
    return "\n".join([*lines, "", f"verdict: {verdict}"])
