"""Locust's pause between two tasks is skipped when the task waited on the event loop, and is a real ``sleep(0)``
when it did not, through Locust's own task loop (``LLMUserMixin._pause``).

Locust monkey-patches the interpreter on import, so the users run in their own process (tests/support/pause_probe.py).
"""

import json
import subprocess
import sys
from pathlib import Path

PROBE = Path(__file__).resolve().parents[2] / "support" / "pause_probe.py"


def test_a_pause_after_a_task_that_waited_is_skipped_and_one_after_a_task_that_never_yielded_sleeps():
    out = subprocess.run([sys.executable, str(PROBE)], capture_output=True, text=True, timeout=120, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    # a task that waited on the loop: none of the 49 pauses between its 50 tasks sleeps, and the others ran in its waits
    assert got["Waits"] == {"tasks": 50, "pauses_slept": 0, "others_ran_between": 49, "ended": True}
    # a task that never yields: every pause is Locust's sleep(0), so another greenlet runs between every two tasks
    assert got["NeverYields"] == {"tasks": 50, "pauses_slept": 49, "others_ran_between": 49, "ended": True}
    # a graceful stop while the third task runs ends the user at the pause after it
    assert got["StopsItself"] == {"tasks": 3, "pauses_slept": 0, "others_ran_between": 2, "ended": True}
