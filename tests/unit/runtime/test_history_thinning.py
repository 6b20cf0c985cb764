"""Locust's chart history stays bounded over a night: the newest stretch as it was, older stretches thinned, the
first entry and the time order kept.

Locust monkey-patches the interpreter on import, so the check runs in its own process."""

import subprocess
import sys

CHECK = """
import locust
from locust.stats import RequestStats
from locust.util.date import format_utc_timestamp
from locust_llm.runtime.locust_stats import HISTORY_KEEP, thin_history

stats = RequestStats()
start, night = 1_790_000_000, 8 * 3600 // 5  # Locust appends one entry every 5 s
longest = 0
for i in range(night):
    stats.history.append({"time": format_utc_timestamp(start + 5 * i), "user_count": [i, 128]})
    if i % 12 == 11:  # the collector thins once a minute
        thin_history(stats)
    longest = max(longest, len(stats.history))
times = [entry["user_count"][0] * 5 for entry in stats.history]
assert longest <= HISTORY_KEEP + 12, longest
assert times[0] == 0 and times == sorted(set(times)), times[:5]
recent = HISTORY_KEEP // 2
assert times[-recent:] == [i * 5 for i in range(night - recent, night)]
gaps = [b - a for a, b in zip(times, times[1:])]
# the older seven hours in at most 720 entries: stretches of 40 s (5 * 2**3 would need 787), one entry each
assert max(gaps) < 2 * 40 and min(gaps[: -recent]) >= 40, (max(gaps), min(gaps[: -recent]))
print("ok", len(stats.history), max(gaps))
"""


def test_a_nights_chart_history_stays_under_its_bound_with_its_newest_stretch_whole_and_its_order_kept():
    """Eight hours of Locust's one-entry-per-5-s history, thinned once a minute as the collector does: never more than
    ``HISTORY_KEEP`` (plus the minute's 12 before a pass), the first entry and the newest ``HISTORY_KEEP // 2`` kept,
    times in order, and the older seven hours evenly (each gap from one stretch of 40 s to under two)."""
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("ok"), out.stderr[-3000:]
