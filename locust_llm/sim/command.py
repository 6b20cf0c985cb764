"""``locust-llm sim``: run the simulated OpenAI-compatible LLM server on its own.

A preset (``--preset``) defines the served models; the flags override its first model's settings and
``--add-model`` serves more. Engines: ``batching`` (the default) and ``pacing`` (``--capacity``, ``--ttft-ms``,
``--itl-ms``).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import shutil
import sys
import tempfile
from collections.abc import Callable
from typing import Any

from locust_llm.config.flags import Flag, parse_flags
from locust_llm.config.flags import add_arguments as add_flags
from locust_llm.config.parsers import ConfigError, parse_choice, parse_int, parse_text
from locust_llm.sim.faults import FAULT_KINDS, FaultPlan, parse_fault
from locust_llm.sim.presets import PRESETS, ModelSpec, SimConfig, apply_overrides, parse_decode_table, preset

__all__ = ["DEFAULT_MODEL", "SIM_FLAGS", "add_arguments", "config_from_args", "main"]

DEFAULT_MODEL = "sim-llm"


def _number(kind: Callable[[str], Any]) -> Callable[[str, str], Any]:
    def parse(text: str, flag: str) -> Any:
        try:
            return kind(str(text).strip())
        except ValueError as exc:
            raise ConfigError(f"{flag} must be {'an integer' if kind is int else 'a number'}, got {text!r}") from exc

    return parse


def _decode_table(text: str, flag: str) -> tuple[tuple[int, float], ...]:
    return parse_decode_table(text)


def _faults(values: list[str] | None, flag: str) -> tuple[tuple[str, float], ...]:
    return tuple(parse_fault(f) for f in values or ())


METRIC_GAUGES = ("kv_usage", "running", "waiting", "preemptions")


def _gauges(text: str, flag: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in str(text or "").split(",") if n.strip())
    unknown = [n for n in names if n not in METRIC_GAUGES]
    if unknown:
        raise ConfigError(f"{flag} names gauges of {', '.join(METRIC_GAUGES)}, got {', '.join(unknown)}")
    return names


def _many(values: list[str] | None, flag: str) -> tuple[str, ...]:
    return tuple(values or ())


# flag -> (model setting it overrides (see config.apply_overrides), parser, help)
_MODEL_FLAGS: dict[str, tuple[str, Callable[[str, str], Any], str]] = {
    "--engine": ("engine", parse_text, "Engine of the first model: batching or pacing."),
    "--kv-blocks": ("kv_blocks", _number(int), "KV cache size in blocks (batching)."),
    "--block-tokens": ("block_tokens", _number(int), "Tokens per KV block (batching; default 16)."),
    "--max-batch": ("max_batch", _number(int), "Most sequences in one batch (batching)."),
    "--decode-ms": ("decode_table", _decode_table, "Decode step time by batch size, e.g. 8:12,16:14,32:17."),
    "--prefill-ms-per-1k": ("prefill_ms_per_1k", _number(float), "Prefill time per 1,000 uncached prompt tokens, ms."),
    "--max-prefill-tokens": ("max_prefill_tokens", _number(int), "Most prompt tokens prefilled per step (batching)."),
    "--capacity": ("capacity", _number(int), "Sequences generated at once (selects the pacing engine)."),
    "--ttft-ms": ("ttft_ms", _number(float), "Time to first token once admitted (selects the pacing engine)."),
    "--itl-ms": ("itl_ms", _number(float), "Interval between tokens (selects the pacing engine)."),
    "--max-concurrent-per-key": ("max_concurrent", _number(int), "Concurrent requests per API key before HTTP 429."),
    "--tpm": ("tpm", _number(int), "Tokens per minute per API key (prompt + max_tokens) before HTTP 429."),
    "--retry-after-s": ("retry_after_s", _number(float), "Retry-After of a concurrency 429, seconds."),
    "--overload-queue": ("overload_queue", _number(int), "Answer HTTP 503 while this many requests wait."),
    "--replicas": ("replicas", _number(int), "Independent engine replicas of the first model."),
    "--context-tokens": ("context_tokens", _number(int), "Context size; longer requests get HTTP 400."),
    "--output-fraction": (
        "output_fraction",
        _number(float),
        "Output lengths drawn in [F * max_tokens, max_tokens]; 1 = fixed.",
    ),
    "--reasoning-tokens": (
        "reasoning_tokens",
        _number(int),
        "A reasoning model: stream this many reasoning_content tokens before each answer.",
    ),
}


def _env(name: str) -> str:
    return "LOCUST_LLM_SIM_" + name.lstrip("-").replace("-", "_").upper()


def _sim_flag(name: str, default: str | None, text: str, parse: Any = parse_text, **kw: Any) -> Flag:
    return Flag(name, default, text, _env(name), parse, "sim", **kw)


_PRESETS_HELP = "; ".join(f"{name}: {text}" for name, (_, text) in PRESETS.items())

SIM_FLAGS: tuple[Flag, ...] = (
    _sim_flag("--host", "127.0.0.1", "Interface to listen on."),
    _sim_flag("--port", "8000", "TCP port; 0 picks a free one.", parse_int),
    _sim_flag(
        "--preset",
        None,
        "Models to serve: default, grok-like, small-gpu, pacing (implied by --capacity, --ttft-ms, --itl-ms), "
        "reasoning or slots (docs/simulator.md).",
    ),
    _sim_flag("--model", None, "Rename the first model of the preset."),
    *(_sim_flag(name, None, text + " Default: preset.", parse) for name, (_, parse, text) in _MODEL_FLAGS.items()),
    _sim_flag(
        "--add-model",
        None,
        "Also serve NAME: a copy of the first model with settings changed, e.g. "
        "'mini:kv_blocks=128,max_concurrent=32' (NAME[:KEY=VALUE,...]). Repeatable.",
        _many,
        multiple=True,
    ),
    _sim_flag(
        "--fault",
        None,
        "Inject a fault into this share of requests, e.g. 503:0.05 (KIND:PROB). Kinds: "
        f"{', '.join(FAULT_KINDS)}. Repeatable.",
        _faults,
        multiple=True,
    ),
    _sim_flag("--fault-script", "", "Faults of successive requests, cycling, e.g. 'ok,503,reset' (ok = none)."),
    _sim_flag(
        "--close-after-response",
        None,
        "Close every connection after its response although keep-alive was advertised.",
        switch=True,
    ),
    _sim_flag(
        "--close-delay-ms",
        "0",
        "With 'close' faults: close the connection this many ms after the response (0: at once); a request sent "
        "meanwhile gets no answer.",
        _number(float),
    ),
    _sim_flag(
        "--min-tokens",
        "honour",
        "How requests' min_tokens and ignore_eos are taken: honour (as vLLM), ignore (no effect) or reject (HTTP 400, "
        "as OpenAI).",
        lambda text, flag: parse_choice(text, flag, ("honour", "ignore", "reject")),
    ),
    _sim_flag("--stall-s", "600", "How long a 'stall' fault holds.", _number(float)),
    _sim_flag(
        "--metrics-omit",
        "",
        "Leave these gauges out of /metrics (kv_usage, running, waiting, preemptions), e.g. kv_usage for a server "
        "without a KV gauge.",
        lambda text, flag: _gauges(text, flag),
    ),
    _sim_flag(
        "--prefix-cache",
        "auto",
        "Cache prompt prefixes: auto (every prefix, as vLLM; a system prompt's KV shared), hint (only "
        "cache_control-marked ones) or off.",
        lambda text, flag: parse_choice(text, flag, ("auto", "hint", "off")),
    ),
    _sim_flag(
        "--tls",
        None,
        "Serve HTTPS with a certificate signed by a throw-away CA whose file it prints; trust it with locust-llm's "
        "--ca-bundle.",
        switch=True,
    ),
    _sim_flag(
        "--tls-dir", None, "With --tls: write the CA, certificate and key here (default: a new temporary directory)."
    ),
    _sim_flag(
        "--realtime",
        None,
        "Run under SCHED_FIFO (priority 1) so no other task delays a step's writes; needs root, CAP_SYS_NICE or "
        "ulimit -r >= 1, and a core.",
        switch=True,
    ),
    _sim_flag("--seed", "0", "Seed of every random choice.", parse_int),
    _sim_flag("--parent-pid", None, "Exit when this process is gone (used by embedded runs).", parse_int),
)
"""The simulator's flags; each reads ``LOCUST_LLM_SIM_<NAME>`` from the environment as its default."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_flags(parser, SIM_FLAGS, "simulator")


