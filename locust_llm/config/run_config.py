""":class:`RunConfig`: every setting of a run, typed and validated once from the flag table. Pure.

:meth:`RunConfig.from_options` parses all flags and raises a one-line
:class:`~locust_llm.config.parsers.ConfigError`; the builders (:func:`sla_from`, ...) make the typed pieces other
modules use, and ``locust-llm report``/``compare`` use them on their own flags. The API key is never printable: it is
left out of ``repr`` and :meth:`RunConfig.settings`, and its flag is not shown in the web UI.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from locust_llm.config.api_settings import api_key_from, conversation_state_from, tools_from
from locust_llm.config.flags import FLAGS, parse_flags
from locust_llm.config.parsers import ConfigError, Warmup
from locust_llm.config.redact import is_secret_header
from locust_llm.config.routes import Route, Routes, load_routes
from locust_llm.config.tls import TlsSettings, proxy_secrets, tls_from
from locust_llm.measure.health import Validity
from locust_llm.measure.rows import RouteBook
from locust_llm.measure.sla import Prices, Sla
from locust_llm.protocol.api import Api
from locust_llm.protocol.apis import api_for
from locust_llm.protocol.retry import FlowConfig, RetryPolicy
from locust_llm.reports.compare import Thresholds
from locust_llm.shapes.arrivals import Arrivals
from locust_llm.shapes.search import SearchSettings
from locust_llm.workload.prompts import Length, Workload
from locust_llm.workload.trace import Trace, TraceError, load_trace

__all__ = [
    "RunConfig",
    "flow_from",
    "is_secret_header",
    "prices_from",
    "search_from",
    "sla_from",
    "thresholds_from",
    "workload_from",
]

Values = Mapping[str, Any]


@dataclass(frozen=True)
class RunConfig:
    """Everything a locust-llm run needs, parsed and validated once. No field has a default of its own: build it
    with :meth:`from_options` (the flag table's defaults) or :meth:`defaults`."""

    model: str | None
    routes: Routes | None  # --routes: every route's endpoint, model, key and prices, and the policy
    routes_allow_down: bool
    api: str  # --api; a route's own api wins for its requests
    conversation_state: str  # --conversation-state: client (history resent) or server (previous_response_id)
    api_key: str | None = field(repr=False)
    max_tokens: Length
    workload: Workload
    seed: int | None
    flow: FlowConfig
    headers: tuple[tuple[str, str], ...] = field(repr=False)
    allow_new_host: bool
    tls: TlsSettings
    steps: tuple[int, ...]
    rates: tuple[float, ...] | None  # with --trace: each speed times the trace's own rate
    repeats: int  # passes over the steps, interleaved (--repeats)
    trace: Trace | None
    trace_speeds: tuple[float, ...] | None
    trace_offset_s: float
    trace_cache_across_steps: bool  # every pass over the trace the same bytes (the warm case), not salted
    arrivals: Arrivals
    max_in_flight: int
    search: SearchSettings | None
    step_duration_s: float
    request_timeout_s: float
    server_metrics: tuple[str, ...]  # ("auto",), () for off, or the URLs to scrape
    server_metrics_interval_s: float
    warmup: Warmup
    itl_events: bool
    fast_path: bool
    max_generator_cpu_pct: float
    max_sched_lag_ms: float
    min_step_requests: int
    max_users_per_worker: int  # 0: no check (locust_llm.plugin checks a master's plan against it)
    min_workers: int  # 0: never; below it a master stops the run (runtime.workers)
    sla: Sla
    error_budget: float
    prices: Prices
    report_dir: str | None
    summary_log: bool
    baseline: str | None
    gate: Thresholds
    sim_args: tuple[str, ...]

    @classmethod
    def from_options(cls, options: Any) -> RunConfig:
        """Build from Locust's ``parsed_options`` (or any object with the flags' ``dest`` attributes)."""
        v = parse_flags(options, FLAGS)
        sla = sla_from(v)
        trace, speeds = _trace(v)
        routes = _routes(v)
        return cls(
            model=v["model"],
            routes=routes,
            routes_allow_down=v["routes_allow_down"],
            api=v["api"],
            conversation_state=conversation_state_from(v, routes),
            api_key=None if routes else api_key_from(v),
            max_tokens=v["max_tokens"],
            workload=workload_from(v),
            seed=v["seed"],
            flow=flow_from(v, routes),
            headers=v["header"],
            allow_new_host=v["allow_new_host"],
            tls=tls_from(v["ca_bundle"], v["insecure"]),
            steps=v["steps"],
            repeats=v["repeats"],
            rates=tuple(speed * trace.rate_req_s for speed in speeds) if trace and speeds else _rates(v),
            trace=trace,
            trace_speeds=speeds,
            trace_offset_s=v["trace_offset"],
            trace_cache_across_steps=bool(v["trace_cache_across_steps"]),
            arrivals=v["arrivals"],
            max_in_flight=v["max_in_flight"],
            search=search_from(v, sla, trace),
            step_duration_s=v["step_duration"],
            request_timeout_s=v["request_timeout"],
            server_metrics=v["server_metrics"],
            server_metrics_interval_s=v["server_metrics_interval"],
            warmup=v["warmup"],
            itl_events=v["locust_itl_events"] == "each",
            fast_path=v["fast_path"] == "auto",
            max_generator_cpu_pct=v["max_generator_cpu"],
            max_sched_lag_ms=v["max_sched_lag"] * 1000.0,
            min_step_requests=v["min_step_requests"],
            max_users_per_worker=v["max_users_per_worker"],
            min_workers=v["min_workers"],
            sla=sla,
            error_budget=v["error_budget"],
            prices=prices_from(v),
            report_dir=v["llm_report"],
            summary_log=v["llm_summary_log"],
            baseline=v["baseline"],
            gate=thresholds_from(v),
            sim_args=v["sim_args"],
        )

    @classmethod
    def defaults(cls) -> RunConfig:
        """The configuration of a run given no flag at all."""
        return cls.from_options(object())

    @property
    def plan_steps(self) -> tuple[int, ...]:
        """The users of every step run, the passes interleaved: ``--steps`` ``--repeats`` times over."""
        return self.steps * self.repeats

    @property
    def plan_rates(self) -> tuple[float, ...] | None:
        """The rate of every step run (open loop), the passes interleaved."""
        return None if self.rates is None else self.rates * self.repeats

    def repeat_of(self, index: int) -> int:
        """The pass (from 1) of the step run at ``index`` (from 0)."""
        return index // len(self.rates or self.steps) + 1

    @property
    def open_loop(self) -> bool:
        """Rate mode: requests arrive at ``--rates``, whatever the server does."""
        return self.rates is not None

    @property
    def primary_route(self) -> str | None:
        """With ``--routes``: the primary route of the most weight (the summary's primary series), else None."""
        if self.routes is None:
            return None
        return max(self.routes.policy.primary, key=lambda p: p[1])[0]

    def without_routes(self, names: set[str]) -> RunConfig:
        """This config less the routes ``names`` (``--routes-allow-down``); the flow follows the policy."""
        assert self.routes is not None
        routes = self.routes.without(names)
        p = routes.policy
        flow = replace(self.flow, primaries=p.primary, fallbacks=p.fallback, hedge_to=p.hedge_to)
        return replace(self, routes=routes, flow=flow)

    @cached_property
    def row_prices(self) -> Prices | RouteBook:
        """The prices rows are costed at: ``--price-*``; with ``--routes`` each route's own (else ``--price-*``),
        the rows being per route."""
        if self.routes is None:
            return self.prices
        routes = self.routes.routes
        return RouteBook({r.name: r.model for r in routes}, {r.name: r.prices or self.prices for r in routes})

    @property
    def validity(self) -> Validity:
        """The limits of a step's validity (see :mod:`locust_llm.measure.health`)."""
        return Validity(self.max_generator_cpu_pct, self.max_sched_lag_ms, self.min_step_requests)

    @property
    def conversations(self) -> bool:
        """Whether requests are turns of conversations (``--turns``, a prompt file's, or a trace's sessions)."""
        return self.workload.conversations or bool(self.trace and self.trace.sessions)

    def trace_settings(self) -> dict[str, Any] | None:
        """The replayed trace for reports: its file, size, own rate and the speeds (never its text)."""
        if self.trace is None:
            return None
        return {
            "path": self.trace.path,
            "requests": len(self.trace.entries),
            "period_s": round(self.trace.period_s, 3),
            "rate_req_s": self.trace.rate_req_s,
            "speeds": list(self.trace_speeds or ()),
            "offset_s": self.trace_offset_s,
            "prefixes": "the same in every pass" if self.trace_cache_across_steps else "fresh in each pass",
            "sessions": len(self.trace.turns),
            "block_tokens": self.trace.block_tokens,
        }

    def fleet_error(self, workers: int) -> str | None:
        """Why ``workers`` workers cannot hold this plan at ``--max-users-per-worker`` users each; None when they can
        or nothing is checked (0, or open-loop rates, whose generator processes are not users)."""
        per = self.max_users_per_worker
        if not per or self.rates:
            return None
        top, flag = (self.search.max_load, "--search-max-users") if self.search else (max(self.steps), "--steps")
        if top <= workers * per:
            return None
        return (
            f"{flag} reaches {top:g} users, more than {workers} worker(s) x {per} users each "
            f"(--max-users-per-worker) = {workers * per}: start more workers (--expect-workers, and the worker Job's "
            f"parallelism) or lower {flag}"
        )

    def warmup_s(self, step_duration_s: float | None = None) -> float:
        """Warm-up excluded after each step change of ``step_duration_s`` (default: ``--step-duration``)."""
        return self.warmup.for_step(self.step_duration_s if step_duration_s is None else step_duration_s)

    def api_of(self, route: Route | None = None) -> Api:
        """The API requests to ``route`` (or to ``--host``) speak: the route's ``api``, else ``--api``."""
        return api_for(route.api if route is not None and route.api else self.api)

    def request_headers(self, user_agent: str, route: Route | None = None) -> dict[str, str]:
        """The headers of every request: JSON in, an event stream out, the API's own and the key's
        (:meth:`~locust_llm.protocol.api.Api.auth_headers`), and ``--header``'s; for a route, its own key and headers
        (and ``--header``'s, never secret with ``--routes``) instead."""
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream", "User-Agent": user_agent}
        headers.update(self.api_of(route).auth_headers(self.api_key if route is None else route.api_key))
        headers.update(self.headers)
        if route is not None:
            headers.update(route.headers)
        return headers

    @property
    def credentials(self) -> tuple[str, ...]:
        """What the endpoints are sent to prove who we are: the keys and secret headers' values (every route's)."""
        keys = [self.api_key] if self.api_key else []
        keys += [value for name, value in self.headers if is_secret_header(name) and value]
        if self.routes is not None:
            keys += self.routes.credentials()
        return tuple(keys)

    @cached_property
    def secrets(self) -> tuple[str, ...]:
        """Strings that must never be printed (see :func:`locust_llm.config.redact.redact`): the credentials and proxy
        passwords. Computed once: every request passes it on."""
        return self.credentials + proxy_secrets()

    def settings(self) -> dict[str, Any]:
        """The run's settings for reports and logs: every field except secrets."""
        return {
            "model": self.model,
            "api": self.api,
            "conversation_state": self.conversation_state,
            "routes": None if self.routes is None else self.routes.describe(),
            "api_key_set": bool(self.api_key),
            "max_tokens": {"mean": self.max_tokens.mean, "stddev": self.max_tokens.stddev},
            "workload": self.workload.describe(),
            "seed": self.seed,
            "retry_policy": self.flow.policy.name,
            "max_retries": self.flow.policy.max_retries,
            "fallback_models": list(self.flow.fallbacks),
            "fallback_on": sorted(self.flow.fallback_on),
            "hedge_ttft_ms": None if self.flow.hedge_after_s is None else self.flow.hedge_after_s * 1000,
            "headers": [name for name, _ in self.headers],
            "allow_new_host": self.allow_new_host,
            "tls": self.tls.describe(),
            "steps": None if self.rates else list(self.steps),
            "repeats": self.repeats,
            "rates": list(self.rates) if self.rates else None,
            "trace": self.trace_settings(),
            "arrivals": self.arrivals.describe() if self.rates else None,
            "max_in_flight": self.max_in_flight if self.rates else None,
            "search": self.search.describe() if self.search else None,
            "step_duration_s": self.step_duration_s,
            "request_timeout_s": self.request_timeout_s,
            "warmup_s": self.warmup_s(),
            "max_generator_cpu_pct": self.max_generator_cpu_pct,
            "max_sched_lag_ms": self.max_sched_lag_ms,
            "min_step_requests": self.min_step_requests,
            "max_retry_wait_s": self.flow.policy.max_wait_s,
            "sla": self.sla.as_dict(),
            "error_budget": self.error_budget,
            "prices": self.prices.as_dict(),
        }


def _rates(v: Values) -> tuple[float, ...] | None:
    """``--rates``, which excludes ``--steps`` (other than its default)."""
    rates = v["rates"]
    default_steps = next(f for f in FLAGS if f.dest == "steps").value(None)
    if rates and v["steps"] != default_steps:
        raise ConfigError(
            f"--rates and --steps exclude each other (open-loop rates or closed-loop users), got both: --rates "
            f"{','.join(f'{r:g}' for r in rates)} and --steps {','.join(map(str, v['steps']))}"
        )
    return rates or None


def _trace(v: Values) -> tuple[Trace | None, tuple[float, ...] | None]:
    """``--trace`` and its speeds; it excludes ``--rates`` and ``--steps`` (other than its default), and its offset
    lies inside it."""
    if not v["trace"]:
        return None, None
    default_steps = next(f for f in FLAGS if f.dest == "steps").value(None)
    for flag, given in (("--rates", v["rates"]), ("--steps", v["steps"] != default_steps and v["steps"])):
        if given:
            raise ConfigError(
                f"--trace replays at --trace-speeds, which excludes {flag} (got both: --trace {v['trace']} and "
                f"{flag} {','.join(f'{x:g}' for x in given)})"
            )
    for flag, dest in (
        ("--prompts", "prompts"),
        ("--input-tokens", "input_tokens"),
        ("--system-prompt", "system_prompt"),
    ):
        if v.get(dest):
            raise ConfigError(f"--trace supplies the prompts, which excludes {flag} (got both: --trace and {flag})")
    try:
        trace = load_trace(v["trace"], v["trace_block_tokens"])
    except TraceError as exc:
        raise ConfigError(str(exc)) from None
    if v["trace_offset"] >= trace.period_s:
        raise ConfigError(
            f"--trace-offset must lie inside the trace ({trace.period_s:g} s long), got {v['trace_offset']:g} s"
        )
    return trace, v["trace_speeds"]


def search_from(v: Values, sla: Sla, trace: Trace | None = None) -> SearchSettings | None:
    """``--search`` and its flags. It starts from one load: the first of ``--steps`` (its default list is fine), of
    ``--rates`` or of ``--trace-speeds``; an explicit list of several is a conflict. ``sla`` needs at least one SLA
    limit."""
    if v["search"] == "off":
        return None
    default_steps = next(f for f in FLAGS if f.dest == "steps").value(None)
    loads = v["rates"] or (v["steps"] if v["steps"] != default_steps else None)
    if trace is not None:
        loads = v["trace_speeds"]
    if loads and len(loads) > 1:
        flag = "--trace-speeds" if trace is not None else "--rates" if v["rates"] else "--steps"
        raise ConfigError(
            f"--search starts from one load: give {flag} a single value (the start, e.g. {flag} "
            f"{loads[0]:g}), got {flag} {','.join(f'{x:g}' for x in loads)}"
        )
    if v["repeats"] > 1:
        raise ConfigError(
            f"--repeats runs a fixed plan of steps again; a search chooses its own loads: give one of them, got "
            f"--search {v['search']} and --repeats {v['repeats']}"
        )
    if v["search"] == "sla" and not sla.given:
        raise ConfigError(
            "--search sla needs an SLA: give --sla-ttft-p99-ms, --sla-itl-p99-ms, --sla-e2e-p99-ms or "
            "--sla-max-error-rate (or use --search knee), got none"
        )
    return SearchSettings(
        v["search"], v["search_precision"], v["search_max_users"], v["search_max_duration"], v["search_min_requests"]
    )


def sla_from(v: Values) -> Sla:
    """The SLA from parsed flag values keyed by flag dest (``sla_ttft_p99_ms``, ...)."""
    return Sla(
        ttft_p99_ms=v["sla_ttft_p99_ms"],
        itl_p99_ms=v["sla_itl_p99_ms"],
        e2e_p99_ms=v["sla_e2e_p99_ms"],
        max_error_rate=v["sla_max_error_rate"],
    )


def prices_from(v: Values) -> Prices:
    return Prices(
        input_usd_per_mtok=v["price_input_usd_per_mtok"],
        output_usd_per_mtok=v["price_output_usd_per_mtok"],
        cached_input_usd_per_mtok=v["price_cached_input_usd_per_mtok"],
    )


def thresholds_from(v: Values) -> Thresholds:
    """Gate thresholds from parsed flag values."""
    confidence = v["gate_confidence"]
    if not 0.5 <= confidence <= 0.9999:
        raise ConfigError(f"--gate-confidence must be between 0.5 and 0.9999, got {confidence:g}")
    return Thresholds(
        knee_drop_steps=int(v["max_knee_drop_steps"]),
        knee_drop_pct=v["max_knee_drop_pct"],
        p99_rise_pct=v["max_p99_rise_pct"],
        min_ttft_rise_ms=v["min_ttft_rise_ms"],
        min_itl_rise_ms=v["min_itl_rise_ms"],
        error_rate_rise_pp=v["max_error_rate_rise_pp"],
        throughput_drop_pct=v["max_throughput_drop_pct"],
        knee_p99_factor=v["max_knee_p99_factor"],
        share_confidence=confidence,
        require_same_target=bool(v["gate_require_same_target"]),
    )


def workload_from(v: Values) -> Workload:
    """The workload of the run (prompt and system-prompt files were read by their flags' parsers)."""
    if v["prompts"] and v["input_tokens"] is not None:
        raise ConfigError("--prompts and --input-tokens exclude each other, got both")
    turns = v["turns"]
    if v["rates"] and turns is not None and turns.high > 1:
        raise ConfigError(
            f"--turns applies to closed-loop users (--steps or --search): with --rates each arrival is one "
            f"request, got --turns {turns.low}:{turns.high} with --rates"
        )
    return Workload(
        max_tokens=v["max_tokens"],
        output_length=v["output_length"],
        prompts=v["prompts"] or (),
        input_tokens=v["input_tokens"],
        system_prompt=v["system_prompt"],
        cache_control=v["cache_control"],
        salt=None if v["salt"] == "auto" else v["salt"] == "on",
        extra_body=v["extra_body"],
        turns=v["turns"],
        think_time=v["think_time"],
        max_context_tokens=v["max_context_tokens"],
        tools=tools_from(v),
        tool_call_share=v["tool_call_share"],
        tool_result_tokens=v["tool_result_tokens"],
    )


def flow_from(v: Values, routes: Routes | None = None) -> FlowConfig:
    """The client discipline of ``--retry-policy``, ``--fallback-models`` and their flags; with ``--routes``, its
    ``[policy]``, each field given there taking the place of its flag."""
    fallbacks = tuple(m.strip() for m in (v["fallback_models"] or "").split(",") if m.strip())
    hedge, policy_name, fallback_on = v["hedge_ttft_ms"], v["retry_policy"], v["fallback_on"]
    primaries: tuple[tuple[str, float], ...] = ()
    causes: frozenset[str] = frozenset()
    hedge_to = None
    if routes is not None:
        p = routes.policy
        fallbacks, primaries, causes, hedge_to = p.fallback, p.primary, p.fallback_causes, p.hedge_to
        hedge = hedge if p.hedge_ttft_ms is None else p.hedge_ttft_ms
        policy_name = p.retry_policy or policy_name
        fallback_on = fallback_on if p.fallback_on is None else p.fallback_on
    return FlowConfig(
        policy=RetryPolicy(policy_name, v["max_retries"], v["backoff_base"], v["backoff_max"], v["max_retry_wait"]),
        fallbacks=fallbacks,
        fallback_on=fallback_on,
        hedge_after_s=None if hedge is None else hedge / 1000.0,
        primaries=primaries,
        fallback_causes=causes,
        hedge_to=hedge_to,
    )


def _routes(v: Values) -> Routes | None:
    """``--routes``, which takes the place of ``--model``, ``--api-key``, ``--fallback-models``, secret ``--header``s,
    ``--ca-bundle`` and ``--insecure`` (``--host`` is checked where Locust's options are: :mod:`locust_llm.plugin`).
    ``OPENAI_API_KEY`` in the environment is no conflict: a route names it with ``api_key_env`` if it wants it."""
    if not v["routes"]:
        if v["routes_allow_down"]:
            raise ConfigError("--routes-allow-down applies to --routes, got it without --routes")
        return None
    given = [
        ("--model", v["model"]),
        ("--api-key", v["api_key"] and v["api_key"] != os.environ.get("OPENAI_API_KEY")),
        ("--fallback-models", v["fallback_models"]),
        ("a secret --header", any(is_secret_header(name) for name, _ in v["header"])),
        ("--ca-bundle", v["ca_bundle"]),
        ("--insecure", v["insecure"]),
    ]
    for flag, value in given:
        if value:
            raise ConfigError(
                f"--routes gives each route its own endpoint, model and key, which excludes {flag} (got both: "
                f"--routes {v['routes']} and {flag}); put it in the routes file"
            )
    return load_routes(v["routes"])
