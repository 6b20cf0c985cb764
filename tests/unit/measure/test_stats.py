from locust_llm.measure.stats import STEADY, WARMUP, StatsKey, StatsTable
from locust_llm.measure.timeline import Timeline
from locust_llm.protocol.metrics import Outcome, RequestResult

MS = 1_000_000


def timeline():
    t = Timeline()
    t.begin(1, 8, 0, warmup_ns=100 * MS)
    t.begin(2, 16, 1_000 * MS, warmup_ns=100 * MS)
    return t


def req(sent, tokens, end, outcome=Outcome.OK, completion=None):
    return RequestResult(
        model="m",
        intended_ns=sent,
        sent_ns=sent,
        end_ns=end,
        outcome=outcome,
        token_ns=[t * MS for t in tokens],
        completion_tokens=len(tokens) if completion is None else completion,
        prompt_tokens=10,
    )


def test_measurements_are_filed_where_they_were_observed():
    table = StatsTable()
    # sent in step 1's warm-up, first token in step 1's steady window, tokens across the step change
    table.add(req(50 * MS, [500, 990, 1_050, 1_150], 1_200 * MS), timeline().locate)
    s1, w2, s2 = (
        table.get(StatsKey(1, "m", STEADY)),
        table.get(StatsKey(2, "m", WARMUP)),
        table.get(StatsKey(2, "m", STEADY)),
    )
    assert table.get(StatsKey(1, "m", WARMUP)).hist["lag"].count == 1
    assert s1.hist["ttft"].count == 1 and s1.hist["ttft"].max == 450 * MS
    assert s1.hist["itl"].count == 1  # 500 -> 990
    assert w2.hist["itl"].count == 1  # 990 -> 1050
    assert s2.hist["itl"].count == 1  # 1050 -> 1150
    assert s2.counts["requests"] == 1 and s2.counts["ok"] == 1 and s2.hist["e2e"].count == 1


def test_failures_count_by_status_class_without_latency():
    table = StatsTable()
    table.add(req(200 * MS, [], 300 * MS, Outcome.HTTP_429), timeline().locate)
    stats = table.get(StatsKey(1, "m", STEADY))
    assert stats.counts["requests"] == 1 and stats.counts["status_429"] == 1 and stats.counts["ok"] == 0
    assert stats.hist["e2e"].count == 0 and stats.hist["ttft"].count == 0


def test_merge_and_wire_round_trip_keep_everything():
    a, b = StatsTable(), StatsTable()
    a.add(req(200 * MS, [300, 320], 330 * MS), timeline().locate)
    b.add(req(250 * MS, [350, 380], 390 * MS), timeline().locate)
    merged = StatsTable().merge(a).merge(b)
    round_tripped = StatsTable.from_wire(merged.to_wire())
    key = StatsKey(1, "m", STEADY)
    assert round_tripped.get(key).hist == merged.get(key).hist
    assert round_tripped.get(key).counts == merged.get(key).counts
    assert merged.get(key).counts["requests"] == 2


def test_drain_returns_the_delta_and_starts_afresh():
    table = StatsTable()
    table.add(req(200 * MS, [300, 320], 330 * MS), timeline().locate)
    delta = table.drain()
    assert len(delta) > 0 and len(table) == 0


def test_scheduling_lag_is_measured_from_the_intended_start_and_added_to_ttft():
    table = StatsTable()
    late = req(300 * MS, [400], 450 * MS)
    late.intended_ns = 240 * MS  # ready at 240 ms, sent at 300 ms: 60 ms late
    table.add(late, timeline().locate)
    stats = table.get(StatsKey(1, "m", STEADY))
    assert stats.hist["lag"].max == 60 * MS
    assert stats.hist["ttft"].max == 100 * MS  # from the send
    assert stats.hist["ttft_lag"].max == 160 * MS  # what the user would have seen: from when it was ready


