"""Batched ITL logging equals Locust's per-event logging, field for field, on a real Locust runner.

Locust monkey-patches the interpreter on import, so the comparison runs in its own process
(tests/support/locust_batch_probe.py).
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = Path(__file__).resolve().parents[2] / "support" / "locust_batch_probe.py"


@pytest.mark.slow  # a few seconds of subprocesses: the full suite only, out of the -m "not slow" loop
def test_batched_and_deferred_logging_equal_one_event_each_and_only_when_the_runner_alone_listens():
    out = subprocess.run([sys.executable, str(PROBE), "200"], capture_output=True, text=True, timeout=120, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {
        "equal": True,
        "equal_with_rounding_replaced": True,
        "equal_with_a_gap_dropped": False,  # the comparison sees a difference of one gap
        "one_equal": True,
        "one_equal_with_errors_dropped": False,  # and a missing error
        "rows_equal": True,  # batches of requests dated in runs of seconds: field for field
        "rows_equal_with_a_length_off": False,
        # a row dated before the last request (the wall clock stepped back) counts in its own second, takes no cached
        # second and does not move the last request's time back (rows logged by others later are not undone)
        "rows_dated_back": {
            "last": 2_000_010.9,
            "cached_again": False,
            "per_second": [[2_000_008, 2], [2_000_010, 3]],
            "requests": 5,
        },
        "recorder": [True, [["E2E", 2], ["ITL", 58], ["TTFT", 2]]],  # the same stats; a plugin sees every event
        # rows that waited, logged at test_stop, equal rows logged at once, to the second and the cached seconds;
        # 5 of the 80 waited at the end; one waits, a report logs it; one waits, a reset drops it; one waits until
        # its timer is due (not at once: a libev timer started again keeps its old due time), then is logged
        "deferred": {"equal": True, "logged_before_stop": 75, "results": 80, "rows": [0, 1, 0, 0, 1]},
        # 300 successful requests of 2, 300 and 8,192 tokens: batches of 128, 28 and 1, the rest at test_stop (44,
        # 20, none waiting), every one logged
        "deferred_bounds": {
            "limits": [128, 8192],
            "2": [[128], 44, 300],
            "300": [[28], 20, 300],
            "8192": [[1], 0, 300],
        },
        # a batch's ITL gaps taken at once (the recorder's flush): the same doubles as (b - a) / 1e6 one by one,
        # which differences of times in ms are not; a time beyond int64: lists, the same doubles
        "gaps": {"equal": True, "equal_to_differences_of_ms": False, "arrays": True, "wide_equal_as_lists": True},
        "runner_alone": True,
        "with_a_plugin": False,
        "no_runner": False,
    }


FALLBACK = """
import logging, sys
import gevent
import locust.stats
from locust_llm.runtime.locust_stats import write_final_csvs

logging.basicConfig(stream=sys.stdout, format="%(message)s")


class Renamed(locust.stats.StatsCSVFileWriter):
    def __init__(self):  # a Locust whose writer keeps its files under other names: none of ours is there
        pass

    def stats_writer(self):
        gevent.sleep(30)


writer = Renamed()
greenlet = gevent.spawn(writer.stats_writer)
gevent.sleep(0)
write_final_csvs()
gevent.sleep(0)
print("writer running:", not greenlet.dead)
"""


def test_a_changed_csv_writer_is_left_to_write_its_own_files_with_one_line():
    out = subprocess.run([sys.executable, "-c", FALLBACK], capture_output=True, text=True, timeout=60, check=True)
    lines = out.stdout.strip().splitlines()
    assert lines[-1] == "writer running: True", out.stdout + out.stderr  # not stopped: its periodic write goes on
    assert len(lines) == 2 and "Locust's CSV writer has changed (requests_csv_filehandle," in lines[0], lines