def _parse_add_model(text: str) -> tuple[str, dict[str, Any]]:
    name, _, rest = text.partition(":")
    if not name:
        raise ConfigError(f"--add-model needs a name, got {text!r}")
    overrides: dict[str, Any] = {}
    flag_by_setting = {setting: (flag, parse) for flag, (setting, parse, _) in _MODEL_FLAGS.items()}
    for item in filter(None, rest.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--add-model settings are KEY=VALUE, got {item!r}")
        flag, parse = flag_by_setting.get(key, (None, None))
        overrides[key] = parse(value, flag) if parse is not None and flag is not None else value
    return name, overrides


def config_from_args(args: argparse.Namespace) -> SimConfig:
    """Build the configuration; raises ValueError with a readable message on bad values."""
    v = parse_flags(args, SIM_FLAGS)
    overrides: dict[str, Any] = {}
    for flag, (setting, _, _) in _MODEL_FLAGS.items():
        value = v[flag.lstrip("-").replace("-", "_")]
        if value is not None:
            overrides[setting] = value
    pacing_flags = bool(overrides.keys() & {"capacity", "ttft_ms", "itl_ms"})
    if pacing_flags and "engine" not in overrides:
        overrides["engine"] = "pacing"
    models = list(preset(v["preset"] or ("pacing" if pacing_flags else "default")))
    if v["model"]:
        overrides["name"] = v["model"]
    first = apply_overrides(models[0], overrides)
    models[0] = first
    for text in v["add_model"]:
        name, extra = _parse_add_model(text)
        models.append(apply_overrides(dataclasses.replace(first, name=name), extra))
    faults = FaultPlan(
        probabilities=v["fault"],
        script=tuple(s.strip() for s in (v["fault_script"] or "").split(",") if s.strip()),
        seed=v["seed"],
    )
    return SimConfig(
        models=tuple(models),
        seed=v["seed"],
        faults=faults,
        close_after_response=v["close_after_response"],
        close_delay_s=v["close_delay_ms"] / 1000.0,
        stall_s=v["stall_s"],
        metrics_omit=v["metrics_omit"],
        min_tokens=v["min_tokens"],
    )


def describe(config: SimConfig) -> str:
    lines = []
    for spec in config.models:
        lines.append(f"  {spec.name}: {_summary(spec)}")
    return "\n".join(lines)


def _summary(spec: ModelSpec) -> str:
    from locust_llm.sim.replicas import REFERENCE_WORKLOAD
    from locust_llm.sim.truth import saturation_users

    cap = spec.limits.max_concurrent
    limit = f", {cap} concurrent requests per key" if cap else ""
    if spec.engine == "pacing":
        p = spec.pacing
        return f"pacing, TTFT {p.ttft_ms:g} ms, ITL {p.itl_ms:g} ms, capacity {p.capacity * spec.replicas}{limit}"
    mean = round((1 + spec.output_fraction) / 2 * REFERENCE_WORKLOAD["max_tokens"])
    knee = saturation_users(spec.batch, REFERENCE_WORKLOAD["prompt_tokens"], mean) * spec.replicas
    return f"batching, {spec.batch.kv_tokens} KV tokens x {spec.replicas}, KV knee ~{knee} users{limit}"


def _run_loop(main: Any) -> None:
    """Run on uvloop when it is installed (its transports write in C), else on asyncio's default loop."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
        return
    uvloop.run(main)


def run(args: argparse.Namespace) -> int:
    from locust_llm.sim.server import serve

    try:
        config = config_from_args(args)
        v = parse_flags(args, SIM_FLAGS)
    except ValueError as exc:
        print(f"locust-llm sim: error: {exc}", file=sys.stderr)
        return 2
    if v["realtime"]:
        from locust_llm.sim.realtime import RealtimeRefused, request

        try:
            request()
        except RealtimeRefused as exc:
            print(f"locust-llm sim: error: {exc}", file=sys.stderr)
            return 2
    print(f"locust-llm sim: serving\n{describe(config)}", file=sys.stderr, flush=True)
    host, port = v["host"], v["port"]
    made = tempfile.mkdtemp(prefix="locust-llm-sim-tls-") if v["tls"] and not v["tls_dir"] else None
    tls_dir = (v["tls_dir"] or made) if v["tls"] else None
    try:
        _run_loop(serve(config, host, port, v["parent_pid"], prefix_mode=v["prefix_cache"], tls_dir=tls_dir))
    except OSError as exc:
        print(f"locust-llm sim: error: cannot listen on {host}:{port}: {exc.strerror}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    finally:
        if made:
            shutil.rmtree(made, ignore_errors=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="locust-llm sim", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))
