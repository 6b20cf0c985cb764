"""The loop watchdog's arithmetic on a scripted clock: on-time runs file 0, a late run files its lateness and each
tick it swallowed, so the percentiles are shares of time; and the validity rule that reads them."""

from locust_llm.measure.health import invalid_reasons
from locust_llm.measure.stats import StatsTable
from locust_llm.runtime.stall import TICK_S, LoopWatch

MS = 1_000_000
TICK = int(TICK_S * 1e9)


def watched(gaps_ns):
    """The samples a watch files when its timer runs after each of ``gaps_ns``."""
    now = [0]
    filed = []
    watch = LoopWatch(lambda at, late: filed.append(late), clock=lambda: now[0])
    watch._last_ns = 0
    for gap in gaps_ns:
        now[0] += gap
        watch.run()
    return filed


def test_on_time_runs_file_zero_and_a_stall_files_each_tick_it_swallowed():
    assert watched([TICK, TICK + MS // 2]) == [0, MS // 2]
    filed = watched([TICK + 35 * MS])  # the loop was held 35 ms past its tick: 3 more ticks were due meanwhile
    assert filed == [35 * MS, 25 * MS, 15 * MS, 5 * MS]


def table_with(stalls_ms, seconds=20):
    """A steady step of ``seconds`` on time but for ``stalls_ms`` (each once), as the watch files them."""
    gaps = [TICK] * int(seconds / TICK_S) + [TICK + ms * MS for ms in stalls_ms]
    table = StatsTable()
    for late in watched(gaps):
        table.add_stall(late, 10**9, lambda t: (1, "steady"))
    return table


def reasons(table):
    from locust_llm.measure.health import StepHealth

    return invalid_reasons(1, StepHealth(), table, max_cpu_pct=80, max_lag_ms=10)


def test_a_loop_held_a_third_of_every_second_makes_the_step_invalid_and_names_the_stall():
    """The issue's run: a scrape held the loop about 350 ms each second."""
    table = table_with([350] * 20)
    (reason,) = reasons(table)
    assert reason.startswith("generator loop stalled: p99 3") and "> 10 ms" in reason


def test_one_gc_pause_in_a_step_is_not_a_stall_of_its_figures():
    """One 100 ms pause in 20 s holds the loop 0.5 % of the time: under the p99."""
    assert reasons(table_with([100])) == []


def test_the_generator_row_is_no_model_row():
    table = table_with([350] * 5)
    ((key, stats),) = list(table)
    assert key.model == "" and stats.empty
