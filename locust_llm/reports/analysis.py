"""Capacity analysis of one model's steps: knees, saturation, SLA capacity, the server's own evidence, cost. Pure.

In increasing load: the latency knee (:mod:`locust_llm.measure.knee`) of TTFT, ITL and E2E p99; throughput
saturation (85 % of the peak, never beaten by 15 %); the SLA capacity, interpolated; the provider cap (over 1 % HTTP
429); the first sustained server queue and the first step over the error budget (:mod:`locust_llm.measure.evidence`);
the recommendation, the lowest load every limit allows, and the highest load each answer rests on. Each rule in full:
docs/methodology.md, "The capacity analysis".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, cast

from locust_llm.measure.evidence import behind, over_budget, server_queue
from locust_llm.measure.knee import Knee, latency_knee
from locust_llm.measure.rows import StepRow, value
from locust_llm.measure.sla import Prices, Sla, judged
from locust_llm.measure.thresholds import CAP_SHARE, ERROR_BUDGET, SATURATION_MARGIN, SATURATION_SHARE

__all__ = ["RATE_KEYS", "Analysis", "analyze", "rate_saturation"]

RATE_KEYS = {
    "latency_knee_users": "latency_knee_rate_req_s",
    "throughput_saturation_users": "throughput_saturation_rate_req_s",
    "sla_max_users": "sla_max_rate_req_s",
    "sla_max_users_interpolated": "sla_max_rate_req_s_interpolated",
    "provider_cap_users": "provider_cap_rate_req_s",
    "server_queue_users": "server_queue_rate_req_s",
    "error_budget_users": "error_budget_rate_req_s",
    "recommended_users": "recommended_rate_req_s",
}
"""In open loop, the names of the results (which hold offered rates)."""


def _at(x: float, unit: str) -> str:
    return f"{x:g} {unit}"


@dataclass
class Analysis:
    model: str
    users: Sequence[float]  # the loads: users, or offered requests/s in open loop
    latency_knee_users: float | None
    latency_knee_bracket: tuple[float, float] | None
    latency_knee_confidence: str
    latency_knees: dict[str, dict[str, Any]]
    throughput_saturation_users: float | None
    throughput_note: str
    sla_max_users: float | None
    sla_max_users_interpolated: float | None
    sla_note: str
    provider_cap_users: float | None
    provider_cap_share: float | None
    server_queue_users: float | None
    server_queue_note: str
    error_budget_users: float | None
    error_budget_note: str
    recommended_users: float | None
    recommended_reason: str
    provider_is_the_wall: bool
    binding: str = "none"
    """The limit the recommendation rests on: ``provider_cap``, ``sla_capacity``, ``server_queue``, ``error_budget``,
    ``latency_knee``, ``throughput_saturation``, or ``none`` (no limit reached, or a fallback)."""
    rests_on: dict[str, float | None] = field(default_factory=dict)
    """The highest load each answer rests on (its steps up to there decide it); None: on every step."""
    goodput: list[dict[str, Any]] = field(default_factory=list)
    cost: dict[str, Any] = field(default_factory=dict)
    mode: str = "users"  # or "rate": the loads are offered requests/s

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["latency_knee_bracket"] = list(self.latency_knee_bracket) if self.latency_knee_bracket else None
        if self.mode == "rate":
            out = {RATE_KEYS.get(k, k): v for k, v in out.items()}
        return out


def _knee_dict(knee: Knee) -> dict[str, Any]:
    return {
        "users": knee.users,
        "bracket": list(knee.bracket) if knee.bracket else None,
        "note": knee.reason,
        "confidence": knee.confidence,
    }


def throughput_saturation(
    steps: Sequence[StepRow], share: float = SATURATION_SHARE, margin: float = SATURATION_MARGIN, load: str = "users"
) -> tuple[int | None, str]:
    """The lowest step on the throughput plateau that no later step contradicts (module docstring)."""
    key = "output_tok_s" if all(s.get("output_tok_s") is not None for s in steps) else "req_s"
    points: list[tuple[int, float]] = [(s["users"], float(value(s, key))) for s in steps if value(s, key) is not None]
    unit = "output tok/s" if key == "output_tok_s" else "req/s"
    if len(points) < 2 or max(t for _, t in points) <= 0:
        return None, "needs at least 2 steps with throughput"
    peak = max(t for _, t in points)
    for k, (users, t) in enumerate(points[:-1]):
        later = max(t_j for _, t_j in points[k + 1 :])
        if t >= share * peak and later <= (1 + margin) * t:
            return users, (
                f"{t:.0f} {unit} at {_at(users, load)}, {100 * t / peak:.0f}% of the peak {peak:.0f}; no later step "
                f"adds more than {100 * margin:g}% (the most: {later:.0f})"
            )
    last_users, last = points[-1]
    return None, f"throughput still grows at the last step ({last:.0f} {unit} at {_at(last_users, load)})"


def rate_saturation(steps: Sequence[StepRow]) -> tuple[float | None, str]:
    """Open loop: the highest offered rate kept up with before the first step that fell behind
    (:func:`locust_llm.measure.evidence.behind`)."""
    kept: float | None = None
    for step in steps:
        offered = step.get("offered_req_s") or 0.0
        why = behind(cast(Mapping[str, Any], step))
        if why is not None:
            if kept is None:
                return None, f"already behind at the lowest rate, {offered:g} req/s ({why})"
            return kept, f"kept up with {kept:g} req/s; fell behind at {offered:g} req/s ({why})"
        kept = offered
    return None, f"kept up with every offered rate, up to {kept:g} req/s"


def sla_capacity(steps: Sequence[StepRow], sla: Sla, load: str = "users") -> tuple[int | None, float | None, str]:
    if not sla.given:
        return None, None, "no SLA given"
    last_ok = None
    noun = "concurrency" if load == "users" else "rate"
    for step in steps:
        broken = sla.failures(step)
        if broken:
            where = f"at {_at(step['users'], load)} " + "; ".join(broken)
            if last_ok is None:
                return None, None, f"no tested {noun} meets the SLA: {where}"
            return last_ok["users"], _interpolate(last_ok, step, sla), where
        last_ok = step
    assert last_ok is not None
    return last_ok["users"], None, "every step meets the SLA"


def _interpolate(a: StepRow, b: StepRow, sla: Sla) -> float:
    estimates = []
    for column, limit in (
        ("ttft_p99_ms", sla.ttft_p99_ms),
        ("itl_p99_ms", sla.itl_p99_ms),
        ("e2e_p99_ms", sla.e2e_p99_ms),
    ):
        column = judged(cast(Mapping[str, Any], b), column)
        va, vb = value(a, column), value(b, column)
        if limit is None or va is None or vb is None or vb <= limit:
            continue
        estimates.append(a["users"] + (b["users"] - a["users"]) * (limit - va) / (vb - va) if vb != va else a["users"])
    if not estimates:
        return float(b["users"])
    return round(max(float(a["users"]), min(estimates)), 1)


def _share_below(step: StepRow, prefix: str, limit: float) -> float:
    """P(metric <= limit), interpolated between the step's p50, p90 and p99 (docs/methodology.md, goodput)."""
    points = [(q, value(step, f"{prefix}_p{int(q * 100)}_ms")) for q in (0.5, 0.9, 0.99)]
    known = [(q, v) for q, v in points if v is not None]
    if not known:
        return 0.0
    if limit >= known[-1][1]:
        return 1.0
    previous_q, previous_v = 0.0, 0.0
    for q, v in known:
        if limit < v:
            span = v - previous_v
            return previous_q + (q - previous_q) * ((limit - previous_v) / span if span > 0 else 0.0)
        previous_q, previous_v = q, v
    return 1.0


