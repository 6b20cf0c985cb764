"""Lint, format and type checks run with the suite, so CI enforces them."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(*cmd):
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("args", [["check", "."], ["format", "--check", "."]])
def test_ruff(args):
    proc = run(sys.executable, "-m", "ruff", *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy():
    proc = run(sys.executable, "-m", "mypy", "locust_llm")
    assert proc.returncode == 0, proc.stdout + proc.stderr
