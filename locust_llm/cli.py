"""``locust-llm``: the tools around a run: report, compare, trend, sim and flags.

Runs themselves use ``locust -f locustfile.py``. Exit codes, as a run's: 0 a valid sweep, 1 a gate failed, 2 bad
input (one line on stderr), 3 the measurement is invalid (:mod:`locust_llm.reports.verdict`).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import textwrap
from typing import Any

from locust_llm import __version__
from locust_llm.config.flags import FLAGS, GATE_FLAGS, GROUPS, REPORT_FLAGS, Flag, add_arguments, parse_flags
from locust_llm.config.parsers import ConfigError
from locust_llm.config.run_config import prices_from, sla_from, thresholds_from
from locust_llm.sim import command as sim_command

__all__ = ["format_flags", "main"]


def _plain(doc: str | None) -> str:
    """A docstring for a terminal: without reST's roles (``:mod:`x``` -> ``x``) and double backquotes."""
    return re.sub(r":\w+:`~?([^`]+)`", r"\1", doc or "").replace("``", "")


def _fail(command: str, message: object) -> int:
    print(f"locust-llm {command}: error: {message}", file=sys.stderr)
    return 2


def cmd_report(args: argparse.Namespace) -> int:
    from locust_llm.reports.files import ReportInputError
    from locust_llm.reports.load import load_run, load_shards
    from locust_llm.reports.make import make_report, report_paths

    try:
        values = parse_flags(args, REPORT_FLAGS + GATE_FLAGS)
        if len(args.prefix) > 1 and not args.out:
            raise ReportInputError(
                f"{len(args.prefix)} prefixes are merged into one report: give --out DIR for it (none given)"
            )
        run = load_shards(args.prefix, prices_from(values)) if len(args.prefix) > 1 else load_run(args.prefix[0])
        outcome = make_report(
            run,
            report_paths(args.out or args.prefix[0]),
            sla_from(values),
            prices_from(values),
            args.baseline,
            thresholds_from(values),
            values["error_budget"],
        )
    except (ConfigError, ReportInputError) as exc:
        return _fail("report", exc)
    print(outcome.text)
    return outcome.exit_code


def _chain(summary: dict[str, Any]) -> bool:
    """Whether a run went through a chain of routes (``--routes`` with more than one route)."""
    routes = summary.get("routes") or {}
    return len(routes.get("routes") or []) > 1


