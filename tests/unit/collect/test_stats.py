from locust_llm.collect.stats import STEADY, WARMUP, StatsKey, StatsTable
from locust_llm.collect.timeline import Timeline
from locust_llm.metrics import Outcome, RequestResult

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
