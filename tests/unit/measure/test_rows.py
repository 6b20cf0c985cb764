import pytest

from locust_llm.measure.rows import COLUMNS, StepWindow, format_table, step_rows
from locust_llm.measure.sla import Prices
from locust_llm.measure.stats import StatsTable
from locust_llm.measure.timeline import Timeline
from locust_llm.protocol.metrics import Outcome, RequestResult

MS = 1_000_000


def table_with(results):
    t = Timeline()
    t.begin(1, 4, 0, 0)
    table = StatsTable()
    for r in results:
        table.add(r, t.locate)
    return table


def ok(sent_ms, ttft_ms, n=5, itl_ms=10):
    tokens = [(sent_ms + ttft_ms + i * itl_ms) * MS for i in range(n)]
    return RequestResult(
        "m", sent_ms * MS, sent_ms * MS, tokens[-1], token_ns=tokens, completion_tokens=n, prompt_tokens=20
    )


def test_row_values_follow_the_documented_formulas():
    results = [ok(0, 100), ok(10, 200), RequestResult("m", 0, 0, 50 * MS, outcome=Outcome.HTTP_429)]
    rows = step_rows(table_with(results), [StepWindow(1, 4, 0.0, 10.0, 0.0)], Prices(1.0, 2.0))
    assert len(rows) == 1
    row = rows[0]
    assert set(row) == set(COLUMNS)
    assert (row["requests"], row["ok"], row["errors"], row["status_429"]) == (3, 2, 1, 1)
    assert (row["prompt_tokens"], row["completion_tokens"]) == (40, 10)
    assert row["req_s"] == pytest.approx(0.3) and row["output_tok_s"] == pytest.approx(1.0)
    assert row["ttft_p50_ms"] == pytest.approx(100, rel=0.01) and row["ttft_p99_ms"] == pytest.approx(200, rel=0.01)
    assert row["itl_p50_ms"] == pytest.approx(10, rel=0.01)
    assert row["cost_usd"] == pytest.approx(40 * 1.0 / 1e6 + 10 * 2.0 / 1e6)
    assert row["valid"] is True


def test_no_prices_no_cost_and_invalid_windows_are_marked():
    rows = step_rows(table_with([ok(0, 100)]), [StepWindow(1, 4, 0.0, 10.0, 0.0, invalid_reasons=("cpu 95%",))])
    assert rows[0]["cost_usd"] is None
    assert rows[0]["valid"] is False and rows[0]["invalid_reasons"] == "cpu 95%"


def test_format_table_aligns_columns_and_shows_missing_values():
    rows = step_rows(
        table_with([RequestResult("m", 0, 0, 50 * MS, outcome=Outcome.TIMEOUT)]),
        [StepWindow(1, 4, 0.0, 10.0, 0.0)],
    )
    text = format_table(rows)
    header, line = text.splitlines()
    assert len(header) == len(line)
    assert "TTFT p99 ms" in header and " - " in line


def test_format_table_follows_a_p99_by_its_interval_only_when_it_is_wide():
    few = step_rows(table_with([ok(i, 100 + i) for i in range(20)]), [StepWindow(1, 4, 0.0, 10.0, 0.0)])
    # 20 samples: the p99's interval has no upper end (that takes hundreds), so the table shows it open
    assert few[0]["ttft_p99_ms_ci_high"] is None and "[" in format_table(few) and ", -]" in format_table(few)
    same = step_rows(table_with([ok(i, 100) for i in range(2000)]), [StepWindow(1, 4, 0.0, 10.0, 0.0)])
    assert "[" not in format_table(same)  # every sample alike: the interval is the value itself


def test_the_providers_caps_per_step_are_the_largest_limit_and_the_least_left():
    results = [ok(0, 100), ok(10, 100), ok(20, 100)]
    results[0].ratelimit = (48, 20, 2_000_000, 1_500_000)
    results[1].ratelimit = (48, 0, None, None)  # a head that states only the requests
    rows = step_rows(table_with(results), [StepWindow(1, 4, 0.0, 10.0, 0.0)])
    row = rows[0]
    assert (row["ratelimit_limit_requests"], row["ratelimit_remaining_requests_min"]) == (48, 0)
    assert (row["ratelimit_limit_tokens"], row["ratelimit_remaining_tokens_min"]) == (2_000_000, 1_500_000)
    assert (
        step_rows(table_with([ok(0, 100)]), [StepWindow(1, 4, 0.0, 10.0, 0.0)])[0]["ratelimit_limit_requests"] is None
    )


def test_output_tokens_asked_and_got_count_successful_requests_that_said_what_they_asked():
    """Two requests asked for 8 tokens and got 5 each; a failed one and one that did not say (0) are left out."""
    asked = [ok(0, 100), ok(10, 120)]
    for r in asked:
        r.max_tokens = 8
    failed = RequestResult("m", 0, 0, 50 * MS, outcome=Outcome.HTTP_429, max_tokens=8)
    (row,) = step_rows(table_with([*asked, failed, ok(20, 90)]), [StepWindow(1, 4, 0.0, 10.0, 0.0)])
    assert (row["output_tokens_asked"], row["output_tokens_got"], row["output_tokens_ratio"]) == (16, 10, 0.625)
    (none,) = step_rows(table_with([ok(0, 100)]), [StepWindow(1, 4, 0.0, 10.0, 0.0)])
    assert none["output_tokens_asked"] == 0 and none["output_tokens_ratio"] is None