def cmd_compare(args: argparse.Namespace) -> int:
    from locust_llm.reports.chain import chain_text
    from locust_llm.reports.compare import GateInputError, InvalidRunError
    from locust_llm.reports.make import gate, read_summary
    from locust_llm.reports.verdict import EXIT_INVALID

    try:
        thresholds = thresholds_from(parse_flags(args, GATE_FLAGS))
        baseline, current = read_summary(args.baseline, "the baseline"), read_summary(args.current, "the current run")
        if _chain(current) and not _chain(baseline):  # the primary alone against the chain: no gate
            lines = chain_text(baseline, current)
            print("\n".join(["locust-llm compare: the primary alone (baseline) against the chain (current)", *lines]))
            return 0
        outcome = gate(baseline, current, thresholds)
    except InvalidRunError as exc:
        print(f"locust-llm compare: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except (GateInputError, ConfigError) as exc:
        return _fail("compare", exc)
    print(outcome.text)
    return outcome.exit_code


def cmd_trend(args: argparse.Namespace) -> int:
    from pathlib import Path

    from locust_llm.reports.files import ReportInputError, read_json_object
    from locust_llm.reports.trend import append_line, history_line, load_history
    from locust_llm.reports.trend_html import write_trend

    source = Path(args.source)
    try:
        if args.window < 2:
            raise ConfigError(f"--window must be at least 2 runs, got {args.window}")
        if not 0 < args.max_drift_pct < 1000:
            raise ConfigError(f"--max-drift-pct must be above 0 and below 1000, got {args.max_drift_pct:g}")
        if args.append:
            if source.is_dir():
                raise ConfigError(f"--append adds to a history.jsonl file, and {source} is a directory")
            append_line(source, history_line(read_json_object(args.append, "--append"), args.append))
        lines = load_history(source)
        out = Path(args.out) if args.out else (source if source.is_dir() else source.parent)
        code, text = write_trend(lines, out, args.window, args.max_drift_pct)
    except (ConfigError, ReportInputError) as exc:
        return _fail("trend", exc)
    print(text)
    print(f"  trend: {out / 'trend.html'}, {out / 'trend.json'}")
    return code


def _flag_groups() -> list[tuple[str, list[Flag]]]:
    """The flags by group, in the order of ``GROUPS``, then the simulator's: one order for every format."""
    groups = [(GROUPS[key], [f for f in FLAGS if f.group == key]) for key in GROUPS]
    groups.append(("Simulator ('locust-llm sim', or through --sim-args)", list(sim_command.SIM_FLAGS)))
    return [(title, flags) for title, flags in groups if flags]


def _default(flag: Flag) -> str:
    return "on/off switch" if flag.switch else (flag.default or "-")


def format_flags(width: int = 100) -> str:
    """Every flag of a run and of the simulator: name, env var, default and help, grouped as in docs/flags.md."""
    lines = [
        "locust-llm flags: every flag of 'locust -f locustfile.py ...' (and of 'locust-llm sim'), its env var "
        "and its default. An empty value means the default.",
        "",
    ]
    for title, flags in _flag_groups():
        lines.append(title)
        for flag in flags:
            lines.append(f"  {flag.name}  [env {flag.env_var or '-'}]  (default: {_default(flag)})")
            lines += textwrap.wrap(flag.help, width, initial_indent="      ", subsequent_indent="      ")
        lines.append("")
    return "\n".join(lines).rstrip()


FLAGS_MD_HEAD = """# Flags

Every flag of a run (`locust -f locustfile.py ...`) and of the simulator (`locust-llm sim`, or a run's
`--sim-args`). Each also reads its environment variable; an empty value means the default. A bad value stops the
run before it starts with one line, `locust-llm: error: ...`, naming the flag, the value and what is allowed
(exit 2). Locust's own flags work as usual.

This page is generated by `locust-llm flags --format markdown` from the flag table
(`locust_llm/config/flags.py`, `locust_llm/sim/command.py`); the test suite fails when it differs from what the
command prints, so edit the table, then run `locust-llm flags --format markdown > docs/flags.md`."""


def format_flags_markdown() -> str:
    """docs/flags.md: one table per group, in the order of :func:`format_flags`."""
    lines = [FLAGS_MD_HEAD]
    for title, flags in _flag_groups():
        lines += ["", f"## {title}", "", "| flag | env var | default | meaning |", "| --- | --- | --- | --- |"]
        for flag in flags:
            env = f"`{flag.env_var}`" if flag.env_var else "—"
            default = "switch" if flag.switch else (f"`{flag.default}`" if flag.default else "—")
            meaning = flag.help.replace("|", "\\|")
            lines.append(f"| `{flag.name}` | {env} | {default} | {meaning} |")
    return "\n".join(lines)


def cmd_trace_synth(args: argparse.Namespace) -> int:
    from locust_llm.workload.trace import synth

    for name, value, allowed in (
        ("--rate", args.rate, args.rate > 0),
        ("--minutes", args.minutes, args.minutes > 0),
        ("--cv", args.cv, args.cv >= 0),
        ("--prefix-share", args.prefix_share, 0 <= args.prefix_share <= 1),
    ):
        if not (allowed and math.isfinite(value)):
            need = "between 0 and 1" if name == "--prefix-share" else ">= 0" if name == "--cv" else "> 0"
            return _fail("trace synth", f"{name} must be a number {need}, got {value:g}")
    turns = None
    if args.sessions:
        low, _, high = args.turns.partition(":")
        try:
            turns = (int(low), int(high or low))
        except ValueError:
            turns = (0, 0)
        if not 1 <= turns[0] <= turns[1]:
            need = "N or LOW:HIGH whole numbers, 1 <= LOW <= HIGH"
            return _fail("trace synth", f"--turns must be {need}, got {args.turns}")
    if not (args.think_time_s >= 0 and math.isfinite(args.think_time_s)):
        return _fail("trace synth", f"--think-time-s must be a number >= 0, got {args.think_time_s:g}")
    for line in synth(args.rate, args.minutes, args.cv, args.prefix_share, args.seed, turns, args.think_time_s):
        print(json.dumps(line, separators=(",", ":")))
    return 0


def cmd_trace_stats(args: argparse.Namespace) -> int:
    from locust_llm.config.parsers import parse_rates
    from locust_llm.workload.trace import TraceError, load_trace
    from locust_llm.workload.trace_stats import format_trace_stats, trace_stats

    if args.block_tokens < 1:
        return _fail("trace stats", f"--block-tokens must be a whole number >= 1, got {args.block_tokens}")
    try:
        speeds = parse_rates(args.speeds, "--speeds")
        trace = load_trace(args.file, args.block_tokens)
    except (TraceError, ValueError) as exc:
        return _fail("trace stats", str(exc).removeprefix("--trace "))
    stats = trace_stats(trace, speeds)
    print(json.dumps(stats, indent=2) if args.format == "json" else format_trace_stats(stats))
    return 0


def cmd_flags(args: argparse.Namespace) -> int:
    print(format_flags_markdown() if args.format == "markdown" else format_flags())
    return 0


def _trend_doc() -> str | None:
    from locust_llm.reports import trend

    return trend.__doc__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="locust-llm", description=_plain(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"locust-llm {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    report = sub.add_parser(
        "report", help="Knees, SLA capacity and cost from a run's CSVs: report.html + summary.json."
    )
    report.add_argument(
        "prefix",
        nargs="+",
        help="The run's --csv prefix (e.g. runs/demo), or a path to its _llm_steps.csv. Several: shards run at once "
        "(one master each), merged exactly into one report (needs --out).",
    )
    report.add_argument("--out", default=None, help="Directory for report.html and summary.json (default: PREFIX).")
    report.add_argument("--baseline", default=None, help="Compare with this summary.json; exit 1 on regression.")
    add_arguments(report, REPORT_FLAGS + GATE_FLAGS, "SLA, prices and gate")
    report.set_defaults(func=cmd_report)

    compare = sub.add_parser(
        "compare",
        help="Regression gate between two summary.json files (exit 1 on regression); a --routes run against its "
        "primary alone: what the chain did.",
    )
    compare.add_argument("baseline", help="The baseline summary.json.")
    compare.add_argument("current", help="The summary.json of the run to judge.")
    add_arguments(compare, GATE_FLAGS, "gate thresholds")
    compare.set_defaults(func=cmd_compare)

    trend = sub.add_parser(
        "trend",
        help="Capacity over time from a history or kept reports; exit 1 on slow drift.",
        description=_plain(_trend_doc()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    trend.add_argument(
        "source",
        help="history.jsonl (one line per run), or a directory: every summary.json below it, ordered by start time.",
    )
    trend.add_argument(
        "--out",
        default=None,
        help="Directory for trend.html and trend.json (default: next to the history, or the directory).",
    )
    trend.add_argument(
        "--append",
        default=None,
        metavar="SUMMARY",
        help="First add this run's summary.json to the history.jsonl (created if missing).",
    )
    trend.add_argument("--window", type=int, default=14, help="Judge drift over the last N valid runs (default 14).")
    trend.add_argument(
        "--max-drift-pct",
        type=float,
        default=10.0,
        help="Exit 1 when a metric drifted the worse way by more than this over the window, consistently (default 10).",
    )
    trend.set_defaults(func=cmd_trend)

    sim = sub.add_parser(
        "sim",
        help="Run the simulated OpenAI-compatible LLM server.",
        description=_plain(sim_command.__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sim_command.add_arguments(sim)
    sim.set_defaults(func=sim_command.run)

    trace = sub.add_parser("trace", help="Traces to replay with --trace.")
    trace_sub = trace.add_subparsers(dest="trace_command", metavar="TRACE_COMMAND", required=True)
    synth = trace_sub.add_parser(
        "synth", help="Print a made-up trace (JSON Lines, Mooncake format): gaps, lengths and shared prefixes."
    )
    synth.add_argument(
        "--rate", type=float, default=4.0, help="Mean arrivals per second: requests, or sessions (default 4)."
    )
    synth.add_argument("--minutes", type=float, default=5.0, help="How long the trace runs, minutes (default 5).")
    synth.add_argument(
        "--cv", type=float, default=1.0, help="Burstiness: the gaps' coefficient of variation (1 Poisson; default 1)."
    )
    synth.add_argument(
        "--prefix-share",
        type=float,
        default=0.5,
        help="Share of requests starting with one of 8 shared 2-block prefixes (default 0.5).",
    )
    synth.add_argument("--seed", type=int, default=1, help="Random seed: the same seed, the same trace (default 1).")
    synth.add_argument(
        "--sessions",
        action="store_true",
        help="Make each arrival a session (session_id, delay): later turns follow the answer and carry the history.",
    )
    synth.add_argument(
        "--turns", default="2:6", help="With --sessions: turns per session, N or LOW:HIGH, uniform (default 2:6)."
    )
    synth.add_argument(
        "--think-time-s",
        type=float,
        default=5.0,
        help="With --sessions: mean think time before each later turn, seconds, exponential (default 5).",
    )
    synth.set_defaults(func=cmd_trace_synth)
    stats = trace_sub.add_parser(
        "stats",
        help="Print what a trace holds before you replay it: rate, burstiness, lengths, prefix reuse, duration.",
    )
    stats.add_argument("file", help="The trace: JSON Lines, as --trace reads it.")
    stats.add_argument(
        "--speeds", default="1", help="Replay speeds to give one pass's duration at, comma-separated (default 1)."
    )
    stats.add_argument(
        "--block-tokens", type=int, default=512, help="Tokens of each hash_ids block, as --trace-block-tokens (512)."
    )
    stats.add_argument("--format", choices=("text", "json"), default="text", help="text (default) or json.")
    stats.set_defaults(func=cmd_trace_stats)

    flags = sub.add_parser("flags", help="List every flag of a run, its env var and its default.")
    flags.add_argument(
        "--format",
        choices=("text", "markdown"),
        default="text",
        help="text (default) or markdown: the tables of docs/flags.md.",
    )
    flags.set_defaults(func=cmd_flags)
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