def searched(
    search: Mapping[str, Any], knee: Knee, sla_result: tuple[Any, Any, str]
) -> tuple[Knee, tuple[Any, Any, str]]:
    """The search's answer in place of the curve method it searched for (docs/methodology.md, search runs)."""
    low, high = search["bracket"]
    note = f"search: {search['reason']}"
    if search["criterion"] == "knee":
        closed = low is not None and high is not None
        sure = "high" if closed and search.get("complete") else "low"
        return Knee(low, (low, high) if closed else None, note, sure), sla_result
    unknown = Knee(None, None, "not measured: an SLA search does not sample the curve evenly (use --search knee)")
    if low is not None and high is None:
        return unknown, (low, None, f"every probe met the SLA ({note})")
    return unknown, (low, None, note)


def goodput(steps: Sequence[StepRow], sla: Sla, exact: bool) -> list[dict[str, Any]]:
    out = []
    for step in steps:
        if exact or not sla.given:
            out.append({"users": step["users"], "goodput_req_s": step.get("goodput_req_s"), "estimated": False})
            continue
        duration = step.get("duration_s") or 0.0
        ok_rate = (step.get("ok") or 0) / duration if duration else 0.0
        shares = [1.0]
        for prefix, limit in (("ttft", sla.ttft_p99_ms), ("itl", sla.itl_p99_ms), ("e2e", sla.e2e_p99_ms)):
            if limit is not None:
                shares.append(_share_below(step, prefix, limit))
        out.append({"users": step["users"], "goodput_req_s": round(ok_rate * min(shares), 4), "estimated": True})
    return out


