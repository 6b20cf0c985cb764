"""Traces: Mooncake lines read or refused line by line, replayed at a speed, split across processes, and prompts
built block by block whose shared leading blocks are the same bytes."""

import itertools
import json
import statistics

import pytest

from locust_llm.protocol.tokens import estimate_prompt_tokens
from locust_llm.workload.trace import Trace, TraceEntry, TraceError, load_trace, synth


def write(tmp_path, *lines):
    path = tmp_path / "trace.jsonl"
    path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
    return path


def test_the_mooncake_format_is_read_as_it_is(tmp_path):
    path = write(
        tmp_path,
        {"timestamp": 0, "input_length": 6755, "output_length": 500, "hash_ids": [46, 47, 48]},
        {"timestamp": 27, "input_length": 100, "output_length": 3},
        "",
        {"timestamp": 27, "text_input": "hello", "model": "m2"},
        {"timestamp": 40, "messages": [{"role": "user", "content": "hi"}]},
    )
    trace = load_trace(path)
    assert [e.t_s for e in trace.entries] == [0.0, 0.027, 0.027, 0.04]
    assert trace.entries[0] == TraceEntry(0.0, 6755, None, 500, (46, 47, 48), None)
    assert trace.entries[2].messages == ({"role": "user", "content": "hello"},) and trace.entries[2].model == "m2"
    assert trace.messages(3) == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "trace.jsonl:2: not a JSON object"),
        ({"input_length": 5}, "trace.jsonl:2: timestamp must be a number of ms >= 0, got None"),
        ({"timestamp": -1, "input_length": 5}, "trace.jsonl:2: timestamp must be a number of ms >= 0, got -1"),
        ({"timestamp": 5}, "trace.jsonl:2: needs input_length, text_input or messages (none given)"),
        ({"timestamp": 5, "input_length": -3}, "trace.jsonl:2: input_length must be a whole number of tokens >= 1"),
        ({"timestamp": 5, "input_length": 9, "output_length": 0}, "trace.jsonl:2: output_length must be a whole"),
        ({"timestamp": 5, "input_length": 9, "hash_ids": "ab"}, "trace.jsonl:2: hash_ids must be a list of whole"),
        ({"timestamp": 5, "messages": [{"content": "x"}]}, "trace.jsonl:2: messages must be a non-empty list"),
        ({"timestamp": 0.5, "input_length": 9}, "trace.jsonl:2: timestamp goes backwards (0.5 ms after 10 ms)"),
    ],
)
def test_a_line_that_cannot_be_used_is_named_with_its_field(tmp_path, line, message):
    path = write(tmp_path, {"timestamp": 10, "input_length": 9}, line)
    with pytest.raises(TraceError) as caught:
        load_trace(path)
    assert message in str(caught.value) and str(path) in str(caught.value) and "\n" not in str(caught.value)


def test_an_empty_or_missing_file_is_refused(tmp_path):
    with pytest.raises(TraceError, match="holds no request"):
        load_trace(write(tmp_path, ""))
    with pytest.raises(TraceError, match="cannot be read"):
        load_trace(tmp_path / "absent.jsonl")


def constant(n, rate):
    return Trace("c", tuple(TraceEntry(i / rate, 64) for i in range(n)))


def test_a_constant_trace_has_its_rate_and_repeats_after_one_mean_gap():
    trace = constant(10, 4.0)
    assert trace.period_s == pytest.approx(2.5) and trace.rate_req_s == pytest.approx(4.0)


