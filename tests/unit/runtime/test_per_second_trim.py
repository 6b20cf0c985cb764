"""Locust's per-second counts are kept for the last minute only, and what Locust reads of them is unchanged.

Locust monkey-patches the interpreter on import, so the check runs in its own process."""

import subprocess
import sys

CHECK = """
import locust
from locust.stats import RequestStats
from locust_llm.runtime.locust_stats import PER_SECOND_KEEP_S, trim_per_second

stats = RequestStats()
start = 1_000_000
stats.total.start_time = start
entry = stats.get("E2E", "POST")
for second in range(start, start + 300):
    entry.num_reqs_per_sec[second] = stats.total.num_reqs_per_sec[second] = second % 7
    entry.num_fail_per_sec[second] = stats.total.num_fail_per_sec[second] = second % 3
stats.total.last_request_timestamp = start + 299.5
rates = (entry.current_rps, entry.current_fail_per_sec, stats.total.current_rps)
assert trim_per_second(stats, start + 300) == 4 * (300 - PER_SECOND_KEEP_S)
assert min(entry.num_reqs_per_sec) == min(stats.total.num_fail_per_sec) == start + 300 - PER_SECOND_KEEP_S
assert len(entry.num_fail_per_sec) == PER_SECOND_KEEP_S
assert (entry.current_rps, entry.current_fail_per_sec, stats.total.current_rps) == rates, rates
assert trim_per_second(stats, start + 300) == 0
print("ok")
"""


def test_only_the_last_minute_of_locusts_per_second_counts_is_kept_and_its_current_rates_are_unchanged():
    """300 s of counts, trimmed at the end: 4 x 240 go (the entry's and the total's requests and failures), the last
    ``PER_SECOND_KEEP_S`` stay, and ``current_rps`` / ``current_fail_per_sec`` (the last 12 s) are what they were."""
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]
