"""A short headless sweep against the embedded simulator, checked against the simulator's known TTFT/ITL."""

import itertools
import json

import pytest

from tests.support.light_runs import ITL_MS, MAX_TOKENS, TTFT_MS
from tests.support.procs import read_csv
from tests.support.truth import assert_pacing_truth

pytestmark = pytest.mark.slow  # end-to-end runs: deselected by -m 'not slow'


@pytest.fixture(scope="module")
def sweeps(light_runs):
    """The same sweep on the fast path and on the library path (``--fast-path off``, which also asks for Locust's
    periodic table: ``--locust-stats on``), and the README's plain two-step run with the defaults
    (tests/support/light_runs.py)."""
    return {"auto": light_runs["sweep-auto"], "off": light_runs["sweep-off"], "plain": light_runs["readme"]}


@pytest.fixture(scope="module", params=["auto", "off"])
def sweep(sweeps, request):
    return sweeps[request.param]


def logged(proc, needle):
    """The log lines holding ``needle``, their text after Locust's ``[time] host/LEVEL/logger:`` prefix."""
    return [line.split(": ", 1)[1] for line in proc.stderr.splitlines() if needle in line]


@pytest.mark.parametrize("name", ["auto", "plain"])
def test_a_person_can_follow_the_run_step_by_step(sweeps, name):
    """A line at each step change (where, how long is left) and one with each step's result, equal to its row of
    the per-step CSV as format_done rounds it; no flood: Locust's periodic table is not printed (its final one is:
    two 'Aggregated' rows, the statistics and the percentiles), and no control characters outside a terminal."""
    from locust_llm.measure.rows import format_done

    proc, out = sweeps[name]
    rows = read_csv(out / "run_llm_steps.csv")
    total = len(rows)
    began = logged(proc, "locust-llm step ")
    for row in rows:
        step = int(row["step"])
        assert any(
            line.startswith(f"locust-llm step {step}/{total}: {row['users']} users, 5 s (warm-up") for line in began
        )
        assert f"locust-llm step {step}/{total} done: {format_done(row)}" in began, began
    assert "about 0:10 left" in "\n".join(began)  # the first of two 5 s steps
    assert (proc.stdout + proc.stderr).count("Aggregated") == 2
    assert not any(c in proc.stdout + proc.stderr for c in "\r\x1b")
    if name == "plain":
        # 59 lines when all goes well (the sim's models, the preflight and its output-length check, 4 step lines,
        # the tables and the summary), and a warning or two of a busy machine (the simulator falling behind): Locust's
        # periodic table, every 2 s of the 10 s run, would add 5 tables of 12 lines
        assert len((proc.stdout + proc.stderr).splitlines()) < 70, proc.stdout + proc.stderr


def test_locusts_periodic_table_is_printed_when_asked_for(sweeps):
    proc, _ = sweeps["off"]  # --locust-stats on: Locust prints its table every 2 s of the 15 s run
    assert (proc.stdout + proc.stderr).count("Aggregated") > 2 + 3


def test_both_paths_measure_the_same(sweeps):
    """Per step, the two paths' TTFT and ITL medians agree within the pacing truth's own allowance (each is within
    ``assert_pacing_truth``'s median bounds of the schedule, so they differ by at most the width of those bounds), and
    their counts agree within one request per user: a closed loop of ``users`` users against a server with fixed
    timing completes the same number of requests in the same window, but for the requests that straddle its edges."""
    rows = {path: read_csv(out / "run_llm_steps.csv") for path, (_, out) in sweeps.items()}
    for fast, library in zip(rows["auto"], rows["off"], strict=True):
        assert abs(float(fast["ttft_p50_ms"]) - float(library["ttft_p50_ms"])) <= 7, (fast, library)
        assert abs(float(fast["itl_p50_ms"]) - float(library["itl_p50_ms"])) <= 2.1, (fast, library)
        assert abs(int(fast["ok"]) - int(library["ok"])) <= int(fast["users"]), (fast, library)
        assert int(fast["errors"]) == int(library["errors"]) == 0


def test_run_finishes_cleanly(sweep):
    proc, _ = sweep
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert "started the embedded simulated LLM server at http://127.0.0.1:" in proc.stderr


def test_locust_csv_has_ttft_itl_and_e2e_rows(sweep):
    _, out = sweep
    rows = {(r["Type"], r["Name"]): r for r in read_csv(out / "run_stats.csv")}
    assert {("TTFT", "sim-llm"), ("ITL", "sim-llm"), ("E2E", "sim-llm")} <= set(rows)
    e2e, itl, ttft = rows[("E2E", "sim-llm")], rows[("ITL", "sim-llm")], rows[("TTFT", "sim-llm")]
    n = int(e2e["Request Count"])
    assert n > 10 and int(e2e["Failure Count"]) == 0
    # every request streamed MAX_TOKENS tokens: MAX_TOKENS - 1 gaps each, one TTFT each
    assert int(itl["Request Count"]) == n * (MAX_TOKENS - 1)
    assert int(ttft["Request Count"]) == n
    assert float(e2e["Average Content Size"]) == MAX_TOKENS


