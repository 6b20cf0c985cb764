"""bench/pair.py's pure parts: which versions it runs, what it refuses, and its summary line (the runs themselves
are a benchmark, never a timed test)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from pair import checkout, summary  # noqa: E402

IN_GIT = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True).returncode == 0


@pytest.mark.skipif(not IN_GIT, reason="this checkout is not a git work tree")
def test_a_directory_is_taken_as_it_is_and_a_revision_is_checked_out_then_removed(tmp_path):
    assert checkout(str(ROOT), tmp_path) == ROOT
    target = checkout("HEAD", tmp_path)
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
        assert (target / "locust_llm" / "__init__.py").is_file()
        here = subprocess.run(["git", "-C", str(target), "rev-parse", "HEAD"], capture_output=True, text=True)
        assert here.stdout == head.stdout
        assert checkout("HEAD", tmp_path) == target  # the same revision twice: one checkout
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(target)], check=True)


@pytest.mark.parametrize(
    ("spec", "says"),
    [("no-such-revision-xyz", "neither a directory nor a git revision"), ("docs", "without locust_llm/")],
)
def test_anything_else_is_refused_in_one_line_naming_it(spec, says, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(SystemExit) as stopped:
        checkout(spec, tmp_path)
    message = str(stopped.value)
    assert says in message and repr(spec) in message and "\n" not in message


def test_the_summary_gives_the_median_and_every_pair():
    assert summary([0.952, 0.942, 0.964, 0.946]) == "B / A = 0.949 [0.952, 0.942, 0.964, 0.946]"
    assert summary([1.018]) == "B / A = 1.018 [1.018]"
