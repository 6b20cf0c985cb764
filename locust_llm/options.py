"""Every locust-llm flag, and the one typed, validated :class:`RunConfig` built from Locust's parsed options.

Flags are registered on Locust's parser (``init_command_line_parser``) with help text and an environment variable.
Their raw values stay strings in ``parsed_options`` (the web UI and the master -> worker spawn message carry them
as strings); :meth:`RunConfig.from_options` parses and validates them all at once and raises :class:`ConfigError`
with a one-line message naming the flag, the value received and what is allowed.

The API key never leaves :class:`RunConfig` in a printable form: it is excluded from ``repr`` and from
:meth:`RunConfig.settings`, and the flag is not shown in the web UI (Locust would embed its value in the page).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from locust_llm.reports.compare import Thresholds
from locust_llm.sla import Prices, Sla
from locust_llm.users.discipline import POLICIES, FlowConfig, RetryPolicy
from locust_llm.workload.prompts import Length, PromptError, Workload, load_prompts, parse_length

__all__ = [
    "DEFAULT_STEPS",
    "ConfigError",
    "Flag",
    "RunConfig",
    "add_arguments",
    "parse_duration_s",
    "parse_steps",
]

DEFAULT_STEPS = (8, 16, 32, 64, 128)


class ConfigError(ValueError):
    """A flag value that cannot be used; the message is one line, ready for the user."""


@dataclass(frozen=True)
class Flag:
    """One command-line flag: name, default (a string, as the web UI sends strings), env var and help text."""

    name: str
    default: str | None
    help: str
    env_var: str | None = None
    web_ui: bool = True
    secret: bool = False
    multiple: bool = False

    @property
    def dest(self) -> str:
        return self.name.lstrip("-").replace("-", "_")


REPORT_FLAGS: tuple[Flag, ...] = (
    Flag("--sla-ttft-p99-ms", None, "SLA: TTFT p99 at most this many ms.", "LOCUST_LLM_SLA_TTFT_P99_MS"),
    Flag("--sla-itl-p99-ms", None, "SLA: ITL p99 at most this many ms.", "LOCUST_LLM_SLA_ITL_P99_MS"),
    Flag("--sla-e2e-p99-ms", None, "SLA: end-to-end p99 at most this many ms.", "LOCUST_LLM_SLA_E2E_P99_MS"),
    Flag(
        "--sla-max-error-rate",
        None,
        "SLA: at most this share of requests failing (0.01 = 1%).",
        "LOCUST_LLM_SLA_MAX_ERROR_RATE",
    ),
    Flag("--price-input-usd-per-mtok", None, "Price of 1M prompt tokens, USD.", "LOCUST_LLM_PRICE_INPUT_USD_PER_MTOK"),
    Flag(
        "--price-output-usd-per-mtok",
        None,
        "Price of 1M completion tokens, USD.",
        "LOCUST_LLM_PRICE_OUTPUT_USD_PER_MTOK",
    ),
)
"""Flags shared by runs and ``locust-llm report``."""

GATE_FLAGS: tuple[Flag, ...] = (
    Flag("--max-knee-drop-steps", "1", "Regression gate: allowed fall of the knee, in steps.", None, web_ui=False),
    Flag("--max-knee-drop-pct", "10", "Regression gate: allowed fall of the knee, in percent.", None, web_ui=False),
    Flag("--max-p99-rise-pct", "15", "Regression gate: allowed rise of p99 TTFT/ITL at a step.", None, web_ui=False),
    Flag("--min-ttft-rise-ms", "20", "Regression gate: p99 TTFT rises below this never count.", None, web_ui=False),
    Flag("--min-itl-rise-ms", "2", "Regression gate: p99 ITL rises below this never count.", None, web_ui=False),
    Flag(
        "--max-error-rate-rise-pp",
        "0.5",
        "Regression gate: allowed rise of the error rate, percentage points.",
        None,
        web_ui=False,
    ),
)
"""Thresholds of the regression gate (``--baseline`` on a run, ``locust-llm report``, ``locust-llm compare``)."""

FLAGS: tuple[Flag, ...] = (
    Flag(
        "--model",
        None,
        "Model name sent in each request. Default: the embedded simulator's model when no --host is given "
        "(required with --host).",
        "LOCUST_LLM_MODEL",
    ),
    Flag(
        "--api-key",
        None,
        "API key sent as 'Authorization: Bearer ...'. Prefer the OPENAI_API_KEY environment variable; the key "
        "never appears in logs, CSVs, reports or the web UI.",
        "OPENAI_API_KEY",
        web_ui=False,
        secret=True,
    ),
    Flag(
        "--max-tokens",
        "128",
        "max_tokens of each request: MEAN or MEAN:STDDEV (drawn per request, e.g. 128:32).",
        "LOCUST_LLM_MAX_TOKENS",
    ),
    Flag(
        "--prompts",
        None,
        'Prompt file: .txt (one prompt per line), .jsonl ({"messages": [...]} or {"prompt": ...}, optional '
        "max_tokens) or .json (ShareGPT). Every worker needs it at the same path.",
        "LOCUST_LLM_PROMPTS",
    ),
    Flag(
        "--input-tokens",
        None,
        "Synthetic prompts of about this many tokens: MEAN or MEAN:STDDEV (e.g. 512:128).",
        "LOCUST_LLM_INPUT_TOKENS",
    ),
    Flag(
        "--system-prompt",
        None,
        "File whose text is a system prompt shared by every request.",
        "LOCUST_LLM_SYSTEM_PROMPT",
    ),
    Flag(
        "--cache-control",
        "off",
        "on: mark the shared system prompt with cache_control: {type: ephemeral} (prefix caching).",
        "LOCUST_LLM_CACHE_CONTROL",
    ),
    Flag(
        "--salt",
        "auto",
        "Prefix each user message with a random tag so that unintended cache hits do not flatter TTFT: on, off, "
        "or auto (on for synthetic prompts).",
        "LOCUST_LLM_SALT",
    ),
    Flag("--seed", None, "Seed of every random choice of the users (prompts, lengths, jitter).", "LOCUST_LLM_SEED"),
    Flag(
        "--retry-policy",
        "honor",
        "After HTTP 429/503: honor (wait Retry-After, else exponential backoff with full jitter), none (record "
        "and move on), naive (retry at once).",
        "LOCUST_LLM_RETRY_POLICY",
    ),
    Flag("--max-retries", "3", "Retries of one request under honor or naive.", "LOCUST_LLM_MAX_RETRIES"),
    Flag(
        "--backoff-base",
        "500ms",
        "Backoff of the first retry without Retry-After (doubles each time).",
        "LOCUST_LLM_BACKOFF_BASE",
    ),
    Flag("--backoff-max", "30s", "Longest backoff without Retry-After.", "LOCUST_LLM_BACKOFF_MAX"),
    Flag(
        "--fallback-models",
        None,
        "Comma-separated models to try, in order, when the model refuses a request (see --fallback-on).",
        "LOCUST_LLM_FALLBACK_MODELS",
    ),
    Flag(
        "--fallback-on",
        "429,503",
        "HTTP statuses that send a request to the next fallback model.",
        "LOCUST_LLM_FALLBACK_ON",
    ),
    Flag(
        "--hedge-ttft-ms",
        None,
        "Hedge: with no first token after this many ms, send the same request to the next model (the same model "
        "without --fallback-models) and keep whichever streams first.",
        "LOCUST_LLM_HEDGE_TTFT_MS",
    ),
    Flag(
        "--extra-body",
        None,
        'JSON object merged into each request body, e.g. \'{"route": {"fallback": ["m2"]}}\'.',
        "LOCUST_LLM_EXTRA_BODY",
        web_ui=False,
    ),
    Flag(
        "--header",
        None,
        "Extra request header 'Name: value' (repeatable). Values of key/token/auth headers are kept secret.",
        None,
        web_ui=False,
        multiple=True,
    ),
    Flag(
        "--steps",
        ",".join(map(str, DEFAULT_STEPS)),
        "Concurrency steps: comma-separated, strictly increasing user counts.",
        "LOCUST_LLM_STEPS",
    ),
    Flag(
        "--step-duration",
        "30s",
        "How long each step lasts, e.g. 30s, 2m, 1m30s.",
        "LOCUST_LLM_STEP_DURATION",
    ),
    Flag(
        "--warmup",
        "auto",
        "Samples this long after each step change are kept apart from the steady state: a duration (5s), a share "
        "of the step (10%), or auto = max(5 s, 10% of the step), at most half the step.",
        "LOCUST_LLM_WARMUP",
    ),
    Flag(
        "--request-timeout",
        "120s",
        "Give up on a request after this long (whole request, from send to the end of the stream).",
        "LOCUST_LLM_REQUEST_TIMEOUT",
    ),
    Flag(
        "--locust-itl-events",
        "each",
        "Fire a Locust 'ITL' event for each gap between tokens (each), or none (off: about 10% less generator "
        "CPU; per-step ITL is still recorded exactly).",
        "LOCUST_LLM_ITL_EVENTS",
    ),
    Flag(
        "--max-generator-cpu",
        "80",
        "A step is marked invalid when a generator process (a worker, the master or the single process) used more "
        "CPU than this percentage of one core: an overloaded generator inflates the latencies it reports.",
        "LOCUST_LLM_MAX_GENERATOR_CPU",
    ),
    Flag(
        "--max-sched-lag",
        "10ms",
        "A step is marked invalid when the scheduling lag p99 (user ready -> request sent) exceeds this.",
        "LOCUST_LLM_MAX_SCHED_LAG",
    ),
    Flag(
        "--llm-report",
        None,
        "At the end of the run, write report.html and summary.json to this directory and print the knee and the "
        "recommended max concurrency (needs --csv).",
        "LOCUST_LLM_REPORT",
    ),
    Flag(
        "--llm-summary-log",
        "off",
        "on: also print summary.json as one log line ('locust-llm-summary: {...}') at the end of the run, so that "
        "results survive pods that are gone (needs --llm-report).",
        "LOCUST_LLM_SUMMARY_LOG",
        web_ui=False,
    ),
    Flag(
        "--baseline",
        None,
        "Compare the run's summary with this baseline summary.json; the exit code is 1 on regression.",
        "LOCUST_LLM_BASELINE",
    ),
    *REPORT_FLAGS,
    *GATE_FLAGS,
    Flag(
        "--sim-args",
        "",
        "Extra arguments for the embedded simulator started when no --host is given, e.g. '--capacity 16'. "
        "See 'locust-llm sim --help'.",
        "LOCUST_LLM_SIM_ARGS",
        web_ui=False,
    ),
)


def add_arguments(parser: Any, flags: tuple[Flag, ...] = FLAGS) -> None:
    """Register ``flags`` on Locust's argument parser (a configargparse parser with web-UI extensions)."""
    group = parser.add_argument_group("locust-llm", "LLM endpoint load testing (locust-llm)")
    for flag in flags:
        kwargs: dict[str, Any] = {"default": flag.default, "help": flag.help, "dest": flag.dest}
        if flag.env_var:
            kwargs["env_var"] = flag.env_var
        if flag.multiple:
            kwargs["action"] = "append"
        action = group.add_argument(flag.name, **kwargs)
        # what Locust's own add_argument(include_in_web_ui=..., is_secret=...) sets; groups do not take those kwargs
        action.include_in_web_ui = flag.web_ui
        action.is_secret = flag.secret
        action.is_required = False
        action.is_multiple = False


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration_s(text: str, flag: str) -> float:
    """Parse ``30``, ``30s``, ``2m``, ``1m30s``, ``500ms`` or ``1.5h`` into seconds (> 0)."""
    raw = str(text).strip().lower()
    seconds: float | None = None
    if re.fullmatch(r"\d+(?:\.\d+)?", raw):
        seconds = float(raw)
    elif raw and _DURATION_PART.sub("", raw) == "":
        seconds = sum(float(n) * _UNIT_S[unit] for n, unit in _DURATION_PART.findall(raw))
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        raise ConfigError(f"{flag} must be a positive duration like 30s, 2m or 1m30s, got {text!r}")
    return seconds


