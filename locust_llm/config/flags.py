"""The flag table: one declaration per flag (name, default, parser, help, env var, group). Pure.

``RunConfig``, Locust's parser, ``locust-llm report/compare/sim`` and ``locust-llm flags`` are all built from such
tables, so a default is written once. Values stay strings in Locust's options (the web UI and the spawn message carry
strings); :func:`parse_flags` types them, an empty value meaning the default. The module is over 500 lines because it
is that table, as the formatter lays it out.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

from locust_llm.config.parsers import (
    ConfigError,
    parse_arrivals,
    parse_choice,
    parse_duration_s,
    parse_headers,
    parse_int,
    parse_json_object,
    parse_nonnegative_int,
    parse_number,
    parse_offset_s,
    parse_on_off,
    parse_optional_number,
    parse_percent,
    parse_positive_int,
    parse_positive_number,
    parse_rates,
    parse_server_metrics,
    parse_share,
    parse_shell_args,
    parse_statuses,
    parse_steps,
    parse_text,
    parse_warmup,
)
from locust_llm.measure.thresholds import ERROR_BUDGET
from locust_llm.protocol.retry import POLICIES
from locust_llm.reports.compare import Thresholds
from locust_llm.workload.prompts import (
    PromptError,
    load_prompt_file,
    parse_length,
    parse_think_time,
    parse_turns,
    read_system_prompt,
)
from locust_llm.workload.tools import load_tools, parse_tool_share

__all__ = [
    "FLAGS",
    "GATE_FLAGS",
    "GROUPS",
    "REPORT_FLAGS",
    "Flag",
    "add_arguments",
    "parse_flags",
]

Parser = Callable[[Any, str], Any]


@dataclass(frozen=True)
class Flag:
    """One command-line flag. ``default`` is a string, as the web UI and the spawn message carry strings."""

    name: str
    default: str | None
    help: str
    env_var: str | None = None
    parse: Parser = parse_text
    group: str = "run"
    web_ui: bool = True
    secret: bool = False
    multiple: bool = False
    switch: bool = False

    @property
    def dest(self) -> str:
        return self.name.lstrip("-").replace("-", "_")

    def value(self, raw: Any) -> Any:
        """The typed value of ``raw`` (a string, a list for a repeatable flag, or None); empty means the default."""
        if self.switch:
            return bool(raw)
        if raw is None or (isinstance(raw, str) and raw.strip() == ""):
            raw = self.default
        if (raw is None or raw == []) and not self.multiple:
            return None
        try:
            return self.parse(raw, self.name)
        except PromptError as exc:  # the workload's own error for a bad prompt file, length, turns or think time
            raise ConfigError(str(exc)) from None


def _choice(*allowed: str) -> Parser:
    return partial(parse_choice, allowed=allowed)


def _optional_number(upper: float | None = None) -> Parser:
    return partial(parse_optional_number, upper=upper)


def _env(name: str) -> str:
    return "LOCUST_LLM_" + name.lstrip("-").replace("-", "_").upper()


GROUPS = {
    "endpoint": "Endpoint and model",
    "workload": "Workload",
    "client": "Client behaviour",
    "steps": "Steps and validity",
    "search": "Capacity search",
    "report": "Reports, SLA and prices",
    "gate": "Regression gate",
    "sim": "Embedded simulator",
}
"""Flag groups, in the order ``locust-llm flags`` and docs/flags.md show them."""

_SLA = "report"
REPORT_FLAGS: tuple[Flag, ...] = (
    Flag(
        "--sla-ttft-p99-ms",
        None,
        "SLA: TTFT p99 at most this many ms.",
        "LOCUST_LLM_SLA_TTFT_P99_MS",
        _optional_number(),
        _SLA,
    ),
    Flag(
        "--sla-itl-p99-ms",
        None,
        "SLA: ITL p99 at most this many ms.",
        "LOCUST_LLM_SLA_ITL_P99_MS",
        _optional_number(),
        _SLA,
    ),
    Flag(
        "--sla-e2e-p99-ms",
        None,
        "SLA: end-to-end p99 at most this many ms.",
        "LOCUST_LLM_SLA_E2E_P99_MS",
        _optional_number(),
        _SLA,
    ),
    Flag(
        "--sla-max-error-rate",
        None,
        "SLA: at most this share of requests failing (0.01 = 1%).",
        "LOCUST_LLM_SLA_MAX_ERROR_RATE",
        _optional_number(1.0),
        _SLA,
    ),
    Flag(
        "--error-budget",
        f"{100 * ERROR_BUDGET:g}%",
        "Past capacity once more than this share of client requests fail other than with HTTP 429 (1% or 0.01).",
        "LOCUST_LLM_ERROR_BUDGET",
        parse_share,
        _SLA,
    ),
    Flag(
        "--price-input-usd-per-mtok",
        None,
        "Price of 1M prompt tokens, USD.",
        "LOCUST_LLM_PRICE_INPUT_USD_PER_MTOK",
        _optional_number(),
        _SLA,
    ),
    Flag(
        "--price-output-usd-per-mtok",
        None,
        "Price of 1M completion tokens (reasoning tokens included), USD.",
        "LOCUST_LLM_PRICE_OUTPUT_USD_PER_MTOK",
        _optional_number(),
        _SLA,
    ),
    Flag(
        "--price-cached-input-usd-per-mtok",
        None,
        "Price of 1M prompt tokens served from the provider's prompt "
        "cache (usage cached_tokens), USD. Default: the input price.",
        "LOCUST_LLM_PRICE_CACHED_INPUT_USD_PER_MTOK",
        _optional_number(),
        _SLA,
    ),
)
"""Flags shared by runs and ``locust-llm report``."""

_GATE = Thresholds()  # the gate's defaults, defined once there

_GATE_NUMBERS: tuple[Flag, ...] = tuple(
    Flag(name, f"{default:g}", f"Regression gate: {text}", _env(name), parse_number, "gate", web_ui=False)
    for name, default, text in (
        ("--max-knee-drop-steps", _GATE.knee_drop_steps, "allowed fall of the knee, in steps."),
        ("--max-knee-drop-pct", _GATE.knee_drop_pct, "allowed fall of the knee, in percent."),
        ("--max-p99-rise-pct", _GATE.p99_rise_pct, "allowed rise of p99 TTFT/ITL at a step."),
        ("--min-ttft-rise-ms", _GATE.min_ttft_rise_ms, "p99 TTFT rises below this never count."),
        ("--min-itl-rise-ms", _GATE.min_itl_rise_ms, "p99 ITL rises below this never count."),
        ("--max-error-rate-rise-pp", _GATE.error_rate_rise_pp, "allowed rise of the error rate, percentage points."),
        (
            "--max-throughput-drop-pct",
            _GATE.throughput_drop_pct,
            "allowed fall of output tok/s (the peak, and at each shared step), percent.",
        ),
        (
            "--max-knee-p99-factor",
            _GATE.knee_p99_factor,
            "at the baseline's knee step, p99 may grow to this many times the baseline's.",
        ),
        (
            "--gate-confidence",
            _GATE.share_confidence,
            "a rise of the error rate counts only beyond sampling noise at this confidence (one-sided "
            "two-proportion test; 0.5 to 0.9999).",
        ),
    )
)
GATE_FLAGS: tuple[Flag, ...] = (
    *_GATE_NUMBERS,
    Flag(
        "--gate-require-same-target",
        None,
        "Regression gate: a changed target (model, engine version, KV size, slots, replicas) is exit 2, not judged.",
        "LOCUST_LLM_GATE_REQUIRE_SAME_TARGET",
        group="gate",
        web_ui=False,
        switch=True,
    ),
)
"""Thresholds of the regression gate (``--baseline`` on a run, ``locust-llm report``, ``locust-llm compare``)."""

FLAGS: tuple[Flag, ...] = (
    # endpoint and model
    Flag(
        "--model",
        None,
        "Model name sent in each request. Default: the embedded simulator's model when no --host "
        "is given (required with --host).",
        "LOCUST_LLM_MODEL",
        group="endpoint",
    ),
    Flag(
        "--api",
        "chat",
        "The API to call: chat (/chat/completions), responses (/responses), messages (Anthropic's /messages) or "
        "completions.",
        "LOCUST_LLM_API",
        _choice("chat", "responses", "messages", "completions"),
        "endpoint",
    ),
    Flag(
        "--api-key",
        None,
        "API key (Bearer; x-api-key for --api messages); prefer OPENAI_API_KEY or ANTHROPIC_API_KEY. Never in logs, "
        "CSVs, reports or the web UI.",
        "OPENAI_API_KEY",
        group="endpoint",
        web_ui=False,
        secret=True,
    ),
    Flag(
        "--header",
        None,
        "Extra 'Name: value' request header (repeatable); key, token and auth values are secret. LOCUST_LLM_HEADERS: "
        "one per line.",
        "LOCUST_LLM_HEADERS",
        parse_headers,
        "endpoint",
        web_ui=False,
        secret=True,
        multiple=True,
    ),
    Flag(
        "--extra-body",
        None,
        'JSON object merged into each request body, e.g. \'{"route": {"fallback": ["m2"]}}\'; a null field is left '
        "out.",
        "LOCUST_LLM_EXTRA_BODY",
        parse_json_object,
        "endpoint",
        web_ui=False,
    ),
    Flag(
        "--routes",
        None,
        "TOML file of routes (each its base_url, model, key variable, prices) and their fallback/hedge policy; "
        "replaces --host, --model, --api-key.",
        "LOCUST_LLM_ROUTES",
        group="endpoint",
        web_ui=False,
    ),
    Flag(
        "--routes-allow-down",
        None,
        "With --routes: a route whose preflight fails systematically (401, 404, DNS, TLS) is dropped with a warning "
        "instead of stopping the run.",
        "LOCUST_LLM_ROUTES_ALLOW_DOWN",
        group="endpoint",
        web_ui=False,
        switch=True,
    ),
    Flag(
        "--allow-new-host",
        None,
        "With a key set, let a start from the web UI name another host than the one the "
        "key was configured for (the key then goes there too).",
        "LOCUST_LLM_ALLOW_NEW_HOST",
        group="endpoint",
        web_ui=False,
        switch=True,
    ),
    Flag(
        "--ca-bundle",
        None,
        "PEM file of the CAs to trust for https:// hosts (replaces the default). Unset: REQUESTS_CA_BUNDLE, "
        "CURL_CA_BUNDLE, SSL_CERT_FILE.",
        "LOCUST_LLM_CA_BUNDLE",
        group="endpoint",
        web_ui=False,
    ),
    Flag(
        "--insecure",
        None,
        "Do not verify the endpoint's TLS certificate or host name (test servers only). Warned "
        "at start and recorded in summary.json.",
        "LOCUST_LLM_INSECURE",
        group="endpoint",
        web_ui=False,
        switch=True,
    ),
    Flag(
        "--request-timeout",
        "120s",
        "Give up on a request after this long (whole request, from send to the end of the stream).",
        "LOCUST_LLM_REQUEST_TIMEOUT",
        parse_duration_s,
        "endpoint",
    ),
    Flag(
        "--server-metrics",
        "auto",
        "Scrape the server's metrics: auto ({origin of --host}/metrics), off, or URL[,URL] "
        "(dns+http://NAME:PORT/metrics: each A record).",
        "LOCUST_LLM_SERVER_METRICS",
        parse_server_metrics,
        "endpoint",
        web_ui=False,
    ),
    Flag(
        "--server-metrics-interval",
        "1s",
        "How often the master (or the single process) scrapes --server-metrics.",
        "LOCUST_LLM_SERVER_METRICS_INTERVAL",
        parse_duration_s,
        "endpoint",
        web_ui=False,
    ),
    # workload
    Flag(
        "--max-tokens",
        "128",
        "max_tokens of each request: MEAN or MEAN:STDDEV (drawn per request, e.g. 128:32).",
        "LOCUST_LLM_MAX_TOKENS",
        parse_length,
        "workload",
    ),
    Flag(
        "--output-length",
        "auto",
        "exact: ask for max_tokens exactly (min_tokens, ignore_eos); cap: max_tokens only; auto: exact if the server "
        "honours it (checked once).",
        "LOCUST_LLM_OUTPUT_LENGTH",
        _choice("exact", "cap", "auto"),
        "workload",
    ),
    Flag(
        "--prompts",
        None,
        "Prompt file: .txt (a prompt per line), .jsonl (messages, prompt or turns per line) or ShareGPT .json; same "
        "path on every worker.",
        "LOCUST_LLM_PROMPTS",
        load_prompt_file,
        "workload",
    ),
    Flag(
        "--input-tokens",
        None,
        "Synthetic prompts of about this many tokens: MEAN or MEAN:STDDEV (e.g. 512:128).",
        "LOCUST_LLM_INPUT_TOKENS",
        parse_length,
        "workload",
    ),
    Flag(
        "--system-prompt",
        None,
        "File whose text is a system prompt shared by every request.",
        "LOCUST_LLM_SYSTEM_PROMPT",
        read_system_prompt,
        "workload",
    ),
    Flag(
        "--cache-control",
        "off",
        "on: mark the shared system prompt with cache_control: {type: ephemeral} (prefix caching).",
        "LOCUST_LLM_CACHE_CONTROL",
        parse_on_off,
        "workload",
    ),
    Flag(
        "--salt",
        "auto",
        "Prefix each user message with a random tag so that unintended cache hits do not flatter "
        "TTFT: on, off, or auto (on for synthetic prompts).",
        "LOCUST_LLM_SALT",
        _choice("on", "off", "auto"),
        "workload",
    ),
    Flag(
        "--turns",
        "auto",
        "Conversations of N (or MIN:MAX) turns, each resending the history; auto: a prompt file's conversations, "
        "else single requests.",
        "LOCUST_LLM_TURNS",
        parse_turns,
        "workload",
    ),
    Flag(
        "--conversation-state",
        "client",
        "client: each turn resends the history; server: each turn sends its new input and the last answer's id "
        "(previous_response_id, --api responses).",
        "LOCUST_LLM_CONVERSATION_STATE",
        _choice("client", "server"),
        "workload",
    ),
    Flag(
        "--tools",
        None,
        "JSON file of tool schemas (OpenAI's format) offered with every request, converted for each --api.",
        "LOCUST_LLM_TOOLS",
        load_tools,
        "workload",
    ),
    Flag(
        "--tool-call-share",
        None,
        "Share of turns (0-1, or 25%) that ask for a tool call (tool_choice required); the rest leave it to the model.",
        "LOCUST_LLM_TOOL_CALL_SHARE",
        parse_tool_share,
        "workload",
    ),
    Flag(
        "--tool-result-tokens",
        "64",
        "Tokens of the synthetic tool result a conversation sends back as its next turn after a tool call.",
        "LOCUST_LLM_TOOL_RESULT_TOKENS",
        parse_positive_int,
        "workload",
    ),
    Flag(
        "--think-time",
        "0",
        "Pause between the turns of a conversation: SECONDS or SECONDS:JITTER (uniform +-).",
        "LOCUST_LLM_THINK_TIME",
        parse_think_time,
        "workload",
    ),
    Flag(
        "--max-context-tokens",
        None,
        "End a conversation instead of sending a turn whose prompt plus max_tokens "
        "would pass this many tokens (the model's context window).",
        "LOCUST_LLM_MAX_CONTEXT_TOKENS",
        parse_positive_int,
        "workload",
    ),
    Flag(
        "--seed",
        None,
        "Seed of every random choice of the users (prompts, lengths, jitter).",
        "LOCUST_LLM_SEED",
        parse_int,
        "workload",
    ),
    # client behaviour
    Flag(
        "--retry-policy",
        "honor",
        "After HTTP 429/503: honor (wait Retry-After, else exponential backoff with full "
        "jitter), none (record and move on), naive (retry at once).",
        "LOCUST_LLM_RETRY_POLICY",
        _choice(*POLICIES),
        "client",
    ),
    Flag(
        "--max-retries",
        "3",
        "Retries of one request under honor or naive.",
        "LOCUST_LLM_MAX_RETRIES",
        parse_nonnegative_int,
        "client",
    ),
    Flag(
        "--backoff-base",
        "500ms",
        "Backoff of the first retry without Retry-After (doubles each time).",
        "LOCUST_LLM_BACKOFF_BASE",
        parse_duration_s,
        "client",
    ),
    Flag(
        "--backoff-max",
        "30s",
        "Longest backoff without Retry-After.",
        "LOCUST_LLM_BACKOFF_MAX",
        parse_duration_s,
        "client",
    ),
    Flag(
        "--max-retry-wait",
        "60s",
        "Longest wait before trying a refusing model again, whatever its Retry-After "
        "says; waits cut short are counted (retry_waits_capped).",
        "LOCUST_LLM_MAX_RETRY_WAIT",
        parse_duration_s,
        "client",
    ),
    Flag(
        "--fallback-models",
        None,
        "Comma-separated models to try, in order, when the model refuses a request (see --fallback-on).",
        "LOCUST_LLM_FALLBACK_MODELS",
        group="client",
    ),
    Flag(
        "--fallback-on",
        "429,503",
        "HTTP statuses that send a request to the next fallback model.",
        "LOCUST_LLM_FALLBACK_ON",
        parse_statuses,
        "client",
    ),
    Flag(
        "--hedge-ttft-ms",
        None,
        "With no first token after this many ms, send the request to the next model too (or the same one) and keep "
        "the first to stream.",
        "LOCUST_LLM_HEDGE_TTFT_MS",
        _optional_number(),
        "client",
    ),
    # steps and validity
    Flag(
        "--steps",
        "8,16,32,64,128",
        "Concurrency steps: comma-separated, strictly increasing user counts.",
        "LOCUST_LLM_STEPS",
        parse_steps,
        "steps",
    ),
    Flag(
        "--rates",
        None,
        "Open-loop arrival rates instead of users: requests per second per step, comma-separated, "
        "strictly increasing (e.g. 2,4,8); excludes --steps.",
        "LOCUST_LLM_RATES",
        parse_rates,
        "steps",
    ),
    Flag(
        "--arrivals",
        "poisson",
        "With --rates, how requests arrive: poisson, constant or gamma:CV (CV < 1 more regular, > 1 burstier).",
        "LOCUST_LLM_ARRIVALS",
        parse_arrivals,
        "steps",
    ),
    Flag(
        "--max-in-flight",
        "1000",
        "With --rates, the most requests in flight at once (all generators together); an "
        "arrival beyond it is dropped and counted, never delayed.",
        "LOCUST_LLM_MAX_IN_FLIGHT",
        parse_positive_int,
        "steps",
    ),
    Flag(
        "--trace",
        None,
        "Replay this JSON Lines trace (Mooncake format: timestamp ms, input_length or text, output_length, hash_ids) "
        "open loop.",
        "LOCUST_LLM_TRACE",
        parse_text,
        "steps",
    ),
    Flag(
        "--trace-speeds",
        "1",
        "With --trace, the replay speed of each step, comma-separated, strictly increasing (2 = twice your traffic).",
        "LOCUST_LLM_TRACE_SPEEDS",
        parse_rates,
        "steps",
    ),
    Flag(
        "--trace-block-tokens",
        "512",
        "With --trace, the tokens of each hash_ids block (Mooncake's 512).",
        "LOCUST_LLM_TRACE_BLOCK_TOKENS",
        parse_positive_int,
        "steps",
    ),
    Flag(
        "--trace-cache-across-steps",
        None,
        "With --trace, send the same bytes in every pass (each step, each wrap): the warm prefix cache. Default: fresh "
        "prefixes per pass.",
        "LOCUST_LLM_TRACE_CACHE_ACROSS_STEPS",
        group="steps",
        switch=True,
    ),
    Flag(
        "--trace-offset",
        "0",
        "With --trace, where each step's replay starts in the trace, e.g. 10m.",
        "LOCUST_LLM_TRACE_OFFSET",
        parse_offset_s,
        "steps",
    ),
    Flag(
        "--repeats",
        "1",
        "Run the steps N times, interleaved (8,16,32,8,16,32,...): intervals from the spread between passes, and how "
        "many agree on the knee.",
        "LOCUST_LLM_REPEATS",
        parse_positive_int,
        "steps",
    ),
    Flag(
        "--step-duration",
        "30s",
        "How long each step lasts, e.g. 30s, 2m, 1m30s (with --search: the longest a probe may last).",
        "LOCUST_LLM_STEP_DURATION",
        parse_duration_s,
        "steps",
    ),
    Flag(
        "--warmup",
        "auto",
        "Kept apart after each step change: a duration (5s), a share (10%) or auto: max(5 s, 10%, the last step's "
        "E2E p90), at most half the step.",
        "LOCUST_LLM_WARMUP",
        parse_warmup,
        "steps",
    ),
    Flag(
        "--fast-path",
        "auto",
        "auto: locust-llm's own stream reader and batched logging, unless a library changed (checked at start); off: "
        "public APIs only.",
        "LOCUST_LLM_FAST_PATH",
        _choice("auto", "off"),
        "steps",
    ),
    Flag(
        "--locust-itl-events",
        "each",
        "each: every gap between tokens in Locust's 'ITL' row; off: none there (the per-step ITL stays exact).",
        "LOCUST_LLM_ITL_EVENTS",
        _choice("each", "off"),
        "steps",
    ),
    Flag(
        "--max-generator-cpu",
        "80",
        "A step is invalid when a generator process used more CPU than this % of one core (an overloaded generator "
        "inflates latency).",
        "LOCUST_LLM_MAX_GENERATOR_CPU",
        parse_percent,
        "steps",
    ),
    Flag(
        "--max-sched-lag",
        "10ms",
        "A step is marked invalid when the scheduling lag p99 (user ready -> request sent) exceeds this.",
        "LOCUST_LLM_MAX_SCHED_LAG",
        parse_duration_s,
        "steps",
    ),
    Flag(
        "--min-step-requests",
        "10",
        "A step is invalid when its steady window holds fewer completed requests; lengthen --step-duration for long "
        "outputs.",
        "LOCUST_LLM_MIN_STEP_REQUESTS",
        parse_nonnegative_int,
        "steps",
    ),
    Flag(
        "--max-users-per-worker",
        "0",
        "Distributed sweeps: refuse a plan whose largest step exceeds --expect-workers times this many users (0: no "
        "check; docs/kubernetes.md).",
        "LOCUST_LLM_MAX_USERS_PER_WORKER",
        parse_nonnegative_int,
        "steps",
    ),
    Flag(
        "--min-workers",
        "0",
        "Distributed runs: stop the run (exit 3, every file written) when fewer workers than this are left (0: never).",
        "LOCUST_LLM_MIN_WORKERS",
        parse_nonnegative_int,
        "steps",
    ),
    # capacity search
    Flag(
        "--search",
        "off",
        "Adaptive search instead of a fixed sweep: sla (highest load meeting the --sla-* limits) or knee (the TTFT "
        "p99 knee); off.",
        "LOCUST_LLM_SEARCH",
        _choice("off", "sla", "knee"),
        "search",
    ),
    Flag(
        "--search-precision",
        "10%",
        "Stop when the bracket around the answer is this narrow (a share of the load, "
        "at least 1 user), e.g. 10% or 0.05.",
        "LOCUST_LLM_SEARCH_PRECISION",
        parse_share,
        "search",
    ),
    Flag(
        "--search-max-users",
        "512",
        "The highest load the search tries (users; with --rates, requests/s).",
        "LOCUST_LLM_SEARCH_MAX_USERS",
        parse_positive_number,
        "search",
    ),
    Flag(
        "--search-max-duration",
        "30m",
        "Wall-time budget of the search: it then ends with the best bracket so far and says so.",
        "LOCUST_LLM_SEARCH_MAX_DURATION",
        parse_duration_s,
        "search",
    ),
    Flag(
        "--search-min-requests",
        "300",
        "Steady-state requests a probe needs before it is judged (a stable p99); it ends earlier at --step-duration.",
        "LOCUST_LLM_SEARCH_MIN_REQUESTS",
        parse_positive_int,
        "search",
    ),
    # reports
    Flag(
        "--llm-report",
        None,
        "Directory for report.html and summary.json (default: {prefix}_llm_report.html and _llm_summary.json by the "
        "CSVs; off: none).",
        "LOCUST_LLM_REPORT",
        group="report",
    ),
    Flag(
        "--llm-summary-log",
        "off",
        "on: also print summary.json as one log line ('locust-llm-summary: {...}'), so results outlive their pod.",
        "LOCUST_LLM_SUMMARY_LOG",
        parse_on_off,
        "report",
        web_ui=False,
    ),
    Flag(
        "--locust-stats",
        "auto",
        "Locust's statistics table every few seconds in a headless run: on, off, or auto (off unless --print-stats).",
        "LOCUST_LLM_LOCUST_STATS",
        _choice("auto", "on", "off"),
        "report",
        web_ui=False,
    ),
    Flag(
        "--baseline",
        None,
        "Compare the run's summary with this baseline summary.json; the exit code is 1 on regression.",
        "LOCUST_LLM_BASELINE",
        group="report",
    ),
    *REPORT_FLAGS,
    *GATE_FLAGS,
    # the embedded simulator
    Flag(
        "--sim-args",
        "",
        "Extra arguments for the embedded simulator started when no --host is given, e.g. "
        "'--capacity 16'. See 'locust-llm sim --help'.",
        "LOCUST_LLM_SIM_ARGS",
        parse_shell_args,
        "sim",
        web_ui=False,
    ),
)


def parse_flags(options: Any, flags: Iterable[Flag] = FLAGS) -> dict[str, Any]:
    """``{dest: typed value}`` of ``flags`` read from ``options`` (Locust's ``parsed_options`` or any object with
    the flags' ``dest`` attributes; missing ones take their defaults). Raises ``ConfigError``."""
    values = {}
    for flag in flags:
        raw = getattr(options, flag.dest, None)
        if flag.multiple and flag.env_var:  # the env var adds entries, one per line
            raw = [*_as_list(raw), *os.environ.get(flag.env_var, "").splitlines()]
        elif raw is None and flag.secret and flag.env_var:
            raw = os.environ.get(flag.env_var)
        values[flag.dest] = flag.value(raw)
    return values


def _as_list(raw: Any) -> list[Any]:
    if raw is None:
        return []
    return [raw] if isinstance(raw, str) else list(raw)


_FALSE = ("", "0", "false", "off", "no")


def add_arguments(
    parser: Any, flags: Iterable[Flag] = FLAGS, title: str = "locust-llm", description: str | None = None
) -> None:
    """Register ``flags`` on ``parser``: Locust's configargparse parser (which reads the env vars itself) or a plain
    argparse parser (the env var then supplies the default)."""
    if title == "locust-llm" and description is None:
        description = "LLM endpoint load testing (locust-llm); 'locust-llm flags' lists every flag"
    group = parser.add_argument_group(title, description)
    reads_env = hasattr(parser, "_add_config_file_help")  # configargparse
    for flag in flags:
        kwargs: dict[str, Any] = {"dest": flag.dest, "help": flag.help}
        if not reads_env:  # configargparse shows the env var itself; argparse formats help with %
            kwargs["help"] = flag.help.replace("%", "%%")
            shown = [f"default: {flag.default.replace('%', '%%')}"] if flag.default else []
            shown += [f"env {flag.env_var}"] if flag.env_var else []
            kwargs["help"] += f" ({'; '.join(shown)})" if shown else ""
        if flag.switch:
            kwargs["action"] = "store_true"
        elif flag.multiple:
            kwargs["action"] = "append"
        if not flag.switch:
            kwargs["default"] = flag.default
        if flag.multiple:
            pass  # a repeatable flag's env var adds entries: parse_flags reads it
        elif flag.env_var and reads_env:
            kwargs["env_var"] = flag.env_var
        elif flag.env_var and os.environ.get(flag.env_var):
            env = os.environ[flag.env_var]
            kwargs["default"] = env.strip().lower() not in _FALSE if flag.switch else env
        action = group.add_argument(flag.name, **kwargs)
        # what Locust's own add_argument(include_in_web_ui=..., is_secret=...) sets; groups do not take those kwargs
        action.include_in_web_ui = flag.web_ui
        action.is_secret = flag.secret
        action.is_required = False
        action.is_multiple = False
