"""``locust-llm sim``: run the simulated OpenAI-compatible LLM server on its own."""

from __future__ import annotations

import argparse
import asyncio
import sys

from locust_llm.sim.engine import PacingParams
from locust_llm.sim.server import ModelSpec, SimConfig, serve

__all__ = ["add_arguments", "config_from_args", "main"]

DEFAULT_MODEL = "sim-llm"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="Interface to listen on (default: 127.0.0.1).")
    parser.add_argument("--port", type=int, default=8000, help="TCP port; 0 picks a free one (default: 8000).")
    parser.add_argument("--model", default=DEFAULT_MODEL, help=f"Model name served (default: {DEFAULT_MODEL}).")
    parser.add_argument(
        "--capacity",
        type=int,
        default=32,
        help="Sequences generated at once; the rest queue FIFO (default: 32).",
    )
    parser.add_argument(
        "--ttft-ms", type=float, default=200.0, help="Time to first token once admitted (default: 200)."
    )
    parser.add_argument("--itl-ms", type=float, default=20.0, help="Interval between tokens (default: 20).")
    parser.add_argument(
        "--context-tokens",
        type=int,
        default=32_768,
        help="Context size; longer requests get HTTP 400 (default: 32768).",
    )
    parser.add_argument("--seed", type=int, default=0, help="Seed of every random choice (default: 0).")
    parser.add_argument(
        "--parent-pid", type=int, default=None, help="Exit when this process is gone (used by embedded runs)."
    )


def config_from_args(args: argparse.Namespace) -> SimConfig:
    try:
        params = PacingParams(ttft_ms=args.ttft_ms, itl_ms=args.itl_ms, capacity=args.capacity)
    except ValueError as exc:
        raise SystemExit(f"locust-llm sim: error: {exc}") from None
    return SimConfig(models=(ModelSpec(args.model, params, args.context_tokens),), seed=args.seed)


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    try:
        asyncio.run(serve(config, args.host, args.port, args.parent_pid))
    except OSError as exc:
        print(
            f"locust-llm sim: error: cannot listen on {args.host}:{args.port}: {exc.strerror}",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        pass
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="locust-llm sim", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))
