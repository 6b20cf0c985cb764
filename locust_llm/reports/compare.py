"""The regression gate: a run's ``summary.json`` against a baseline's. Pure.

A run regresses when its capacity, its peak throughput, a p99 below the baseline's knee, or its failure rate at the
knee moves past its :class:`Thresholds` and beyond chance. A p99's rise is judged by its distribution-free interval
(:mod:`locust_llm.measure.intervals`, from the steps' histograms) at any sample size: its p-value is the least
``1 - c`` at which the current interval at confidence ``c`` lies above the baseline's by more than the allowed rise;
a failure share's rise by Fisher's exact test; a knee's fall by the two runs' knee bootstraps. The run's statistical
checks are one family, judged by Holm's step-down at ``1 - --gate-confidence``. Each rule: docs/methodology.md, "The
regression gate".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from locust_llm.measure.histogram import Histogram
from locust_llm.measure.intervals import Ranks, quantile_interval
from locust_llm.measure.rows import series
from locust_llm.reports.summary import by_load
from locust_llm.reports.target import changes

__all__ = [
    "Comparison",
    "GateInputError",
    "InvalidRunError",
    "Thresholds",
    "compare",
    "failures",
    "format_comparison",
    "holm",
    "knee_fall_p",
    "rise_p",
    "separation_p",
]


class GateInputError(ValueError):
    """The two summaries cannot be compared; one line, ready for the user."""


class InvalidRunError(GateInputError):
    """The current run is invalid (its measurement cannot be trusted): it is not judged."""


@dataclass(frozen=True)
class Thresholds:
    """A run regresses when its recommended concurrency or knee falls by more than ``knee_drop_steps`` steps and
    ``knee_drop_pct`` % (where both runs have knee bootstraps, beyond chance: :func:`knee_fall_p` at most
    ``1 - share_confidence``, judged apart from the statistical family); its peak output tok/s (or SLA capacity), or
    a shared step's, falls by more than its share; a p99 below the baseline's knee rises by more than
    ``p99_rise_pct`` % and its minimum beyond chance (:func:`separation_p`); or the client failure rate at or below
    the knee rises by more than ``error_rate_rise_pp`` and beyond chance (:func:`rise_p`). The statistical checks
    are judged together by Holm's step-down at ``1 - share_confidence``. The 429 share is reported, never judged."""

    knee_drop_steps: int = 1
    knee_drop_pct: float = 10.0
    p99_rise_pct: float = 15.0
    min_ttft_rise_ms: float = 20.0
    min_itl_rise_ms: float = 2.0
    error_rate_rise_pp: float = 0.5
    throughput_drop_pct: float = 10.0
    knee_p99_factor: float = 3.0
    share_confidence: float = 0.99
    """The confidence of the run's statistical checks as one family (``--gate-confidence``): Holm's step-down at
    ``1 - share_confidence`` (:func:`holm`)."""
    require_same_target: bool = False
    """``--gate-require-same-target``: a changed target (``reports.target.changes``) is an input error, not judged."""


@dataclass
class Check:
    step: str
    metric: str
    baseline: float | None
    current: float | None
    verdict: str  # "ok", "REGRESSION", "skipped", "finding" (reported, never failing); "test" until Holm judges it
    note: str = ""
    p_value: float | None = None  # a statistical check's, judged with the others (:func:`holm`)
    large: bool = True  # a statistical check's effect is past its minimum (a share's rise), so a rejection regresses


@dataclass
class Comparison:
    checks: list[Check] = field(default_factory=list)
    target_changes: list[str] = field(default_factory=list)  # what the target's fingerprints say changed

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


def _fell(key: str, b: float, c: float, sweep: Sequence[float], t: Thresholds) -> str | None:
    """How a capacity fell from ``b`` to ``c`` past rule 1 (docs/methodology.md, "The regression gate"), or None."""
    steps_dropped = sum(1 for u in sweep if c < u <= b)
    pct = _drop_pct(b, c) if math.isfinite(b) else 100.0
    if key == "recommended_users" and b > 0 and c <= b / 2:
        return f"halved or worse ({pct:.0f}% lower)"
    if steps_dropped > t.knee_drop_steps and pct > t.knee_drop_pct:
        return f"fell {steps_dropped} steps ({pct:.0f}%)"
    return None


