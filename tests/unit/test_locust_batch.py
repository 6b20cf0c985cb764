"""Batched ITL logging equals Locust's per-event logging, field for field, on a real Locust runner.

Locust monkey-patches the interpreter on import, so the comparison runs in its own process
(tests/support/locust_batch_probe.py).
"""

import json
import subprocess
import sys
from pathlib import Path

PROBE = Path(__file__).resolve().parents[1] / "support" / "locust_batch_probe.py"


def test_batched_logging_equals_one_event_each_and_only_when_the_runner_alone_listens():
    out = subprocess.run([sys.executable, str(PROBE), "200"], capture_output=True, text=True, timeout=120, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {
        "equal": True,
        "equal_with_rounding_replaced": True,
        "equal_with_a_gap_dropped": False,  # the comparison sees a difference of one gap
        "one_equal": True,
        "one_equal_with_errors_dropped": False,  # and a missing error
        "recorder": [True, [["E2E", 2], ["ITL", 58], ["TTFT", 2]]],  # the same stats; a plugin sees every event
        "runner_alone": True,
        "with_a_plugin": False,
        "no_runner": False,
    }
