"""The exit code of a run is a verdict: 0 a valid analysis, 1 a gate failed, 2 bad input, 3 an invalid measurement;
an explicit ``--exit-code-on-error`` replaces 0, 1 and 3 with Locust's own rule. Pure. Each code: docs/methodology.md,
"The exit code".
"""

from __future__ import annotations

from typing import Any

from locust_llm.reports.summary import knee_key

__all__ = ["EXIT_GATE", "EXIT_INPUT", "EXIT_INVALID", "EXIT_OK", "verdict"]

EXIT_OK = 0
EXIT_GATE = 1
EXIT_INPUT = 2
EXIT_INVALID = 3


def verdict(summary: dict[str, Any], gate_code: int = EXIT_OK) -> tuple[int, str]:
    """``(exit code, why)`` of a run with ``summary`` whose baseline gate (if any) gave ``gate_code`` (0 or 1)."""
    if not summary["valid"]:
        return EXIT_INVALID, "the measurement is invalid: " + "; ".join(summary["invalid_reasons"])
    if gate_code == EXIT_GATE:
        return EXIT_GATE, "a regression against the baseline"
    sla = summary.get("sla") or {}
    if sla.get("described") and summary["knee"].get(knee_key(summary, "sla_max_users")) is None:
        noun = "rate" if summary.get("mode") == "rate" else "concurrency"
        return EXIT_GATE, f"no tested {noun} meets the SLA ({sla['described']})"
    return EXIT_OK, "a valid sweep"