def knee_fall_p(key: str, baseline: dict[str, Any], current: dict[str, Any], t: Thresholds) -> float | None:
    """The chance that the knee did not fall, from the two runs' knee bootstraps (``latency_knee_resampled``): over
    the pairs of one resample of each (independent), the share whose knees did not fall past the rule; a resample
    with no knee counts as past the sweep. For the recommendation only when both runs recommend their knee. None
    without both bootstraps (an older run, a search)."""
    if key == "recommended_users" and not all(
        str(s["knee"].get("recommended_reason") or "").startswith("latency knee") for s in (baseline, current)
    ):
        return None
    both = [s["knee"].get("latency_knee_resampled") for s in (baseline, current)]
    if not all(both):
        return None
    sweep = sorted({s["users"] for s in baseline["steps"]})
    held = 0.0
    for b, share_b in both[0]:
        for c, share_c in both[1]:
            fell = _fell(key, math.inf if b is None else b, math.inf if c is None else c, sweep, t)
            held += share_b * share_c * (fell is None)
    return min(1.0, held)


def _capacity(baseline: dict[str, Any], current: dict[str, Any], key: str, t: Thresholds) -> Check:
    b, c = baseline["knee"].get(key), current["knee"].get(key)
    metric = key.replace("_users", "")  # in open loop, the knee's values are rates (see summary.by_load)
    if b is None or c is None:
        return Check("-", metric, b, c, "skipped", "not found in both runs")
    fell = _fell(key, b, c, sorted({s["users"] for s in baseline["steps"]}), t)
    if fell is None:
        return Check("-", metric, b, c, "ok", f"{c - b:+g} users")
    p = knee_fall_p(key, baseline, current, t)
    if p is None:
        return Check("-", metric, b, c, "REGRESSION", fell)
    alpha = 1 - t.share_confidence
    if p <= alpha:
        return Check("-", metric, b, c, "REGRESSION", f"{fell}; the knees' bootstraps agree (p {p:.3g} <= {alpha:g})")
    return Check("-", metric, b, c, "ok", f"{fell}, but within the knees' noise (p {p:.3g} > {alpha:g})", p)


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
        for metric, minimum in (("ttft", t.min_ttft_rise_ms), ("itl", t.min_itl_rise_ms)):
            hists = _histograms(baseline, base[users], metric), _histograms(current, cur[users], metric)
            checks.append(_p99_check(label, metric, base[users], cur[users], hists, minimum, t, at_knee))
        checks.append(_share_check(label, "error_rate_pct", failures(base[users]), failures(cur[users]), t))
        refused = [(s.get("status_429") or 0, s.get("requests") or 0) for s in (base[users], cur[users])]
        if refused[0][0] or refused[1][0]:  # behind a provider cap: what users felt is the error rate above
            checks.append(_share_check(label, "status_429_pct", refused[0], refused[1], t, judged=False))
    return checks


def _histograms(summary: dict[str, Any], step: dict[str, Any], metric: str) -> Histogram | None:
    """A step's steady histogram of ``metric`` from the summary's ``histograms`` (None: a summary without them)."""
    wire = ((summary.get("histograms") or {}).get(str(step.get("step"))) or {}).get(metric)
    return Histogram.from_wire(wire) if wire else None


def failures(step: dict[str, Any]) -> tuple[int, int]:
    """``(failed, of)``: the client requests that failed and all of them (retries and fallbacks are inside a client
    request: what users felt); the failed attempts and all attempts of a run without client figures."""
    clients = step.get("client_requests") or 0
    if clients:
        return clients - (step.get("client_ok") or 0), clients
    return step.get("errors") or 0, step.get("requests") or 0


def rise_p(base: tuple[int, int], current: tuple[int, int]) -> float:
    """The one-sided p-value of a share's rise from ``base`` to ``current`` (``(count, of)`` each): Fisher's exact
    test of the 2x2 table (``alternative="greater"``); 1 when either is empty."""
    (kb, nb), (kc, nc) = base, current
    if not nb or not nc:
        return 1.0
    from scipy.stats import fisher_exact  # here: importing scipy.stats costs a process 0.5 s

    return float(fisher_exact([[kc, nc - kc], [kb, nb - kb]], alternative="greater")[1])


def separation_p(base: Histogram, current: Histogram, q: float, allowed: float) -> float:
    """The least ``1 - c`` at which the current ``q``-quantile's interval at confidence ``c`` lies above the
    baseline's by more than ``allowed`` (their raw units): a p-value for "the quantile rose by more than allowed",
    since under that null each interval misses on its side with at most ``(1 - c) / 2``. 1 when they never do."""

    base_ranks, current_ranks = Ranks(base), Ranks(current)

    def separated(alpha: float) -> bool:
        low = current_ranks.interval(q, 1 - alpha)[0]
        high = base_ranks.interval(q, 1 - alpha)[1]
        return low is not None and high is not None and low - high > allowed

    lo, hi = 1e-12, 1.0 - 1e-9
    if not separated(hi):
        return 1.0
    if separated(lo):
        return lo
    for _ in range(30):  # bisect the level on a log scale (to a few per cent): the intervals narrow as alpha grows
        mid = math.sqrt(lo * hi)
        if separated(mid):
            hi = mid
        else:
            lo = mid
    return hi


