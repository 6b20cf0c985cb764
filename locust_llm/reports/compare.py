"""The regression gate: a run's ``summary.json`` against a baseline's. Pure.

A run regresses when its capacity, its peak throughput, a p99 below the baseline's knee, or its failure rate at the
knee moves past its :class:`Thresholds` and beyond noise. Each rule: :class:`Thresholds`; docs/methodology.md, "The
regression gate".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

from locust_llm.measure.rows import series
from locust_llm.reports.summary import by_load

__all__ = [
    "Comparison",
    "GateInputError",
    "InvalidRunError",
    "Thresholds",
    "compare",
    "failures",
    "format_comparison",
    "rise_z",
]


class GateInputError(ValueError):
    """The two summaries cannot be compared; one line, ready for the user."""


class InvalidRunError(GateInputError):
    """The current run is invalid (its measurement cannot be trusted): it is not judged."""


TAIL_SAMPLES = 1000
"""A step's TTFT p99 is judged when both runs hold at least this many requests there (ten or more above it); below,
the p99 is reported and the p90 judged in its place, by the same rule."""


@dataclass(frozen=True)
class Thresholds:
    """A run regresses when its recommended concurrency or knee falls by more than ``knee_drop_steps`` steps and
    ``knee_drop_pct`` %; its peak output tok/s (or SLA capacity), or a shared step's, falls by more than its share; a
    p99 below the baseline's knee rises by more than ``p99_rise_pct`` % and its minimum (a TTFT p99 of fewer than
    :data:`TAIL_SAMPLES` requests: judged at p90); or the client failure rate at or below the knee rises by more than
    ``error_rate_rise_pp`` and beyond its sampling noise (:func:`rise_z`). The 429 share is reported, never judged."""

    knee_drop_steps: int = 1
    knee_drop_pct: float = 10.0
    p99_rise_pct: float = 15.0
    min_ttft_rise_ms: float = 20.0
    min_itl_rise_ms: float = 2.0
    error_rate_rise_pp: float = 0.5
    throughput_drop_pct: float = 10.0
    knee_p99_factor: float = 3.0
    share_confidence: float = 0.99
    """A share's rise counts only when a one-sided two-proportion test puts it beyond sampling noise at this
    confidence (:func:`rise_z`)."""


@dataclass
class Check:
    step: str
    metric: str
    baseline: float | None
    current: float | None
    verdict: str  # "ok", "REGRESSION", "skipped", "finding" (reported, never failing)
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
        kind = InvalidRunError if label == "the current run" else GateInputError
        raise kind(f"{label} is an invalid run and cannot be judged: {reasons}")


def _drop_pct(b: float, c: float) -> float:
    return 100.0 * (b - c) / b if b else 0.0


def _capacity(baseline: dict[str, Any], current: dict[str, Any], key: str, t: Thresholds) -> Check:
    b, c = baseline["knee"].get(key), current["knee"].get(key)
    metric = key.replace("_users", "")  # in open loop, the knee's values are rates (see summary.by_load)
    if b is None or c is None:
        return Check("-", metric, b, c, "skipped", "not found in both runs")
    sweep = sorted({s["users"] for s in baseline["steps"]})
    steps_dropped = sum(1 for u in sweep if c < u <= b)
    pct = _drop_pct(b, c)
    if key == "recommended_users" and b > 0 and c <= b / 2:
        return Check("-", metric, b, c, "REGRESSION", f"halved or worse ({pct:.0f}% lower)")
    if steps_dropped > t.knee_drop_steps and pct > t.knee_drop_pct:
        return Check("-", metric, b, c, "REGRESSION", f"fell {steps_dropped} steps ({pct:.0f}%)")
    return Check("-", metric, b, c, "ok", f"{c - b:+g} users")


def _steps(summary: dict[str, Any], model: str) -> dict[int, dict[str, Any]]:
    """The model's steps with requests, by load; an invalid step (one no answer of a valid run rests on) is not
    compared."""
    return {
        s["users"]: s
        for s in summary["steps"]
        if series(s) == model and s.get("requests") and s.get("valid") is not False
    }


def _continuous(baseline: dict[str, Any], current: dict[str, Any], t: Thresholds) -> list[Check]:
    model = current["model"]
    checks = []
    peaks = [
        max((s.get("output_tok_s") or 0.0 for s in _steps(r, model).values()), default=0.0) for r in (baseline, current)
    ]
    b, c = peaks
    if b > 0:
        bad = _drop_pct(b, c) > t.throughput_drop_pct
        checks.append(
            Check(
                "-",
                "peak_output_tok_s",
                round(b, 1),
                round(c, 1),
                "REGRESSION" if bad else "ok",
                f"{-_drop_pct(b, c):+.0f}%",
            )
        )
    sla = [r["knee"].get("sla_max_users_interpolated") or r["knee"].get("sla_max_users") for r in (baseline, current)]
    if all(v is not None for v in sla) and sla[0]:
        b_sla, c_sla = float(sla[0]), float(sla[1])
        bad = _drop_pct(b_sla, c_sla) > t.knee_drop_pct
        checks.append(
            Check(
                "-",
                "sla_capacity_users",
                b_sla,
                c_sla,
                "REGRESSION" if bad else "ok",
                f"{-_drop_pct(b_sla, c_sla):+.0f}%",
            )
        )
    return checks


def _step_checks(baseline: dict[str, Any], current: dict[str, Any], t: Thresholds) -> list[Check]:
    model = current["model"]
    base, cur = _steps(baseline, model), _steps(current, model)
    knee = baseline["knee"].get("latency_knee_users")
    unit = "req/s" if current.get("mode") == "rate" else "users"
    checks = []
    for users in sorted(base.keys() & cur.keys()):
        label = f"{users:g} {unit}"
        b_tok, c_tok = base[users].get("output_tok_s"), cur[users].get("output_tok_s")
        if b_tok and c_tok is not None:
            bad = _drop_pct(b_tok, c_tok) > t.throughput_drop_pct
            checks.append(
                Check(
                    label,
                    "output_tok_s",
                    b_tok,
                    c_tok,
                    "REGRESSION" if bad else "ok",
                    f"{-_drop_pct(b_tok, c_tok):+.0f}%",
                )
            )
        if knee is not None and users > knee:
            checks.append(Check(label, "p99 TTFT/ITL, errors", None, None, "skipped", f"past the knee ({knee})"))
            continue
        at_knee = users == knee
        for column, minimum in (("ttft_p99_ms", t.min_ttft_rise_ms), ("itl_p99_ms", t.min_itl_rise_ms)):
            b_step, c_step = base[users], cur[users]
            if column == "ttft_p99_ms" and min(b_step.get("requests") or 0, c_step.get("requests") or 0) < TAIL_SAMPLES:
                # a p99 of fewer than TAIL_SAMPLES requests is its slowest few: one stall of a machine sets it
                p99 = _p99_check(label, column, b_step.get(column), c_step.get(column), minimum, t, at_knee)
                if p99.verdict != "skipped":
                    p99.verdict, p99.note = "finding", f"{p99.note}; under {TAIL_SAMPLES} requests: judged at p90"
                checks.append(p99)
                column = "ttft_p90_ms"
            checks.append(_p99_check(label, column, b_step.get(column), c_step.get(column), minimum, t, at_knee))
        checks.append(_share_check(label, "error_rate_pct", failures(base[users]), failures(cur[users]), t))
        refused = [(s.get("status_429") or 0, s.get("requests") or 0) for s in (base[users], cur[users])]
        if refused[0][0] or refused[1][0]:  # behind a provider cap: what users felt is the error rate above
            checks.append(_share_check(label, "status_429_pct", refused[0], refused[1], t, judged=False))
    return checks


def failures(step: dict[str, Any]) -> tuple[int, int]:
    """``(failed, of)``: the client requests that failed and all of them (retries and fallbacks are inside a client
    request: what users felt); the failed attempts and all attempts of a run without client figures."""
    clients = step.get("client_requests") or 0
    if clients:
        return clients - (step.get("client_ok") or 0), clients
    return step.get("errors") or 0, step.get("requests") or 0


def rise_z(base: tuple[int, int], current: tuple[int, int]) -> float:
    """The two-proportion z statistic of a share's rise from ``base`` to ``current`` (``(count, of)`` each), with the
    pooled share's standard error: ``(p_c - p_b) / sqrt(p (1 - p) (1 / n_b + 1 / n_c))``; 0 when either is empty or
    nothing happened in both."""
    (kb, nb), (kc, nc) = base, current
    if not nb or not nc:
        return 0.0
    pooled = (kb + kc) / (nb + nc)
    se = math.sqrt(pooled * (1 - pooled) * (1 / nb + 1 / nc))
    return (kc / nc - kb / nb) / se if se else 0.0


def _share_check(
    label: str, metric: str, base: tuple[int, int], current: tuple[int, int], t: Thresholds, judged: bool = True
) -> Check:
    """A share's rise regresses when it is above the minimum (``error_rate_rise_pp``) and beyond sampling noise
    (:func:`rise_z` above the one-sided normal quantile of ``share_confidence``); one not ``judged`` is a finding."""
    b = base[0] / base[1] if base[1] else 0.0
    c = current[0] / current[1] if current[1] else 0.0
    z, needed = rise_z(base, current), NormalDist().inv_cdf(t.share_confidence)
    noise = f"{'beyond' if z > needed else 'within'} sampling noise: z {z:.2f}, {needed:.2f} needed"
    note = f"{100 * (c - b):+.2f} pp ({noise})"
    if not judged:
        return Check(label, metric, round(100 * b, 2), round(100 * c, 2), "finding", note + "; reported, not judged")
    bad = 100.0 * (c - b) > t.error_rate_rise_pp and z > needed
    return Check(label, metric, round(100 * b, 2), round(100 * c, 2), "REGRESSION" if bad else "ok", note)


def _p99_check(
    label: str, column: str, b: float | None, c: float | None, minimum: float, t: Thresholds, at_knee: bool
) -> Check:
    if b is None or c is None:
        return Check(label, column, b, c, "skipped", "missing in one run")
    rise = c - b
    pct = 100.0 * rise / b if b else 0.0
    if at_knee:
        bad = c > t.knee_p99_factor * b and rise > minimum
        note = f"{pct:+.0f}% ({rise:+.1f} ms; at the knee: {t.knee_p99_factor:g}x allowed)"
    else:
        bad = pct > t.p99_rise_pct and rise > minimum
        note = f"{pct:+.0f}% ({rise:+.1f} ms)"
    return Check(label, column, b, c, "REGRESSION" if bad else "ok", note)


def compare(baseline: Any, current: Any, thresholds: Thresholds | None = None) -> Comparison:
    thresholds = thresholds or Thresholds()
    _validate(baseline, "the baseline")
    _validate(current, "the current run")
    if baseline["model"] != current["model"]:
        raise GateInputError(
            f"the runs test different models: baseline {baseline['model']!r}, current {current['model']!r}"
        )
    modes = [summary.get("mode", "users") for summary in (baseline, current)]
    if modes[0] != modes[1]:
        raise GateInputError(f"the runs load the endpoint differently: baseline by {modes[0]}, current by {modes[1]}")
    baseline, current = by_load(baseline), by_load(current)  # open loop: the loads are the offered rates
    result = Comparison()
    result.checks.append(_capacity(baseline, current, "recommended_users", thresholds))
    result.checks.append(_capacity(baseline, current, "latency_knee_users", thresholds))
    result.checks += _continuous(baseline, current, thresholds)
    result.checks += _step_checks(baseline, current, thresholds)
    walls = [(summary.get("diagnosis") or {}).get("wall") for summary in (baseline, current)]
    if any(walls):  # what binds is reported, never judged: a change of wall alone is no regression
        same = walls[0] == walls[1]
        note = f"{walls[0] or 'none'} -> {walls[1] or 'none'}" + ("" if same else "; reported, not judged")
        result.checks.append(Check("all", "wall", None, None, "ok" if same else "finding", note))
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
