"""The heap is frozen for a test (plugin._freeze_heap), and its youngest generation collected only after
gc_settings.STEADY_THRESHOLD objects, until it stops, or at quit (the rules: locust_llm/config/gc_settings.py).

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
    raised = got.pop("test_threshold")  # gc_settings.STEADY_THRESHOLD
    default = got.pop("threshold_before")  # the interpreter's own
    assert default < 20_000 < raised  # else the counts below prove nothing
    assert got == {
        "before": [True, False],  # walked by collections, nothing frozen
        "during": [False, True, True],  # what existed at the start is frozen; what the test makes is not
        "threshold_during": raised,
        "collections_keeping_20000_during": 0,  # a test's young objects are not walked every 700
        "after": [True, False],  # the end of the test unfreezes it
        "threshold_after": default,  # and puts the threshold back
        "collections_keeping_20000_after": got["collections_keeping_20000_after"],
        "quit": [True, False, default],  # so does quitting, for a test that never stopped
        "freeze_after_config": True,  # the config built at the start is frozen too
        # a threshold set by the user: none (0) and a higher one are kept; a lower one is raised for the test
        "user_thresholds": {"0": [0, 0, 0], "100": [100, raised, 100], "200000": [200_000] * 3},
    }
    assert got["collections_keeping_20000_after"] >= 20_000 // default  # outside a test: every `default` objects