def holm(checks: list[Check], alpha: float) -> None:
    """Holm's step-down over ``checks`` (each with a ``p_value``): sorted by p, the ``i``-th (from 0) of ``m`` is
    rejected while ``p <= alpha / (m - i)``; the first not rejected stops it. A rejected check regresses when its
    effect is large enough, else it is ``ok`` (certain but small); each note says what decided."""
    tests = sorted((c for c in checks if c.verdict == "test"), key=lambda c: c.p_value or 1.0)
    rejecting = True
    for i, check in enumerate(tests):
        level = alpha / (len(tests) - i)
        rejecting = rejecting and (check.p_value or 1.0) <= level
        check.verdict = "REGRESSION" if rejecting and check.large else "ok"
        check.note += f" (p {check.p_value:.3g}, Holm's level {level:.3g} of {len(tests)})"


def _share_check(
    label: str, metric: str, base: tuple[int, int], current: tuple[int, int], t: Thresholds, judged: bool = True
) -> Check:
    """A share's rise: judged (with the run's other checks) beyond chance by :func:`rise_p`, and a regression only
    above the minimum (``error_rate_rise_pp``); one not ``judged`` is a finding with its p-value."""
    b = base[0] / base[1] if base[1] else 0.0
    c = current[0] / current[1] if current[1] else 0.0
    p = rise_p(base, current)
    note = f"{100 * (c - b):+.2f} pp"
    if not judged:
        return Check(
            label, metric, round(100 * b, 2), round(100 * c, 2), "finding", note + f" (p {p:.2g}); reported, not judged"
        )
    large = 100.0 * (c - b) > t.error_rate_rise_pp
    return Check(label, metric, round(100 * b, 2), round(100 * c, 2), "test", note, p, large)


def _p99_check(
    label: str,
    metric: str,
    base: dict[str, Any],
    cur: dict[str, Any],
    hists: tuple[Histogram | None, Histogram | None],
    minimum: float,
    t: Thresholds,
    at_knee: bool,
) -> Check:
    """A p99's rise beyond the allowed (``p99_rise_pct`` % and the minimum; at the baseline's knee, up to
    ``knee_p99_factor`` times), judged by :func:`separation_p` at any sample size; one whose interval is open is not
    judged, and says so."""
    column = f"{metric}_p99_ms"
    b, c = base.get(column), cur.get(column)
    if b is None or c is None:
        return Check(label, column, b, c, "skipped", "missing in one run")
    allowed_ms = max(minimum, (t.knee_p99_factor - 1 if at_knee else t.p99_rise_pct / 100) * b)
    note = f"{100 * (c - b) / b if b else 0.0:+.0f}% ({c - b:+.1f} ms; {allowed_ms:.1f} ms allowed)"
    hb, hc = hists
    if hb is None or hc is None:
        return Check(label, column, b, c, "finding", note + "; not judged: a run without histograms (an older one)")
    alpha = 1 - t.share_confidence
    if 2 * 0.99**hb.count > alpha:  # the least p any outcome gives: the baseline's p99 is bounded only at that level
        low, high = quantile_interval(hb, 0.99)
        ends = ("-" if low is None else f"{low / 1e6:.0f}", "past its slowest" if high is None else f"{high / 1e6:.0f}")
        shown = f"{ends[0]} to {ends[1]}"
        needed = math.ceil(math.log(alpha / 2) / math.log(0.99))
        return Check(
            label,
            column,
            b,
            c,
            "finding",
            f"{note}; not judged: the baseline's p99 of {hb.count} samples: interval {shown} ms ({needed} needed)",
        )
    p = separation_p(hb, hc, 0.99, allowed_ms * 1e6)
    return Check(label, column, b, c, "test", note, p)


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
    changed = changes(baseline.get("target"), current.get("target"))
    if changed and thresholds.require_same_target:
        raise GateInputError(
            f"the target changed since the baseline ({'; '.join(changed)}): not judged (--gate-require-same-target)"
        )
    baseline, current = by_load(baseline), by_load(current)  # open loop: the loads are the offered rates
    result = Comparison(target_changes=changed)
    result.checks.append(_capacity(baseline, current, "recommended_users", thresholds))
    result.checks.append(_capacity(baseline, current, "latency_knee_users", thresholds))
    result.checks += _continuous(baseline, current, thresholds)
    result.checks += _step_checks(baseline, current, thresholds)
    holm(result.checks, 1 - thresholds.share_confidence)  # the run's statistical checks, as one family
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
    target = (
        [f"the target changed since the baseline: {'; '.join(result.target_changes)}"] if result.target_changes else []
    )
    return "\n".join([*lines, "", *target, f"verdict: {verdict}"])
