"""Runs shared by several modules of end-to-end tests."""

import pytest

from tests.support.light_runs import make_all


@pytest.fixture(scope="session")
def light_runs(tmp_path_factory):
    """The light runs of test_headless_run, test_report_run and test_report_browser, made at once
    (tests/support/light_runs.py)."""
    return make_all(tmp_path_factory)