def test_per_step_numbers_match_the_simulator_truth(sweep):
    proc, out = sweep
    rows = read_csv(out / "run_llm_steps.csv")
    assert [int(r["users"]) for r in rows] == [2, 4, 8]
    for row in rows:
        assert_pacing_truth(row, TTFT_MS, ITL_MS, MAX_TOKENS)
        assert int(row["errors"]) == 0
        assert int(row["completion_tokens"]) == int(row["ok"]) * MAX_TOKENS
    assert "locust-llm per-step results" in proc.stdout
    assert "TTFT p99 ms" in proc.stdout


def test_each_step_lasts_the_step_duration_asked_for(sweep):
    """Locust ticks the shape once a second, and the steps' clock starts after the preflight: a boundary was seen up
    to a second late, and the first step's steady window was that much longer (StepShape: steps change on time).
    Allowed: a stall of the shared machine as the shape wakes, well under the second it was late by."""
    _, out = sweep
    rows = read_csv(out / "run_llm_steps.csv")
    for row in rows:
        asked = 5.0 - float(row["warmup_s"])
        assert asked - 0.05 <= float(row["duration_s"]) <= asked + 0.4, row
    starts = [float(r["start_s"]) - float(r["warmup_s"]) for r in rows]
    assert [round(b - a, 1) for a, b in itertools.pairwise(starts)] == [5.0, 5.0], starts


def test_notebook_api_reads_the_runs_csv_with_proper_dtypes(sweep):
    from locust_llm.reports import load_steps

    _, out = sweep
    steps = load_steps(out / "run")
    assert list(steps["users"]) == [2, 4, 8]
    assert str(steps["users"].dtype) == "Int64" and str(steps["requests"].dtype) == "Int64"
    assert steps["ttft_p50_ms"].dtype == "float64" and steps["output_tok_s"].dtype == "float64"
    assert str(steps["valid"].dtype) == "boolean" and bool(steps["valid"].all())
    assert str(steps["model"].dtype) == "string" and set(steps["model"]) == {"sim-llm"}
    assert steps["cost_usd"].isna().all()  # no prices: empty cells are NaN, not strings
    assert (steps["ttft_p50_ms"] > 0).all() and int(steps["requests"].sum()) > 10
    same = load_steps(out / "run_llm_steps.csv")
    assert same.equals(steps)


def test_hostile_metrics_endpoints_are_counted_and_disturb_nothing(sweeps):
    """The fast path's sweep scraped five hostile endpoints at once every second (tests/support/light_runs.py:
    a hang, a drip, garbage, 32 MiB of gauges, 500 and 200 in turn): its timings are the truth's
    (test_per_step_numbers_match_the_simulator_truth), each step counts the failed scrapes, the huge answer was cut
    with one warning, and what answered was written with its replica."""
    proc, out = sweeps["auto"]
    rows = read_csv(out / "run_llm_steps.csv")
    for row in rows:  # hang, drip, garbage and every other flap fail in each round (rounds of 1 s or more)
        assert int(row["server_scrapes"]) >= 1 and row["server_replicas"] in ("1", "2"), row
        assert int(row["server_scrape_failures"]) >= 3 * int(row["server_scrapes"]), row
    cut = logged(proc, "are over 2 MiB: the first 2 MiB read, the rest dropped")
    assert len(cut) == 1 and "/huge" in cut[0], cut
    samples = read_csv(out / "run_llm_server_metrics.csv")
    assert {s["name"] for s in samples} >= {"filler", "vllm:num_requests_running"}
    paths = {s["url"].rsplit("/", 1)[1] for s in samples}
    assert len({s["replica"] for s in samples}) == 1 and paths == {"huge", "flap"}


def test_the_target_is_the_simulators_own_fingerprint_read_at_the_start_and_the_end(sweeps):
    """The README's run against the default simulator: summary.json's target holds what the simulator serves of
    itself (its preset's model, context, slots and KV cache), each read, none guessed, and unchanged during the run."""
    from locust_llm import __version__
    from locust_llm.sim.presets import preset

    _, out = sweeps["plain"]
    spec = preset("default")[0]
    target = json.loads((out / "run_llm_summary.json").read_text())["target"]
    assert target["model"] == {"id": spec.name, "owned_by": "locust-llm-sim", "max_model_len": spec.context_tokens}
    assert target["llama_cpp"] == {
        "total_slots": spec.batch.max_batch,
        "model_path": spec.name,
        "build_info": f"locust-llm-sim {__version__}",
        "n_ctx": spec.context_tokens,
    }
    assert target["vllm"] == {
        "block_size": spec.batch.block_tokens,
        "num_gpu_blocks": spec.batch.kv_blocks,
        "enable_prefix_caching": "True",
        "cache_dtype": "auto",
    }
    assert target["replicas"] == 1 and target["server"].startswith("Python/") and target["changed_during_run"] == []
    assert set(target) == {"server", "model", "llama_cpp", "vllm", "replicas", "changed_during_run"}  # no TGI, SGLang