def test_client_latencies_count_from_the_client_requests_intended_start():
    table = StatsTable()
    final = req(500 * MS, [650, 700], 720 * MS)  # a retry, sent at 500 ms
    table.add_client("m", 200 * MS, final, timeline().locate, good=True)  # the client asked at 200 ms
    stats = table.get(StatsKey(1, "m", STEADY))
    assert stats.hist["client_ttft"].max == 450 * MS and stats.hist["client_e2e"].max == 520 * MS
    assert (stats.counts["client_requests"], stats.counts["client_ok"], stats.counts["client_good"]) == (1, 1, 1)


def conversation_turn(sent, first_token, end, turn, prompt, cached, answer=None):
    result = req(sent, [first_token, first_token + 10, end // MS], end)
    result.turn, result.prompt_tokens, result.cached_tokens = turn, prompt, cached
    result.answer_ns = (answer or first_token) * MS
    return result


def test_turns_answer_ttft_and_cache_counters_are_filed_and_survive_merge_and_wire():
    locate = timeline().locate
    one, two = StatsTable(), StatsTable()
    one.add(conversation_turn(200 * MS, 300, 400 * MS, 1, 40, 0), locate)
    one.add(conversation_turn(410 * MS, 450, 600 * MS, 2, 90, 60, answer=480), locate)
    two.add(conversation_turn(200 * MS, 320, 500 * MS, 2, 100, 60), locate)
    two.add(req(200 * MS, [260], 300 * MS), locate)  # a single request: no turn
    merged = StatsTable.from_wire(one.to_wire()).merge(StatsTable.from_wire(two.to_wire()))
    stats = merged.get(StatsKey(1, "m", STEADY))
    assert sorted(stats.turns) == [1, 2]
    second = stats.turns[2]
    assert second.requests == 2 and second.hist["prompt_tokens"].quantile(1.0) == 100
    assert second.hist["cached_prompt_tokens"].quantile(0.5) == 60
    assert second.hist["ttft"].max == 120 * MS and second.hist["e2e"].max == 300 * MS
    assert stats.counts["cached_prompt_tokens"] == 120 and stats.counts["prompt_tokens"] == 240
    assert stats.hist["answer_ttft"].count == 3 and stats.hist["answer_ttft"].max == 120 * MS  # the 4th had none
    assert merged.get(StatsKey(1, "m", STEADY)).turns[1].requests == 1


def test_counted_reasoning_chunks_are_marked_estimated():
    result = req(0, [1, 2, 3], 4 * MS)
    result.reasoning_chunks = 2
    result.completion_tokens = 0
    result.fill_token_counts(7)
    assert (result.reasoning_tokens, result.reasoning_estimated, result.completion_tokens) == (2, True, 3)
    reported = req(0, [1, 2, 3], 4 * MS)
    reported.reasoning_chunks, reported.reasoning_tokens = 2, 5  # the server's usage wins
    reported.fill_token_counts(7)
    assert (reported.reasoning_tokens, reported.reasoning_estimated) == (5, False)


def test_a_step_that_holds_only_a_counter_is_shipped_to_the_master():
    """An attempt cut by the stop (or a wait counted) in a phase with no request still reaches the master."""
    table = StatsTable()
    table.bump("interrupted", "m", 1, 5, lambda t_ns: (2, "drain"))
    shipped = StatsTable.from_wire(table.to_wire())
    assert [(key.phase, stats.counts["interrupted"]) for key, stats in shipped] == [("drain", 1)]


def test_a_long_steps_ttft_blocks_stay_bounded_and_a_short_steps_seconds_stay_apart():
    """Ten minutes of requests, one a second: 120 blocks (every 120th second together), each second's TTFT in one."""
    from locust_llm.measure.stats import MAX_BLOCKS

    table = StatsTable()
    for second in range(600):
        sent = second * 10**9
        table.add(req(sent, [second * 1000 + 50], sent + 10**8), lambda t: (1, STEADY))  # tokens in ms
    (stats,) = [s for _, s in table]
    assert len(stats.blocks) == MAX_BLOCKS == 120 and {h.count for h in stats.blocks.values()} == {5}
    short = StatsTable()
    for second in range(100):
        sent = second * 10**9
        short.add(req(sent, [second * 1000 + 50], sent + 10**8), lambda t: (1, STEADY))
    assert len(next(s for _, s in short).blocks) == 100