def parse_steps(text: str, flag: str = "--steps") -> tuple[int, ...]:
    """Parse ``8,16,32`` into a strictly increasing tuple of positive user counts."""
    parts = [p.strip() for p in str(text).split(",")]
    if not parts or not all(re.fullmatch(r"\d+", p) for p in parts):
        raise ConfigError(f"{flag} must be comma-separated positive integers like 8,16,32, got {text!r}")
    steps = tuple(int(p) for p in parts)
    if steps[0] < 1:
        raise ConfigError(f"{flag} user counts must be >= 1, got {text}")
    if any(b <= a for a, b in itertools.pairwise(steps)):
        raise ConfigError(f"{flag} must be strictly increasing, got {text}")
    return steps


def parse_warmup(text: str, flag: str = "--warmup") -> float | str | None:
    """``auto`` -> None; ``10%`` -> ``"10%"`` (a share of the step); a duration -> seconds."""
    raw = str(text).strip().lower()
    if raw in ("", "auto"):
        return None
    if raw.endswith("%"):
        number = raw[:-1].strip()
        if re.fullmatch(r"\d+(?:\.\d+)?", number) and 0 <= float(number) < 100:
            return f"{float(number):g}%"
        raise ConfigError(f"{flag} share must be a percentage in [0, 100), got {text!r}")
    if raw in ("0", "0s"):
        return 0.0
    try:
        return parse_duration_s(raw, flag)
    except ConfigError:
        raise ConfigError(f"{flag} must be auto, a duration like 5s or a share like 10%, got {text!r}") from None


