import json

import pytest

from locust_llm.reports import load_steps, load_summary
from locust_llm.reports.files import ReportInputError
from tests.unit.reports.test_load import row, write_steps


@pytest.fixture
def run_dir(tmp_path):
    write_steps(tmp_path / "run_llm_steps.csv", [row(1, 8, workers=""), row(2, 16, workers="2")])
    return tmp_path


def test_a_prefix_a_csv_path_and_a_directory_give_the_same_frame(run_dir):
    by_prefix = load_steps(run_dir / "run")
    assert by_prefix.equals(load_steps(run_dir / "run_llm_steps.csv")) and by_prefix.equals(load_steps(run_dir))
    assert list(by_prefix["users"]) == [8, 16]
    assert by_prefix["workers"].isna().tolist() == [True, False]  # nullable integers keep an empty cell empty


def test_a_report_directory_gives_the_steps_of_its_summary(tmp_path):
    steps = [{"step": 1, "users": 4, "model": "m", "valid": True, "ttft_p99_ms": 12.5}]
    (tmp_path / "summary.json").write_text(json.dumps({"schema": "locust-llm/summary", "steps": steps}))
    frame = load_steps(tmp_path)
    assert frame.loc[0, "users"] == 4 and frame.loc[0, "ttft_p99_ms"] == 12.5 and frame["requests"].isna().all()
    assert load_summary(tmp_path)["schema"] == "locust-llm/summary"
    assert load_summary(tmp_path / "summary.json") == load_summary(tmp_path)


def test_a_directory_with_several_runs_asks_for_one(run_dir):
    write_steps(run_dir / "other_llm_steps.csv", [row(1, 8)])
    with pytest.raises(ReportInputError, match="holds several runs"):
        load_steps(run_dir)


def test_nothing_there_is_a_one_line_error(tmp_path):
    with pytest.raises(ReportInputError, match="no run found in"):
        load_steps(tmp_path)
    with pytest.raises(ValueError, match="does not exist"):
        load_summary(tmp_path / "nope.json")
