"""The loop watchdog's arithmetic on a scripted clock and scripted turns: a held turn files its time and each tick it
swallowed, the rest of the time files zeros, so the percentiles are shares of time; and the validity rule that reads
them."""

from locust_llm.http.loop import LoopTurn
from locust_llm.measure.health import StepHealth, invalid_reasons
from locust_llm.measure.stats import StatsTable
from locust_llm.runtime.stall import TICK_S, LoopWatch

MS = 1_000_000
TICK = int(TICK_S * 1e9)


def watched(seconds, held_ms):
    """The samples a watch files over ``seconds`` of time during which turns held the loop ``held_ms`` each."""
    now = [0]
    filed = []
    turn = LoopTurn(0, 0, 0, False, 0)
    watch = LoopWatch(lambda at, late: filed.append(late), clock=lambda: now[0])
    watch.start(turn)
    turn.stalls = [(i * MS, ms * MS) for i, ms in enumerate(held_ms)]
    now[0] = int(seconds * 1e9)
    watch.flush()
    return filed


def test_a_held_turn_files_each_tick_it_swallowed_and_the_rest_of_the_time_files_zeros():
    filed = watched(1.0, [35])  # held 35 ms: 4 ticks late by 35, 25, 15 and 5 ms; 96 ticks on time
    assert sorted(filed, reverse=True)[:5] == [35 * MS, 25 * MS, 15 * MS, 5 * MS, 0]
    assert len(filed) == 100 and filed.count(0) == 96
    assert watched(1.0, []) == [0] * 100  # nothing held: every tick on time


def table_with(seconds, held_ms):
    table = StatsTable()
    for late in watched(seconds, held_ms):
        table.add_stall(late, 10**9, lambda t: (1, "steady"))
    return table


def reasons(table):
    return invalid_reasons(1, StepHealth(), table, max_cpu_pct=80, max_lag_ms=10)


def test_a_loop_held_a_third_of_every_second_makes_the_step_invalid_and_names_the_stall():
    """The issue's run: a scrape held the loop about 350 ms each second, for 20 s."""
    (reason,) = reasons(table_with(20, [350] * 20))
    assert reason.startswith("generator loop stalled: p99 3") and "> 10 ms" in reason


def test_one_gc_pause_in_a_step_is_not_a_stall_of_its_figures():
    """One 100 ms pause in 20 s holds the loop 0.5 % of the time: under the p99."""
    assert reasons(table_with(20, [100])) == []


def test_the_generator_row_is_no_model_row():
    table = table_with(5, [350] * 5)
    ((key, stats),) = list(table)
    assert key.model == "" and stats.empty


def test_a_table_written_when_stalls_and_blocks_were_kept_at_10_bits_still_reads_and_is_judged_the_same():
    """Files from runs before the stalls' and the TTFT blocks' precision fell to 7 bits: their finer histograms are
    coarsened on the way in (exactly: buckets nest), so an old night's files re-render and gate as they did."""
    from locust_llm.measure.histogram import Histogram

    table = table_with(20, [350] * 20)
    wire = table.to_wire()
    for _, _, _, stats in wire:  # re-record the stalls as a 10-bit histogram, as the files used to hold them
        finer = Histogram(precision=10)
        for late in watched(20, [350] * 20):
            finer.record(late)
        stats["h"]["loop_stall"] = finer.to_wire()
        stats["b"] = [[3, finer.to_wire()]]
    read = StatsTable.from_wire(wire)
    ((_, stats),) = list(read)
    assert stats.hist["loop_stall"].precision == 7 and stats.hist["loop_stall"].count == 20 * 100
    assert stats.blocks[3].precision == 7 and stats.blocks[3].count == 20 * 100
    assert reasons(read) == reasons(table) != []