def parse_choice(text: str, flag: str, allowed: tuple[str, ...]) -> str:
    raw = str(text).strip().lower()
    if raw not in allowed:
        raise ConfigError(f"{flag} must be one of {', '.join(allowed)}, got {text!r}")
    return raw


def parse_percent(text: str, flag: str) -> float:
    raw = str(text).strip().rstrip("%")
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value <= 10_000:
        raise ConfigError(f"{flag} must be a percentage > 0 (100 = one core), got {text!r}")
    return value


@dataclass(frozen=True)
class RunConfig:
    """Everything a locust-llm run needs, parsed and validated once."""

    model: str | None = None
    api_key: str | None = field(default=None, repr=False)
    max_tokens: Length = field(default_factory=lambda: Length(128))
    workload: Workload = field(default_factory=Workload)
    seed: int | None = None
    flow: FlowConfig = field(default_factory=FlowConfig)
    headers: tuple[tuple[str, str], ...] = ()
    steps: tuple[int, ...] = DEFAULT_STEPS
    step_duration_s: float = 30.0
    request_timeout_s: float = 120.0
    warmup: float | str | None = None
    itl_events: bool = True
    max_generator_cpu_pct: float = 80.0
    max_sched_lag_ms: float = 10.0
    sla: Sla = field(default_factory=Sla)
    prices: Prices = field(default_factory=Prices)
    report_dir: str | None = None
    summary_log: bool = False
    baseline: str | None = None
    gate: Thresholds = field(default_factory=Thresholds)
    sim_args: tuple[str, ...] = ()

    @classmethod
    def from_options(cls, options: Any) -> RunConfig:
        """Build from Locust's ``parsed_options`` (or any object with the flags' ``dest`` attributes)."""
        raw = {flag.dest: _raw(options, flag) or "" for flag in FLAGS}
        return cls(
            model=raw["model"] or None,
            api_key=raw["api_key"] or None,
            max_tokens=_length(raw["max_tokens"], "--max-tokens"),
            workload=workload_from(raw, options),
            seed=None if not raw["seed"] else parse_int(raw["seed"], "--seed"),
            flow=flow_from(raw),
            headers=headers_from(getattr(options, "header", None)),
            steps=parse_steps(raw["steps"]),
            step_duration_s=parse_duration_s(raw["step_duration"], "--step-duration"),
            request_timeout_s=parse_duration_s(raw["request_timeout"], "--request-timeout"),
            warmup=parse_warmup(raw["warmup"]),
            itl_events=parse_choice(raw["locust_itl_events"], "--locust-itl-events", ("each", "off")) == "each",
            max_generator_cpu_pct=parse_percent(raw["max_generator_cpu"], "--max-generator-cpu"),
            max_sched_lag_ms=parse_duration_s(raw["max_sched_lag"], "--max-sched-lag") * 1000.0,
            sla=sla_from(raw),
            prices=prices_from(raw),
            report_dir=raw["llm_report"] or None,
            summary_log=_on_off(raw["llm_summary_log"] or "off", "--llm-summary-log") == "on",
            baseline=raw["baseline"] or None,
            gate=thresholds_from(raw),
            sim_args=_split_args(raw["sim_args"]),
        )

    def warmup_s(self, step_duration_s: float | None = None) -> float:
        """Warm-up excluded after each step change of ``step_duration_s`` (default: ``--step-duration``)."""
        duration = self.step_duration_s if step_duration_s is None else step_duration_s
        if isinstance(self.warmup, str):
            return duration * float(self.warmup[:-1]) / 100.0
        if self.warmup is not None:
            return min(self.warmup, duration)
        return min(max(5.0, 0.1 * duration), 0.5 * duration)

    @property
    def secrets(self) -> tuple[str, ...]:
        """Strings that must never be printed (see :func:`locust_llm.redact.redact`)."""
        keys = [self.api_key] if self.api_key else []
        keys += [value for name, value in self.headers if _SECRET_HEADER.search(name)]
        return tuple(keys)

    def settings(self) -> dict[str, Any]:
        """The run's settings for reports and logs: every field except secrets."""
        return {
            "model": self.model,
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
            "steps": list(self.steps),
            "step_duration_s": self.step_duration_s,
            "request_timeout_s": self.request_timeout_s,
            "warmup_s": self.warmup_s(),
            "max_generator_cpu_pct": self.max_generator_cpu_pct,
            "max_sched_lag_ms": self.max_sched_lag_ms,
            "sla": self.sla.as_dict(),
            "prices": {
                "input_usd_per_mtok": self.prices.input_usd_per_mtok,
                "output_usd_per_mtok": self.prices.output_usd_per_mtok,
            },
        }