def test_a_speed_divides_the_times_and_a_short_trace_wraps_around():
    trace = constant(4, 2.0)  # 0, 0.5, 1, 1.5 s; a 2 s period
    assert [(round(t, 6), i, wrap) for t, i, wrap in trace.schedule(2.0, duration_s=2.0)] == [
        (0.0, 0, 0), (0.25, 1, 0), (0.5, 2, 0), (0.75, 3, 0), (1.0, 0, 1), (1.25, 1, 1), (1.5, 2, 1), (1.75, 3, 1)
    ]  # fmt: skip
    offset = list(trace.schedule(1.0, offset_s=1.0, duration_s=2.0))
    assert [(round(t, 6), i, wrap) for t, i, wrap in offset] == [(0.0, 2, 0), (0.5, 3, 0), (1.0, 0, 1), (1.5, 1, 1)]
    assert "wraps around" in trace.describe((1, 4), 1.0) and "speed 4" in trace.describe((1, 4), 1.0)


def test_processes_split_the_entries_so_that_each_is_sent_once_per_pass():
    trace = constant(7, 1.0)
    parts = [list(trace.schedule(1.0, index, 3, duration_s=14.0)) for index in range(3)]
    sent = sorted(i for part in parts for _, i, _ in part)
    assert sent == sorted(list(range(7)) * 2)
    assert list(trace.schedule(1.0, 9, 10, duration_s=5.0)) == []  # more processes than entries: nothing, no hang


def test_prompts_from_hash_ids_share_their_leading_blocks_byte_for_byte_and_have_their_length():
    trace = Trace(
        "h",
        (
            TraceEntry(0.0, 200, hash_ids=(7, 8, 9)),
            TraceEntry(1.0, 150, hash_ids=(7, 8, 10)),
            TraceEntry(2.0, 150, hash_ids=(11, 8, 10)),
            TraceEntry(3.0, 30),
        ),
        block_tokens=64,
    )
    prompts = [trace.messages(i) for i in range(4)]
    assert [estimate_prompt_tokens(p) for p in prompts] == [200, 150, 150, 30]
    assert prompts[0][:2] == prompts[1][:2] and prompts[0][2] != prompts[1][2]  # 7, 8 shared; then their own
    assert prompts[2][0] != prompts[0][0]  # another first block: nothing shared, even though 8 follows
    assert trace.messages(1) == prompts[1]  # the same entry, the same bytes


def test_each_pass_over_a_trace_has_prefixes_of_its_own_and_shares_within_itself():
    """The salt rule (workload/trace.py): within a pass, shared hash_ids are the same bytes; in another pass (another
    step, or a wrap), each prompt's first bytes differ, so that no prefix of it is the same (a prefix cache chains
    each block to those before it) and the cache finds only the traffic's own reuse."""
    trace = Trace(
        "h",
        (
            TraceEntry(0.0, 200, hash_ids=(7, 8, 9)),
            TraceEntry(1.0, 150, hash_ids=(7, 8, 10)),
            TraceEntry(2.0, 30),
            TraceEntry(3.0, messages=({"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"})),
        ),
        block_tokens=64,
    )
    first, again, other = ([trace.messages(i, salt) for i in range(4)] for salt in ("1.0", "1.0", "2.0"))
    assert first == again and first[0][:2] == first[1][:2]  # one pass: its own bytes, the shared ids shared
    for a, b in zip(first, other, strict=True):
        assert a != b and a[0]["content"][:6] != b[0]["content"][:6]  # another pass: other first bytes
    assert [estimate_prompt_tokens(p) for p in other[:3]] == [200, 150, 30]  # the lengths the trace says
    assert other[3][1] == {"role": "user", "content": "hi"} and other[3][0]["content"].endswith("be brief")
    assert trace.messages(0) == trace.messages(0, "") != first[0]  # no salt (--trace-cache-across-steps)


def test_a_synthetic_trace_has_its_mean_rate_and_burstiness():
    for cv in (0.0, 1.0, 2.0):
        lines = list(synth(rate=5.0, minutes=20, cv=cv, prefix_share=0.5, seed=3))
        times = [line["timestamp"] / 1000 for line in lines]
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert len(lines) / (20 * 60) == pytest.approx(5.0, rel=0.1)
        assert statistics.pstdev(gaps) / statistics.mean(gaps) == pytest.approx(cv, abs=0.15)
        assert all(line["input_length"] + line["output_length"] <= 2048 for line in lines)
    assert list(synth(2, 1, 1, 0.5, seed=9)) == list(synth(2, 1, 1, 0.5, seed=9))