def provider_cap(steps: Sequence[StepRow], share: float = CAP_SHARE) -> tuple[int | None, float | None]:
    for step in steps:
        requests = step.get("requests") or 0
        n429 = step.get("status_429")
        if requests and n429 is not None and n429 / requests > share:
            return step["users"], round(n429 / requests, 4)
    return None, None


def first_queue(steps: Sequence[StepRow], load: str = "users") -> tuple[float | None, str]:
    """The first step whose server shows a sustained queue (:func:`locust_llm.measure.evidence.server_queue`)."""
    for step in steps:
        queue = server_queue(cast(Mapping[str, Any], step))
        if queue is not None:
            waiting, running = queue
            return step["users"], f"{waiting:g} waiting and {running:g} running at {_at(step['users'], load)}"
    seen = any(step.get("server_scrapes") for step in steps)
    return None, "no sustained queue" if seen else "no server metrics"


def first_over_budget(steps: Sequence[StepRow], budget: float, load: str = "users") -> tuple[float | None, str]:
    """The first step over the error budget (:func:`locust_llm.measure.evidence.over_budget`)."""
    for step in steps:
        errors = over_budget(cast(Mapping[str, Any], step), budget)
        if errors is not None:
            failed, of = errors
            return step["users"], (
                f"{100 * errors.share:.1f}% of client requests failed other than with HTTP 429 ({failed} of {of}) at "
                f"{_at(step['users'], load)}, over the {100 * budget:g}% error budget"
            )
    return None, f"within the {100 * budget:g}% error budget at every step"


def cost(steps: Sequence[StepRow], prices: Prices) -> dict[str, Any]:
    if not prices.given:
        return {}
    per_step = []
    for step in steps:
        usd = prices.cost_usd(
            step.get("prompt_tokens") or 0, step.get("completion_tokens") or 0, step.get("cached_prompt_tokens") or 0
        )
        completion, ok = step.get("completion_tokens") or 0, step.get("ok") or 0
        per_step.append(
            {
                "users": step["users"],
                "cost_usd": round(usd, 6),
                "output_tokens_per_usd": round(completion / usd, 1) if usd > 0 else None,
                "usd_per_1k_responses": round(1000 * usd / ok, 6) if ok else None,
            }
        )
    return {"prices": prices.as_dict(), "steps": per_step}


@dataclass(frozen=True)
class Limit:
    """One limit on the recommendation: which, the highest load it allows, why, and the highest load it rests on (the
    first step past it; None: every step)."""

    name: str
    load: float
    reason: str
    rests_on: float | None


def _next_load(loads: Sequence[float], load: float | None) -> float | None:
    """The first tested load above ``load`` (the step that showed a limit), or None."""
    return next((u for u in loads if load is not None and u > load), None)


def recommend(limits: Sequence[Limit], loads: Sequence[float], noun: str, unit: str) -> Limit:
    """The lowest load every limit allows (on a tie the first listed binds); without one, the highest tested load,
    resting on every step."""
    if not limits:
        top = max(loads) if loads else 0
        return Limit("none", top, f"no limit reached up to {_at(top, unit)}: test a higher {noun}", None)
    return min(limits, key=lambda limit: limit.load)


