"""The nightly gate on real simulator runs: a third of the KV cache gone is a regression; the same simulator twice
is not."""

import json
import subprocess
import sys
from functools import partial

import pytest

from tests.support.procs import at_once, run_locust

pytestmark = pytest.mark.slow  # end-to-end runs: deselected by -m 'not slow'

SWEEP = ("--headless", "--steps", "8,16,32,64", "--step-duration", "8s", "--max-tokens", "64")


def sweep(path, sim_args=""):
    """One run of the sweep in ``path`` (made if missing); its summary.json."""
    path.mkdir(parents=True, exist_ok=True)
    proc = run_locust(*SWEEP, f"--sim-args={sim_args}", "--csv", str(path / "run"), cwd=path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return path / "run_llm_summary.json"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The three sweeps at once (``at_once``: a third of the time of one after another)."""
    configs = {"baseline": "", "same": "", "kv_cut": "--kv-blocks 120"}
    return at_once({name: partial(sweep, tmp_path_factory.mktemp(name), args) for name, args in configs.items()})


# Two runs of one simulator on a shared 2-core CI machine (pytest, the simulator and Locust on two cores) differ by
# that machine's stalls: CI saw ITL p99 rise 16.2 -> 20.0 ms (+23 %) at 16 users and 20.4 -> 25.8 ms at the knee
# step, where the default minimum rise (2 ms) suits a quiet machine. The simulator is itself up to ~7 ms late at p99
# on such a machine (README, "Generator cost"), so the same-simulator pair is judged with that as the minimum.
MACHINE_ITL_NOISE = ("--min-itl-rise-ms", "8")


def compare(baseline, current, *thresholds):
    return subprocess.run(
        [sys.executable, "-m", "locust_llm.cli", "compare", str(baseline), str(current), *thresholds],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_third_of_the_kv_cache_gone_is_a_regression(runs):
    proc = compare(runs["baseline"], runs["kv_cut"], *MACHINE_ITL_NOISE)  # caught by throughput, whatever the noise
    assert proc.returncode == 1, proc.stdout
    regressions = [line for line in proc.stdout.splitlines() if "REGRESSION" in line and "verdict" not in line]
    assert any("peak_output_tok_s" in line for line in regressions), proc.stdout
    base, cut = (json.loads(runs[k].read_text()) for k in ("baseline", "kv_cut"))
    peak = [max(s["output_tok_s"] for s in summary["steps"]) for summary in (base, cut)]
    assert peak[1] < 0.9 * peak[0]  # what the simulator's truth says: its plateau falls with its cache
    assert cut["run"]["simulator"]["saturation_users"] < base["run"]["simulator"]["saturation_users"]


def test_the_same_simulator_twice_is_no_regression(runs):
    """The same configuration is not flagged, in one comparison (no run is made again): a TTFT p99 of an 8-second
    step's few hundred requests, which one stall of this machine sets, is reported and its p90 judged (the gate's
    TAIL_SAMPLES rule); the ITL minimum is the simulator's own lateness on such a machine (MACHINE_ITL_NOISE)."""
    proc = compare(runs["baseline"], runs["same"], *MACHINE_ITL_NOISE)
    assert proc.returncode == 0, proc.stdout
    assert "verdict: no regression" in proc.stdout
