"""bench/generator.py refuses bad arguments in one line naming what it got, before it starts a server (the runs
themselves are a benchmark, never a timed test)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "generator.py"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--seconds", "6"], "--seconds must be at least 10 (a 6 s warm-up, a window of at least 2 s and 2 s"),
        (["--seconds", "9.5"], "before the end), got 9.5"),
        (["--seconds", "nan"], "--seconds must be at least 10"),
        (["--streams", "128,x"], "--streams must be integers >= 1, comma-separated; got '128,x'"),
        (["--streams", "0"], "--streams must be integers >= 1, comma-separated; got '0'"),
        (["--max-tokens", "64,64"], "--max-tokens must be integers >= 2, comma-separated, none twice; got '64,64'"),
        (["--repeat", "0"], "--repeat must be an integer >= 1, got 0"),
    ],
)
def test_a_bad_argument_is_refused_in_one_line_naming_it(args, says):
    done = subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("generator.py: error: ") and says in last
    assert "Traceback" not in done.stderr and not done.stdout
