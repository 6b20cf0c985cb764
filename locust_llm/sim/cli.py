"""``locust-llm sim``: run the simulated OpenAI-compatible LLM server on its own.

A preset (``--preset``) defines the served models; the flags below override settings of its first model, and
``--add-model`` serves more. Engines: ``batching`` (continuous batching on a KV-cache budget, the default) and
``pacing`` (fixed TTFT and ITL with a capacity; ``--capacity``, ``--ttft-ms`` and ``--itl-ms`` select it).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from typing import Any

from locust_llm.sim.config import PRESETS, ModelSpec, SimConfig, apply_overrides, parse_decode_table, preset
from locust_llm.sim.faults import FAULT_KINDS, FaultPlan, parse_fault

__all__ = ["DEFAULT_MODEL", "add_arguments", "config_from_args", "main"]

DEFAULT_MODEL = "sim-llm"

# flag dest -> model setting it overrides (see config.apply_overrides)
_MODEL_FLAGS: dict[str, tuple[str, Any, str]] = {
    "engine": ("engine", str, "Engine of the first model: batching or pacing."),
    "kv_blocks": ("kv_blocks", int, "KV cache size in blocks (batching)."),
    "block_tokens": ("block_tokens", int, "Tokens per KV block (batching; default 16)."),
    "max_batch": ("max_batch", int, "Most sequences in one batch (batching)."),
    "decode_ms": ("decode_table", parse_decode_table, "Decode step time by batch size, e.g. 8:12,16:14,32:17."),
    "prefill_ms_per_1k": ("prefill_ms_per_1k", float, "Prefill time per 1,000 uncached prompt tokens, ms."),
    "max_prefill_tokens": ("max_prefill_tokens", int, "Prompt tokens prefilled per step at most (batching)."),
    "capacity": ("capacity", int, "Sequences generated at once (selects the pacing engine)."),
    "ttft_ms": ("ttft_ms", float, "Time to first token once admitted (selects the pacing engine)."),
    "itl_ms": ("itl_ms", float, "Interval between tokens (selects the pacing engine)."),
    "max_concurrent_per_key": ("max_concurrent", int, "Concurrent requests per API key before HTTP 429."),
    "tpm": ("tpm", int, "Tokens per minute per API key (prompt + max_tokens) before HTTP 429."),
    "retry_after_s": ("retry_after_s", float, "Retry-After of a concurrency 429, seconds."),
    "overload_queue": ("overload_queue", int, "Answer HTTP 503 while this many requests wait."),
    "replicas": ("replicas", int, "Independent engine replicas of the first model."),
    "context_tokens": ("context_tokens", int, "Context size; longer requests get HTTP 400."),
    "output_fraction": ("output_fraction", float, "Output lengths drawn in [F * max_tokens, max_tokens]; 1 = fixed."),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="Interface to listen on (default: 127.0.0.1).")
    parser.add_argument("--port", type=int, default=8000, help="TCP port; 0 picks a free one (default: 8000).")
    presets = "; ".join(f"{name}: {text}" for name, (_, text) in PRESETS.items())
    parser.add_argument(
        "--preset",
        default=None,
        help=f"Models to serve (default: default; pacing when --capacity, --ttft-ms or --itl-ms is given). {presets}.",
    )
    parser.add_argument("--model", default=None, help="Rename the first model of the preset.")
    for dest, (_, _, text) in _MODEL_FLAGS.items():
        parser.add_argument("--" + dest.replace("_", "-"), dest=dest, default=None, help=text + " Default: preset.")
    parser.add_argument(
        "--add-model",
        action="append",
        default=[],
        metavar="NAME[:KEY=VALUE,...]",
        help="Also serve NAME: a copy of the first model with settings changed, e.g. "
        "'mini:kv_blocks=128,max_concurrent=32'. Repeatable.",
    )
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="KIND:PROB",
        help=f"Inject a fault into this share of requests, e.g. 503:0.05. Kinds: {', '.join(FAULT_KINDS)}. Repeatable.",
    )
    parser.add_argument(
        "--fault-script", default="", help="Faults of successive requests, cycling, e.g. 'ok,503,reset' (ok = none)."
    )
    parser.add_argument(
        "--close-after-response",
        action="store_true",
        help="Close every connection after its response although keep-alive was advertised.",
    )
    parser.add_argument(
        "--close-delay-ms",
        type=float,
        default=0.0,
        help="With 'close' faults: stop reading at once, close this many ms after the response (default: 0, close "
        "at once). A request sent meanwhile on the connection gets no byte of answer, as with real servers.",
    )
    parser.add_argument("--stall-s", type=float, default=600.0, help="How long a 'stall' fault holds (default: 600).")
    parser.add_argument(
        "--prefix-cache",
        choices=("auto", "hint", "off"),
        default="auto",
        help="Cache prompt prefixes: auto (system prompts and cache_control-marked prefixes), hint (only "
        "cache_control-marked), off (default: auto).",
    )
    parser.add_argument("--seed", type=int, default=0, help="Seed of every random choice (default: 0).")
    parser.add_argument(
        "--parent-pid", type=int, default=None, help="Exit when this process is gone (used by embedded runs)."
    )


def _convert(dest: str, raw: str) -> Any:
    _setting, kind, _ = _MODEL_FLAGS[dest]
    try:
        return kind(raw)
    except ValueError as exc:
        raise ValueError(f"--{dest.replace('_', '-')}: {exc}") from None


def _parse_add_model(text: str) -> tuple[str, dict[str, Any]]:
    name, _, rest = text.partition(":")
    if not name:
        raise ValueError(f"--add-model needs a name, got {text!r}")
    overrides: dict[str, Any] = {}
    flag_by_setting = {setting: dest for dest, (setting, _, _) in _MODEL_FLAGS.items()}
    for item in filter(None, rest.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--add-model settings are KEY=VALUE, got {item!r}")
        dest = flag_by_setting.get(key, key)
        overrides[key] = _convert(dest, value) if dest in _MODEL_FLAGS else value
    return name, overrides


def config_from_args(args: argparse.Namespace) -> SimConfig:
    """Build the configuration; raises ValueError with a readable message on bad values."""
    overrides: dict[str, Any] = {}
    for dest in _MODEL_FLAGS:
        raw = getattr(args, dest)
        if raw is not None:
            overrides[_MODEL_FLAGS[dest][0]] = _convert(dest, raw)
    pacing_flags = bool(overrides.keys() & {"capacity", "ttft_ms", "itl_ms"})
    if pacing_flags and "engine" not in overrides:
        overrides["engine"] = "pacing"
    models = list(preset(args.preset or ("pacing" if pacing_flags else "default")))
    if args.model:
        overrides["name"] = args.model
    first = apply_overrides(models[0], overrides)
    models[0] = first
    for text in args.add_model:
        name, extra = _parse_add_model(text)
        models.append(apply_overrides(dataclasses.replace(first, name=name), extra))
    faults = FaultPlan(
        probabilities=tuple(parse_fault(f) for f in args.fault),
        script=tuple(s.strip() for s in args.fault_script.split(",") if s.strip()),
        seed=args.seed,
    )
    return SimConfig(
        models=tuple(models),
        seed=args.seed,
        faults=faults,
        close_after_response=args.close_after_response,
        close_delay_s=args.close_delay_ms / 1000.0,
        stall_s=args.stall_s,
    )


def describe(config: SimConfig) -> str:
    lines = []
    for spec in config.models:
        lines.append(f"  {spec.name}: {_summary(spec)}")
    return "\n".join(lines)


def _summary(spec: ModelSpec) -> str:
    from locust_llm.sim.server import REFERENCE_WORKLOAD
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
    except ValueError as exc:
        print(f"locust-llm sim: error: {exc}", file=sys.stderr)
        return 2
    print(f"locust-llm sim: serving\n{describe(config)}", file=sys.stderr, flush=True)
    try:
        _run_loop(serve(config, args.host, args.port, args.parent_pid, prefix_mode=args.prefix_cache))
    except OSError as exc:
        print(f"locust-llm sim: error: cannot listen on {args.host}:{args.port}: {exc.strerror}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="locust-llm sim", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))
