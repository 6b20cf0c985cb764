"""The heap is frozen for a test (plugin._freeze_heap) and unfrozen when it stops, or at quit.

Locust monkey-patches the interpreter on import, so the check runs in its own process (tests/support/heap_probe.py).
"""

import json
import subprocess
import sys
from pathlib import Path

PROBE = Path(__file__).resolve().parents[1] / "support" / "heap_probe.py"


def test_a_test_runs_with_the_start_up_heap_frozen_and_unfrozen_after_it():
    out = subprocess.run([sys.executable, str(PROBE)], capture_output=True, text=True, timeout=120, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {
        "before": [True, False],  # walked by collections, nothing frozen
        "during": [False, True, True],  # what existed at the start is frozen; what the test makes is not
        "after": [True, False],  # the end of the test unfreezes it
        "quit": [True, False],  # so does quitting, for a test that never stopped
        "freeze_after_config": True,  # the config built at the start is frozen too
    }