def test_sessions_are_read_as_conversations_whose_later_turns_follow_their_answers(tmp_path):
    """Entries sharing a ``session_id`` are one conversation: the first arrives at its timestamp, each later one
    ``delay`` ms after the answer before it (its timestamp, if any, is not a clock: it may go backwards)."""
    path = write(
        tmp_path,
        {"timestamp": 0, "input_length": 100, "session_id": "a"},
        {"timestamp": 500, "input_length": 50},
        {"session_id": "a", "delay": 2000, "input_length": 40},
        {"timestamp": 1000, "input_length": 60, "session_id": 7},
        {"timestamp": 10, "session_id": "a", "delay": 0, "input_length": 30},
        {"session_id": 7, "delay": 1500.5, "input_length": 20},
    )
    trace = load_trace(path)
    assert trace.turns == {0: (2, 4), 3: (5,)} and trace.starts == (0, 1, 3) and trace.sessions
    assert [trace.entries[i].delay_s for i in (2, 4, 5)] == [2.0, 0.0, 1.5005]
    assert trace.entries[3].session == "7"
    # arrivals only set the period (3 over 1 s: 1.5 s) and the schedule; the rate counts every turn
    assert trace.period_s == 1.5 and trace.rate_req_s == 6 / 1.5
    assert [(t, i) for t, i, _ in itertools.islice(trace.schedule(1.0), 4)] == [(0.0, 0), (0.5, 1), (1.0, 3), (1.5, 0)]
    # processes split the arrivals: a session, with all its turns, goes to one
    assert [i for _, i, _ in itertools.islice(trace.schedule(1.0, 1, 2), 3)] == [1, 1, 1]
    assert [i for _, i, _ in itertools.islice(trace.schedule(1.0, 0, 2), 4)] == [0, 3, 0, 3]
    assert not load_trace(write(tmp_path, {"timestamp": 0, "input_length": 5})).sessions


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"timestamp": 1, "input_length": 5, "session_id": ""}, "session_id must be a string or a whole number"),
        ({"timestamp": 1, "input_length": 5, "session_id": True}, "session_id must be a string or a whole number"),
        ({"session_id": "s", "delay": -1, "input_length": 5}, "delay must be a number of ms >= 0, got -1"),
        ({"session_id": "new", "input_length": 5}, "timestamp must be a number of ms >= 0, got None"),
    ],
)
def test_a_session_field_that_cannot_be_used_is_named(tmp_path, line, message):
    path = write(tmp_path, {"timestamp": 0, "input_length": 5, "session_id": "s"}, line)
    with pytest.raises(TraceError, match=message):
        load_trace(path)


def test_a_synthetic_session_trace_has_its_turns_and_think_times(tmp_path):
    lines = list(synth(2.0, 10.0, 1.0, 0.5, seed=3, turns=(2, 4), think_s=3.0))
    path = write(tmp_path, *lines)
    trace = load_trace(path)
    counts = [1 + len(rest) for rest in trace.turns.values()]
    delays = [trace.entries[i].delay_s for rest in trace.turns.values() for i in rest]
    assert len(trace.starts) == len(trace.turns) > 1000 and set(counts) == {2, 3, 4}
    assert statistics.fmean(counts) == pytest.approx(3.0, abs=0.1)  # uniform on 2..4: sd 0.82, n > 1,000
    assert statistics.fmean(delays) == pytest.approx(3.0, rel=0.06)  # exponential: sd 3 s, n > 2,000
    assert trace.rate_req_s == pytest.approx(2.0 * statistics.fmean(counts), rel=0.06)