def parse_optional_number(text: str | None, flag: str, upper: float | None = None) -> float | None:
    """An optional non-negative number (empty -> None), at most ``upper`` when given."""
    if text is None or str(text).strip() == "":
        return None
    try:
        value = float(str(text).strip())
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value < 0 or (upper is not None and value > upper):
        allowed = f"a number in [0, {upper:g}]" if upper is not None else "a number >= 0"
        raise ConfigError(f"{flag} must be {allowed}, got {text!r}")
    return value


def sla_from(raw: dict[str, str]) -> Sla:
    """The SLA from raw flag values keyed by flag dest (``sla_ttft_p99_ms``, ...)."""
    return Sla(
        ttft_p99_ms=parse_optional_number(raw.get("sla_ttft_p99_ms"), "--sla-ttft-p99-ms"),
        itl_p99_ms=parse_optional_number(raw.get("sla_itl_p99_ms"), "--sla-itl-p99-ms"),
        e2e_p99_ms=parse_optional_number(raw.get("sla_e2e_p99_ms"), "--sla-e2e-p99-ms"),
        max_error_rate=parse_optional_number(raw.get("sla_max_error_rate"), "--sla-max-error-rate", 1.0),
    )


def thresholds_from(raw: dict[str, str]) -> Thresholds:
    """Gate thresholds from raw flag values keyed by flag dest (defaults where absent)."""
    defaults = {f.dest: f.default for f in GATE_FLAGS}

    def num(dest: str) -> float:
        value = parse_optional_number(raw.get(dest) or defaults[dest], "--" + dest.replace("_", "-"))
        assert value is not None
        return value

    return Thresholds(
        knee_drop_steps=int(num("max_knee_drop_steps")),
        knee_drop_pct=num("max_knee_drop_pct"),
        p99_rise_pct=num("max_p99_rise_pct"),
        min_ttft_rise_ms=num("min_ttft_rise_ms"),
        min_itl_rise_ms=num("min_itl_rise_ms"),
        error_rate_rise_pp=num("max_error_rate_rise_pp"),
    )


def prices_from(raw: dict[str, str]) -> Prices:
    return Prices(
        input_usd_per_mtok=parse_optional_number(raw.get("price_input_usd_per_mtok"), "--price-input-usd-per-mtok"),
        output_usd_per_mtok=parse_optional_number(raw.get("price_output_usd_per_mtok"), "--price-output-usd-per-mtok"),
    )


_SECRET_HEADER = re.compile(r"(?i)key|token|auth|secret|cookie|password")


def parse_int(text: str, flag: str) -> int:
    try:
        return int(str(text).strip())
    except ValueError:
        raise ConfigError(f"{flag} must be an integer, got {text!r}") from None


def _length(text: str, flag: str) -> Length:
    try:
        return parse_length(text, flag)
    except PromptError as exc:
        raise ConfigError(str(exc)) from None


def _on_off(text: str, flag: str, allowed: tuple[str, ...] = ("on", "off")) -> str:
    return parse_choice(text or allowed[-1], flag, allowed)


def workload_from(raw: dict[str, str], options: Any = None) -> Workload:
    """The workload of the run; prompt and system-prompt files are read here (errors name file and line)."""
    try:
        prompts = tuple(load_prompts(raw["prompts"])) if raw.get("prompts") else ()
        input_tokens = parse_length(raw["input_tokens"], "--input-tokens") if raw.get("input_tokens") else None
        system = None
        if raw.get("system_prompt"):
            try:
                system = Path(raw["system_prompt"]).read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError) as exc:
                raise PromptError(f"--system-prompt {raw['system_prompt']}: cannot be read ({exc})") from None
    except PromptError as exc:
        raise ConfigError(str(exc)) from None
    if prompts and input_tokens is not None:
        raise ConfigError(f"--prompts and --input-tokens exclude each other, got both ({raw['prompts']})")
    salt = _on_off(raw.get("salt") or "auto", "--salt", ("on", "off", "auto"))
    return Workload(
        max_tokens=_length(raw.get("max_tokens") or "128", "--max-tokens"),
        prompts=prompts,
        input_tokens=input_tokens,
        system_prompt=system,
        cache_control=_on_off(raw.get("cache_control") or "off", "--cache-control") == "on",
        salt=None if salt == "auto" else salt == "on",
        extra_body=_extra_body(raw.get("extra_body")),
    )


def _extra_body(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"--extra-body must be a JSON object, got invalid JSON ({exc.msg} at {exc.pos}): {text!r}"
        ) from None
    if not isinstance(value, dict):
        raise ConfigError(f"--extra-body must be a JSON object, got {type(value).__name__}: {text!r}")
    return value


def headers_from(values: Any) -> tuple[tuple[str, str], ...]:
    """``--header 'Name: value'`` (repeatable) -> ((name, value), ...)."""
    if not values:
        return ()
    if isinstance(values, str):
        values = [values]
    out = []
    for text in values:
        name, sep, value = str(text).partition(":")
        if not sep or not re.fullmatch(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+", name.strip()):
            shown = name.strip() or text
            raise ConfigError(f"--header must be 'Name: value' with a valid header name, got {shown!r}")
        out.append((name.strip(), value.strip()))
    return tuple(out)


def flow_from(raw: dict[str, str]) -> FlowConfig:
    policy = parse_choice(raw.get("retry_policy") or "honor", "--retry-policy", POLICIES)
    retries = raw.get("max_retries") or "3"
    if not re.fullmatch(r"\d+", str(retries).strip()):
        raise ConfigError(f"--max-retries must be an integer >= 0, got {retries!r}")
    fallbacks = tuple(m.strip() for m in (raw.get("fallback_models") or "").split(",") if m.strip())
    statuses = []
    for part in (raw.get("fallback_on") or "429,503").split(","):
        if not re.fullmatch(r"\s*[1-5]\d\d\s*", part):
            raise ConfigError(
                f"--fallback-on must be comma-separated HTTP statuses like 429,503, got {raw['fallback_on']!r}"
            )
        statuses.append(int(part))
    hedge = parse_optional_number(raw.get("hedge_ttft_ms"), "--hedge-ttft-ms")
    return FlowConfig(
        policy=RetryPolicy(
            policy,
            int(retries),
            parse_duration_s(raw.get("backoff_base") or "500ms", "--backoff-base"),
            parse_duration_s(raw.get("backoff_max") or "30s", "--backoff-max"),
        ),
        fallbacks=fallbacks,
        fallback_on=frozenset(statuses),
        hedge_after_s=None if hedge is None else hedge / 1000.0,
    )


def _split_args(text: str) -> tuple[str, ...]:
    try:
        return tuple(shlex.split(text or ""))
    except ValueError as exc:
        raise ConfigError(f"--sim-args cannot be split into arguments ({exc}), got {text!r}") from None


def _raw(options: Any, flag: Flag) -> str | None:
    value = getattr(options, flag.dest, None)
    if value is None and flag.secret and flag.env_var:
        value = os.environ.get(flag.env_var)
    if value is None:
        value = flag.default
    return None if value is None else str(value)
