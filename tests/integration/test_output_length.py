"""--output-length against simulators whose model stops early at a known share: exact asks for every token and gets
it, cap gets the simulator's own share, and auto asks the server once and picks the mode it honours.

The default simulator draws each output length uniformly in ``[max_tokens / 2, max_tokens]``: at ``--max-tokens 32``,
17 lengths from 16 to 32, a mean of 24 (the truth's ``mean_output_tokens``), a share of 0.75 of what was asked.
"""

import json
import math

import pytest

from tests.support.procs import ROOT, accepted, at_once, free_port, run_locust, sim

pytestmark = pytest.mark.slow  # end-to-end runs: deselected by -m 'not slow'

MAX_TOKENS = 32
STEP = ("--headless", "--steps", "4", "--step-duration", "4s", "--warmup", "1s", "--max-tokens", str(MAX_TOKENS))
SDK = ROOT / "locustfile_sdk.py"
REJECT = "--min-tokens reject"  # as OpenAI answers a field it does not know: HTTP 400


def run(out, *args, locustfile=None):
    out.mkdir()
    extra = {"locustfile": locustfile} if locustfile else {}
    proc = run_locust(*STEP, "--csv", str(out / "run"), *args, cwd=out, **extra)
    if proc.returncode == 2:
        return proc, None, None
    meta = json.loads((out / "run_llm_run.json").read_text())
    summary = json.loads((out / "run_llm_summary.json").read_text())
    return proc, meta, summary


def workers(out):
    """``--output-length auto`` resolved on the master, with 2 worker processes that must ask for it too."""
    port = str(free_port())
    with sim() as base:
        return run(
            out, "--processes", "2", "--master-bind-port", port, "--master-port", port, "--host", base, "--model",
            "sim-llm", "--stop-timeout", "10",
        )  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every run at once, each against its own simulator (4 users each)."""
    root = tmp_path_factory.mktemp("output_length")
    jobs = {
        "exact-sdk": lambda: run(root / "exact-sdk", "--output-length", "exact", locustfile=SDK),
        "cap": lambda: run(root / "cap", "--output-length", "cap"),
        "auto": lambda: run(root / "auto"),
        "auto-ignored": lambda: run(root / "auto-ignored", "--sim-args", "--min-tokens ignore"),
        "auto-refused": lambda: run(root / "auto-refused", "--sim-args", REJECT),
        "exact-refused": lambda: run(root / "exact-refused", "--output-length", "exact", "--sim-args", REJECT),
        "workers": lambda: workers(root / "workers"),
    }
    return at_once(jobs)


@pytest.mark.parametrize("name", ["exact-sdk", "auto", "workers"])
def test_exact_lengths_get_every_token_asked(runs, name):
    proc, meta, summary = runs[name]
    assert accepted(proc.returncode, proc.stdout), proc.stdout[-3000:] + proc.stderr[-3000:]
    assert meta["output_length"]["exact"] == {"sim-llm": True}, meta["output_length"]
    (row,) = summary["steps"]
    assert row["output_tokens_asked"] == MAX_TOKENS * row["ok"] > 0
    assert row["output_tokens_got"] == row["output_tokens_asked"] and row["output_tokens_ratio"] == 1.0
    assert summary["output_length"]["short_steps"] == [] and "stopped early" not in proc.stdout
    if name == "auto":
        assert "honours min_tokens: output lengths are exact" in proc.stderr
    if name != "workers":  # the embedded simulator's truth is of the load offered: every request its max_tokens
        assert meta["simulator"]["workload"]["mean_output_tokens"] == MAX_TOKENS


@pytest.mark.parametrize("name", ["cap", "auto-ignored", "auto-refused"])
def test_capped_lengths_get_the_models_own_share_and_say_so(runs, name):
    proc, meta, summary = runs[name]
    assert accepted(proc.returncode, proc.stdout), proc.stdout[-3000:] + proc.stderr[-3000:]
    assert meta["output_length"]["exact"] == {"sim-llm": False}, meta["output_length"]
    (row,) = summary["steps"]
    truth = meta["simulator"]["workload"]["mean_output_tokens"] / MAX_TOKENS
    assert truth == 0.75
    # each length is uniform on the 17 integers 16..32 (sd 4.90 tokens): the mean share of n requests has a standard
    # error of 4.90 / 32 / sqrt(n); 4 of them is a 1-in-15,000 miss
    n = row["ok"]
    assert abs(row["output_tokens_ratio"] - truth) <= 4 * math.sqrt((17**2 - 1) / 12) / MAX_TOKENS / math.sqrt(n), row
    assert row["output_tokens_asked"] == MAX_TOKENS * n and row["errors"] == 0
    assert [s["step"] for s in summary["output_length"]["short_steps"]] == [row["step"]]
    assert "output lengths: the server stopped early, under 90% of the tokens asked at 4 users" in proc.stdout
    warning = {
        "cap": None,
        "auto-ignored": "does not honour min_tokens/ignore_eos (it stopped at",
        "auto-refused": "does not honour min_tokens/ignore_eos (it refused the request (HTTP 400",
    }[name]
    if warning is None:
        assert "honour min_tokens" not in proc.stderr
    else:
        (said,) = [line for line in proc.stderr.splitlines() if warning in line]
        assert name != "auto-refused" or "Unrecognized request argument supplied: min_tokens" in said


def test_exact_lengths_a_server_refuses_stop_the_run_with_its_words(runs):
    proc, _, _ = runs["exact-refused"]
    errors = [line for line in proc.stderr.splitlines() if "locust-llm: error:" in line]
    assert proc.returncode == 2 and len(errors) == 1, proc.stderr[-3000:]
    assert "Unrecognized request argument supplied: min_tokens" in errors[0]
