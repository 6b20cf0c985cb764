"""`locust-llm trace stats` on traces whose figures are known by construction."""

import json
import subprocess
import sys

import pytest

from locust_llm.workload.trace import Trace, TraceEntry
from locust_llm.workload.trace_stats import format_trace_stats, prefix_reuse, trace_stats


def hashed(shared, n=16, block=64):
    """As the replay test's file: 224-token prompts of 3 blocks; shared, the first two one of two prefixes."""
    entries = []
    for i in range(n):
        ids = (2 * (i % 2), 2 * (i % 2) + 1, 1000 + i) if shared else (1000 + 3 * i, 1001 + 3 * i, 1002 + 3 * i)
        entries.append(TraceEntry(i / 10, 224, output_length=16, hash_ids=ids))
    return Trace("h", tuple(entries), block)


def test_the_prefix_reuse_is_what_an_unbounded_cache_serves_in_one_pass():
    # all but the first of each prefix find 2 blocks of 64 tokens: 14 x 128 of 16 x 224
    assert prefix_reuse(hashed(shared=True)) == pytest.approx(14 * 128 / (16 * 224))
    assert prefix_reuse(hashed(shared=False)) == 0
    # a chain counts only from its start: a request whose first id is new finds nothing, even with a known second
    trace = Trace("c", (TraceEntry(0, 128, hash_ids=(1, 2)), TraceEntry(1, 128, hash_ids=(3, 2))), 64)
    assert prefix_reuse(trace) == 0
    repeat = Trace("r", (TraceEntry(0, 100, hash_ids=(1, 2)), TraceEntry(1, 100, hash_ids=(1, 2))), 64)
    assert prefix_reuse(repeat) == pytest.approx(100 / 200)  # capped at the prompt's own length


def test_rate_burstiness_lengths_and_duration():
    even = Trace("e", tuple(TraceEntry(i / 4, 10 * (i + 1), output_length=i + 1) for i in range(100)))
    stats = trace_stats(even, (1, 2))
    assert stats["rate_req_s"] == pytest.approx(4) and stats["gap_cv"] == pytest.approx(0)
    assert stats["input_tokens"] == {"p50": 500, "p90": 900, "p99": 990, "max": 1000}
    assert stats["output_tokens"]["p50"] == 50 and stats["output_given"] == 100
    assert stats["duration_s"] == {"1": pytest.approx(25), "2": pytest.approx(12.5)}
    text = format_trace_stats(stats)
    assert "0.00 (even)" in text and "one pass lasts 12.5 s" in text and "4 req/s" in text


def test_sessions_their_turns_and_think_times_and_gaps_between_arrivals_only():
    """Two sessions 1 s apart (3 turns with think times of 2 and 4 s; 2 turns, 1 s) and one request 1 s later: the
    gaps are between the three arrivals (even), and later turns are no arrivals."""
    entries = (
        TraceEntry(0.0, 10, session="a"),
        TraceEntry(0.0, 10, session="a", delay_s=2.0),
        TraceEntry(0.0, 10, session="a", delay_s=4.0),
        TraceEntry(1.0, 10, session="b"),
        TraceEntry(0.0, 10, session="b", delay_s=1.0),
        TraceEntry(2.0, 10),
    )
    stats = trace_stats(Trace("s", entries))
    assert stats["sessions"] == 2 and stats["gap_cv"] == pytest.approx(0) and stats["requests"] == 6
    assert stats["turns_per_session"] == {"p50": 2, "p90": 3, "p99": 3, "max": 3}
    assert stats["delay_ms"] == {"p50": 2000, "p90": 4000, "p99": 4000, "max": 4000}
    assert "sessions          2: turns p50 2, p90 3" in format_trace_stats(stats)
    assert trace_stats(Trace("e", entries[-1:]))["sessions"] == 0


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "locust_llm.cli", "trace", "stats", *args], capture_output=True, text=True, timeout=60
    )


def test_the_command_prints_json_or_one_line_errors(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps({"timestamp": 250 * i, "input_length": 64}) + "\n" for i in range(8)))
    out = cli(str(path), "--format", "json", "--speeds", "1,4")
    assert out.returncode == 0 and json.loads(out.stdout)["duration_s"] == {"1": 2.0, "4": 0.5}
    assert "0 of 8 give output_length" in cli(str(path)).stdout
    for args, message in (
        ((str(tmp_path / "absent.jsonl"),), "cannot be read"),
        ((str(path), "--speeds", "2,1"), "--speeds must be strictly increasing, got 2,1"),
        ((str(path), "--block-tokens", "0"), "--block-tokens must be a whole number >= 1, got 0"),
    ):
        proc = cli(*args)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr
