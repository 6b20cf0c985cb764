import csv
import re

import pytest

from locust_llm.measure.rows import COLUMNS
from locust_llm.reports.load import ReportInputError, load_run


def write_steps(path, rows, columns=COLUMNS):
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow(row)


def row(step, users, **kw):
    base = dict.fromkeys(COLUMNS, "")
    base.update(
        step=step,
        users=users,
        model="m",
        requests=10,
        ok=10,
        errors=0,
        ttft_p50_ms=20.5,
        ttft_p99_ms=30,
        itl_p99_ms=12,
        valid="True",
    )
    base.update(kw)
    return base


def test_reads_typed_values_from_the_per_step_csv(tmp_path):
    write_steps(tmp_path / "run_llm_steps.csv", [row(1, 8), row(2, 16, valid="False", invalid_reasons="cpu")])
    run = load_run(tmp_path / "run")
    assert run.source == "llm_steps" and not run.approximate and run.models == ["m"]
    assert run.steps[0]["users"] == 8 and run.steps[0]["ttft_p50_ms"] == 20.5 and run.steps[0]["e2e_p99_ms"] is None
    assert run.steps[1]["valid"] is False and run.steps[1]["invalid_reasons"] == "cpu"
    assert load_run(tmp_path / "run_llm_steps.csv").steps == run.steps  # the file path works as well


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "is empty (no header)"),
        ("step,users\n1,8\n", "missing columns model, requests"),
        (",".join(COLUMNS) + "\n", "has a header but no steps"),
        (",".join(COLUMNS) + "\n1,8,m,0\n", "line 2 has 4 fields, expected"),
    ],
)
def test_malformed_files_give_one_line_errors(tmp_path, content, message):
    (tmp_path / "run_llm_steps.csv").write_text(content)
    with pytest.raises(ReportInputError, match=re.escape(message)) as info:
        load_run(tmp_path / "run")
    assert "\n" not in str(info.value) and "run_llm_steps.csv" in str(info.value)


def test_bad_values_name_the_line_and_column(tmp_path):
    write_steps(tmp_path / "run_llm_steps.csv", [row(1, 8, ttft_p99_ms="fast")])
    with pytest.raises(ReportInputError, match="line 2, column ttft_p99_ms: expected a number, got 'fast'"):
        load_run(tmp_path / "run")


def test_no_run_at_all(tmp_path):
    with pytest.raises(ReportInputError, match="no run found"):
        load_run(tmp_path / "nothing")


HISTORY_HEADER = (
    "Timestamp,User Count,Type,Name,Requests/s,Failures/s,50%,66%,75%,80%,90%,95%,98%,99%,99.9%,"
    "99.99%,100%,Total Request Count,Total Failure Count,Total Median Response Time,"
    "Total Average Response Time,Total Min Response Time,Total Max Response Time,"
    "Total Average Content Size"
)


def history_line(t, users, kind, name, p50, p99, total, failures=0):
    return f"{t},{users},{kind},{name},1,0,{p50},0,0,0,{p50},0,0,{p99},0,0,0,{total},{failures},0,0,0,0,100"


def test_plain_locust_history_is_split_into_steps_by_user_count(tmp_path):
    lines = [HISTORY_HEADER]
    total = 0
    for t in range(0, 40):  # 20 s at 4 users (p50 100 ms), then 20 s at 8 users (p50 300 ms); 1 s ramp between
        users = 4 if t < 20 else (6 if t == 20 else 8)
        total += users
        p50 = 100 if users == 4 else 300
        lines.append(history_line(1_000 + t, users, "", "Aggregated", p50, 2 * p50, total))
    (tmp_path / "run_stats_history.csv").write_text("\n".join(lines) + "\n")
    run = load_run(tmp_path / "run")
    assert run.source == "locust_history" and run.approximate
    assert [s["users"] for s in run.steps] == [4, 8]
    assert run.steps[0]["e2e_p50_ms"] == 100 and run.steps[1]["e2e_p99_ms"] == 600
    assert run.steps[0]["ttft_p99_ms"] is None  # any locustfile: no TTFT
    first = run.steps[0]
    # a 19 s step: skip max(15 s, 30 %) but keep the last 30 %: 13.3 s
    assert first["req_s"] == pytest.approx(4.0) and first["warmup_s"] == pytest.approx(0.7 * 19)
    assert len(run.timeline) == 40 and run.timeline[-1]["users"] == 8
