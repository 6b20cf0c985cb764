"""``locust-llm``: the tools around a run — ``report``, ``compare`` and ``sim``.

Runs themselves use ``locust -f locustfile.py``. Exit codes of ``report`` and ``compare``: 0 fine, 1 regression
(with a baseline), 2 bad input (with a one-line error).
"""

from __future__ import annotations

import argparse
import sys

from locust_llm import __version__
from locust_llm.options import GATE_FLAGS, REPORT_FLAGS, ConfigError, Flag, prices_from, sla_from, thresholds_from
from locust_llm.sim import cli as sim_cli

__all__ = ["main"]


def _add_flags(parser: argparse.ArgumentParser, flags: tuple[Flag, ...]) -> None:
    for flag in flags:
        default = f" (default: {flag.default})" if flag.default else ""
        parser.add_argument(flag.name, dest=flag.dest, default=flag.default, help=flag.help + default)


def _raw(args: argparse.Namespace) -> dict[str, str]:
    return {k: v for k, v in vars(args).items() if isinstance(v, str)}


def cmd_report(args: argparse.Namespace) -> int:
    from locust_llm.reports.make import make_report

    raw = _raw(args)
    try:
        sla, prices, thresholds = sla_from(raw), prices_from(raw), thresholds_from(raw)
    except ConfigError as exc:
        print(f"locust-llm report: error: {exc}", file=sys.stderr)
        return 2
    outcome = make_report(args.prefix, args.out or args.prefix, sla, prices, args.baseline, thresholds)
    stream = sys.stderr if outcome.exit_code == 2 and outcome.summary is None else sys.stdout
    text = outcome.text
    if outcome.exit_code == 2:
        text = text.replace("error: ", "locust-llm report: error: ", 1) if outcome.summary is None else text
    print(text, file=stream)
    return outcome.exit_code


def cmd_compare(args: argparse.Namespace) -> int:
    from locust_llm.reports.compare import GateInputError
    from locust_llm.reports.make import gate, load_summary

    try:
        thresholds = thresholds_from(_raw(args))
        outcome = gate(load_summary(args.baseline, "the baseline"), load_summary(args.current, "the current run"),
                       thresholds)  # fmt: skip
    except (GateInputError, ConfigError) as exc:
        print(f"locust-llm compare: error: {exc}", file=sys.stderr)
        return 2
    print(outcome.text)
    return outcome.exit_code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="locust-llm", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--version", action="version", version=f"locust-llm {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    report = sub.add_parser(
        "report", help="Knees, SLA capacity and cost from a run's CSVs: report.html + summary.json."
    )
    report.add_argument("prefix", help="The run's --csv prefix (e.g. runs/demo), or a path to its _llm_steps.csv.")
    report.add_argument("--out", default=None, help="Directory for report.html and summary.json (default: PREFIX).")
    report.add_argument("--baseline", default=None, help="Compare with this summary.json; exit 1 on regression.")
    _add_flags(report, REPORT_FLAGS + GATE_FLAGS)
    report.set_defaults(func=cmd_report)

    compare = sub.add_parser("compare", help="Regression gate between two summary.json files (exit 1 on regression).")
    compare.add_argument("baseline", help="The baseline summary.json.")
    compare.add_argument("current", help="The summary.json of the run to judge.")
    _add_flags(compare, GATE_FLAGS)
    compare.set_defaults(func=cmd_compare)

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
