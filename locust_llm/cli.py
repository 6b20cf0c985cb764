"""``locust-llm``: the command-line entry point (``sim`` now; ``report`` and ``compare`` build on it)."""

from __future__ import annotations

import argparse
import sys

from locust_llm import __version__
from locust_llm.sim import cli as sim_cli

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="locust-llm",
        description="locust-llm: load-test OpenAI-compatible LLM endpoints. Runs use "
        "'locust -f locustfile.py'; this command holds the tools around them.",
    )
    parser.add_argument("--version", action="version", version=f"locust-llm {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sim = sub.add_parser("sim", help="Run the simulated OpenAI-compatible LLM server.", description=sim_cli.__doc__)
    sim_cli.add_arguments(sim)
    sim.set_defaults(func=sim_cli.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