def analyze(
    model: str,
    steps: Sequence[StepRow],
    sla: Sla | None = None,
    prices: Prices | None = None,
    *,
    goodput_exact: bool = False,
    cap_share: float = CAP_SHARE,
    search: Mapping[str, Any] | None = None,
    error_budget: float = ERROR_BUDGET,
) -> Analysis:
    """Everything in the module docstring, for one model's steps (steps with no completed request are left out)."""
    sla = sla or Sla()
    prices = prices or Prices()
    mode = "rate" if any(s.get("offered_req_s") is not None for s in steps) else "users"
    load, noun = ("users", "concurrency") if mode == "users" else ("req/s", "rate")
    if mode == "rate":  # the offered rate is the load every method below works on
        steps = [cast(StepRow, {**s, "users": s.get("offered_req_s") or 0.0}) for s in steps]
    steps = sorted((s for s in steps if s.get("requests") != 0), key=lambda s: s["users"])
    if search is not None:  # one probe per load: the last run at it
        steps = list({s["users"]: s for s in steps}.values())
    users = [s["users"] for s in steps]
    decode = [value(s, "itl_p50_ms") for s in steps]
    usable = [s.get("valid") is not False for s in steps]  # an invalid step never sets a spike aside
    knees = {
        metric: latency_knee(
            users, [value(s, f"{metric}_p99_ms") for s in steps], decode if metric == "ttft" else None, usable
        )
        for metric in ("ttft", "itl", "e2e")
    }
    sat_users, sat_note = rate_saturation(steps) if mode == "rate" else throughput_saturation(steps, load=load)
    sla_users, sla_interp, sla_note = sla_capacity(steps, sla, load)
    if search is not None:
        knees["ttft"], (sla_users, sla_interp, sla_note) = searched(
            search, knees["ttft"], (sla_users, sla_interp, sla_note)
        )
    cap_users, cap_share_seen = provider_cap(steps, cap_share)
    queue_users, queue_note = first_queue(steps, load)
    errors_users, errors_note = first_over_budget(steps, error_budget, load)

    def below(x: float) -> float:
        lower = [u for u in users if u < x]
        return lower[-1] if lower else 0

    def past(name: str, x: float, why: str) -> Limit:
        allowed = below(x)
        prefix = "" if allowed else f"every tested {noun} is past capacity: "
        return Limit(name, allowed, prefix + why, x)

    knee = knees["ttft"]
    sla_binds = sla_users is not None and not sla_note.startswith("every")
    rests_on: dict[str, float | None] = {
        "latency_knee": knee.bracket[1] if knee.bracket else knee.users,
        "throughput_saturation": _next_load(users, sat_users) if mode == "rate" else None,
        "sla_capacity": _next_load(users, sla_users) if sla_binds else (users[0] if sla.given and users else None),
        "provider_cap": cap_users,
        "server_queue": queue_users,
        "error_budget": errors_users,
    }
    limits: list[Limit] = []  # on a tie the first listed binds: the provider's and server's evidence before curves
    if cap_users is not None:
        limits.append(past("provider_cap", cap_users, "provider rate limit (HTTP 429)"))
    if sla_binds and sla_users is not None:
        limits.append(Limit("sla_capacity", sla_users, "SLA capacity", rests_on["sla_capacity"]))
    if queue_users is not None:
        limits.append(past("server_queue", queue_users, f"server queue: {queue_note}"))
    if errors_users is not None:
        limits.append(past("error_budget", errors_users, f"error budget: {errors_note}"))
    if knee.users is not None:
        limits.append(Limit("latency_knee", knee.users, "latency knee (TTFT p99)", rests_on["latency_knee"]))
    if sat_users is not None:
        limits.append(
            Limit("throughput_saturation", sat_users, "throughput saturation", rests_on["throughput_saturation"])
        )
    chosen = recommend(limits, users, noun, load)
    recommended: float | None = chosen.load
    reason, rests = chosen.reason, chosen.rests_on
    first = users[0] if users else None
    if mode == "rate" and sat_users is None and sat_note.startswith("already behind"):  # never a rate not served
        recommended, reason, rests = 0, f"no offered rate was kept up with: {sat_note}", first
    if sla.given and sla_users is None:
        recommended, reason, rests = 0, f"no tested {noun} meets the SLA", first
    if search is not None and list(search["bracket"]) == [None, None]:
        recommended, reason = None, f"the search decided nothing ({search['reason']})"
    return Analysis(
        model=model,
        users=users,
        latency_knee_users=knee.users,
        latency_knee_bracket=knee.bracket,
        latency_knee_confidence=knee.confidence,
        latency_knees={m: _knee_dict(k) for m, k in knees.items()},
        throughput_saturation_users=sat_users,
        throughput_note=sat_note,
        sla_max_users=sla_users,
        sla_max_users_interpolated=sla_interp,
        sla_note=sla_note,
        provider_cap_users=cap_users,
        provider_cap_share=cap_share_seen,
        server_queue_users=queue_users,
        server_queue_note=queue_note,
        error_budget_users=errors_users,
        error_budget_note=errors_note,
        recommended_users=recommended,
        recommended_reason=reason,
        provider_is_the_wall=chosen.name == "provider_cap" and reason == chosen.reason,
        binding=chosen.name if reason == chosen.reason else "none",
        rests_on={**rests_on, "recommended": rests},
        goodput=goodput(steps, sla, goodput_exact),
        cost=cost(steps, prices),
        mode=mode,
    )
