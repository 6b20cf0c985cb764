"""Real master and worker processes on 127.0.0.1: nothing lost, nothing counted twice, lost workers flagged."""

import json
import signal
import subprocess
import sys
import urllib.request
from functools import partial
from pathlib import Path

import pytest

from locust_llm.measure import shards
from locust_llm.measure.histogram import Histogram
from locust_llm.measure.stats import STEADY, StatsKey
from tests.support.procs import (
    PREFLIGHT_REQUESTS,
    accepted,
    at_once,
    distributed_run,
    free_port,
    read_csv,
    run_locust,
    server,
    sim,
)
from tests.support.truth import assert_pacing_truth

pytestmark = pytest.mark.slow  # end-to-end runs: deselected by -m 'not slow'

TTFT_MS, ITL_MS, MAX_TOKENS = 100.0, 10.0, 32
SIM = ("--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS), "--capacity", "256")
SWEEP = (
    "--steps",
    "4,8",
    "--step-duration",
    "8s",
    "--warmup",
    "3s",
    "--max-tokens",
    str(MAX_TOKENS),
    "--stop-timeout",
    "20",
    "--model",
    "sim-llm",
)


def sim_stats(base):
    with urllib.request.urlopen(base.rsplit("/v1", 1)[0] + "/sim/stats", timeout=10) as resp:
        stats = json.load(resp)
    return {**stats["models"]["sim-llm"], "metrics_scrapes": stats["metrics_scrapes"]}


def by_step(rows):
    return {int(r["step"]): r for r in rows}


KILLED_SWEEP = (  # on the library path (--fast-path off): a lost worker is handled the same on both
    "--fast-path",
    "off",
    "--steps",
    "6,9,12",
    "--step-duration",
    "9s",
    "--warmup",
    "2s",
    "--max-tokens",
    str(MAX_TOKENS),
    "--model",
    "sim-llm",
)
"""Three steps: a worker is lost 2 s into the second (Locust notices within 3 s more), the third runs without it."""


def distributed(path, workers, sweep, kill_worker_at_step=None, signals=(), late=None):
    with sim(*SIM) as base:
        code, stdout, stderr = distributed_run(
            path,
            base,
            workers,
            sweep,
            kill_worker_at_step=kill_worker_at_step,
            signals=signals,
            late_worker_at_step=late,
        )
        return code, stdout, stderr, path, sim_stats(base)


def single(path):
    with sim(*SIM) as base:
        proc = run_locust("--headless", "--host", base, "--csv", str(path / "run"), *SWEEP, cwd=path)
        return proc.returncode, proc.stdout, proc.stderr, path, sim_stats(base)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each against its own simulator, in two groups of light loads (a few users each) that fit the cores: the same
    load on a master with 2 workers and on a single process, a held preflight and a run below --min-workers; then
    the runs whose workers are killed and frozen (a starved machine's workers go missing for real, 3 s without a
    heartbeat: the groups are kept small)."""
    first = at_once(
        {
            "distributed": partial(distributed, tmp_path_factory.mktemp("distributed"), 2, SWEEP),
            "single": partial(single, tmp_path_factory.mktemp("single")),
            "too-few": partial(distributed, tmp_path_factory.mktemp("too-few"), 2, TOO_FEW, 1),
            "held": partial(held, tmp_path_factory.mktemp("held")),
        }
    )
    second = at_once(
        {
            "killed": partial(distributed, tmp_path_factory.mktemp("killed"), 3, KILLED_SWEEP, 2),
            "frozen": partial(distributed, tmp_path_factory.mktemp("frozen"), 3, KILLED_SWEEP, signals=FROZEN),
            "late": partial(distributed, tmp_path_factory.mktemp("late"), 2, KILLED_SWEEP, late=1),
        }
    )
    return {**first, **second}


FROZEN = ((2, signal.SIGSTOP), (3, signal.SIGCONT))
"""The first worker frozen 2 s into the second step and thawed 2 s into the third: lost, then back."""
TOO_FEW = ("--min-workers", "2", *KILLED_SWEEP[:-6], "--max-tokens", str(MAX_TOKENS), "--model", "sim-llm")
"""Two workers, at least two required: one killed in the first step stops the run."""


def held(path):
    """A master and 2 workers against a server whose first answer (the preflight) is a 429 with Retry-After: 2."""
    sweep = ("--model", "m", "--steps", "2", "--step-duration", "4s", "--min-step-requests", "1")
    with server(sys.executable, "-m", "tests.support.bad_server", "retry-after-first:2") as url:
        code, _, stderr = distributed_run(path, url, 2, sweep)
        with urllib.request.urlopen(url.rsplit("/v1", 1)[0] + "/seen", timeout=10) as resp:
            return code, stderr, json.load(resp)


def test_the_preflights_retry_after_holds_every_worker(runs):
    """No worker's user sends before the Retry-After the preflight was given has passed: the master passes the time
    left with the step message (the server's own clock: each request's arrival)."""
    code, stderr, seen_by_server = runs["held"]
    times = seen_by_server["times"]
    assert code == 0, stderr[-3000:]
    assert len(times) > 2 and min(times[1:]) - times[0] >= 2.0, [round(t - times[0], 3) for t in times[:6]]


def test_distributed_run_completes(runs):
    code, stdout, stderr, _path, _ = runs["distributed"]
    assert code == 0, stderr[-3000:]
    assert "Traceback" not in stderr
    assert "locust-llm per-step results" in stdout


def test_only_the_master_tells_each_steps_result_once_every_worker_has_reported(runs):
    """The master's result line of a step waits for every worker's report since the step's end, so its figures are
    those of the per-step CSV, written at the end; workers print nothing per step."""
    from locust_llm.measure.rows import format_done

    _, _, stderr, path, _ = runs["distributed"]
    rows = read_csv(path / "run_llm_steps.csv")
    for row in rows:
        assert f"locust-llm step {row['step']}/{len(rows)} done: {format_done(row)}" in stderr, stderr[-3000:]
    for log in path.glob("worker*.log"):
        assert "locust-llm step" not in log.read_text()


def test_only_the_master_scrapes_the_servers_metrics(runs):
    """Once a second from one process: a master with two workers scrapes as often as a single process running the
    same sweep (give or take the few seconds their starts and ends differ by), not three times as often."""
    single, distributed = (runs[name][4]["metrics_scrapes"] for name in ("single", "distributed"))
    assert single > 5 and distributed <= single + 5, (single, distributed)


def test_nothing_lost_nothing_counted_twice(runs):
    _, _, _, path, served = runs["distributed"]
    steps = by_step(read_csv(path / "run_llm_steps.csv"))
    workers = read_csv(path / "run_llm_workers.csv")
    assert len({w["worker"] for w in workers}) == 2
    for step, row in steps.items():
        shares = [w for w in workers if int(w["step"]) == step and w["phase"] == "steady"]
        assert int(row["requests"]) == sum(int(w["requests"]) for w in shares) > 0
        assert int(row["completion_tokens"]) == sum(int(w["completion_tokens"]) for w in shares)
        assert row["workers"] == "2" and row["valid"] == "True", row
    # every request the simulator answered was recorded by exactly one worker (all phases, incl. the drain), but
    # for the master's preflight requests, which are not part of the measurement
    assert sum(int(w["requests"]) for w in workers) == served["finished"] - PREFLIGHT_REQUESTS > 0
    locust_e2e = next(r for r in read_csv(path / "run_stats.csv") if r["Type"] == "E2E")
    assert int(locust_e2e["Request Count"]) == served["finished"] - PREFLIGHT_REQUESTS
    assert served["cancelled"] == 0


def test_distributed_percentiles_match_the_simulators_truth(runs):
    dist = by_step(read_csv(runs["distributed"][3] / "run_llm_steps.csv"))
    for step in (1, 2):
        row = dist[step]
        assert_pacing_truth(row, TTFT_MS, ITL_MS, MAX_TOKENS)


def test_percentiles_match_a_single_process_run_of_the_same_load(runs):
    dist = by_step(read_csv(runs["distributed"][3] / "run_llm_steps.csv"))
    single = by_step(read_csv(runs["single"][3] / "run_llm_steps.csv"))
    assert runs["single"][0] == 0
    for step in (1, 2):
        for column, truth, noise_ms in (("ttft_p50_ms", TTFT_MS, 2.0), ("itl_p50_ms", ITL_MS, 2.0)):
            a, b = float(dist[step][column]), float(single[step][column])
            # same load, same simulator: each median within the truth's bounds (tests/support/truth.py), so within
            # the histogram's 0.8 % twice plus a few tenths of loopback of each other. The tail of ~80 requests has
            # no bound derivable from the truth on 2 shared cores (one stall sets it; the distributed run adds two
            # processes); a share lost or counted twice fails the count test above, and the unit tests check the
            # histogram merge exactly
            assert abs(a - b) <= 0.02 * truth + noise_ms, (step, column, a, b)


def test_a_killed_worker_marks_its_step_invalid_and_the_run_goes_on_with_the_survivors(runs):
    code, stdout, stderr, tmp_path, served = runs["killed"]
    assert "Traceback" not in stderr
    assert "invalid step 2: worker lost during the step" in stdout
    summary = json.loads((tmp_path / "run_llm_summary.json").read_text())
    assert code == (0 if summary["valid"] else 3), stdout[-2000:]  # invalid only where an answer rests on step 2
    steps = by_step(read_csv(tmp_path / "run_llm_steps.csv"))
    assert steps[1]["workers"] == "3" and steps[1]["workers_lost"] == "0", steps[1]
    assert steps[2]["valid"] == "False" and "worker lost during the step" in steps[2]["invalid_reasons"], steps[2]
    assert steps[2]["workers_lost"] == "1" and steps[3]["workers"] == "2" and steps[3]["workers_lost"] == "0"
    assert int(steps[3]["ok"]) > 0 and "worker lost" not in steps[3]["invalid_reasons"], steps[3]
    workers = read_csv(tmp_path / "run_llm_workers.csv")
    lost = {w["worker"] for w in workers if w["lost_in_step"]}
    assert len(lost) == 1 and {w["lost_in_step"] for w in workers if w["worker"] in lost} == {"2"}
    assert not [w for w in workers if w["worker"] in lost and int(w["step"]) == 3]  # nothing of it after
    # what the server saw beyond the rows is what the lost worker sent but never reported, which the run names with
    # a bound: its 3 users of step 2 (9 on 3 workers), each request 410 ms at the pacing truth (the step's E2E p50),
    # over the seconds it was silent before it was found lost; and the 12 requests in flight when the run stopped
    # (no --stop-timeout: cut, and not recorded)
    (named,) = json.loads((tmp_path / "run_llm_run.json").read_text())["lost_workers"]
    assert named["worker"] in lost and named["lost_in_step"] == 2 and named["users"] == 3, named
    assert named["requests_reported"] == sum(int(w["requests"]) for w in workers if w["worker"] in lost)
    assert named["silent_s"] > 0 and named["unreported_at_most"] >= 3, named
    assert (
        f"worker {named['worker']}, lost in step 2: its reports counted {named['requests_reported']} requests" in stderr
    )
    reported = sum(int(w["requests"]) for w in workers)
    seen = served["finished"] + served["cancelled"] - PREFLIGHT_REQUESTS
    assert 0 <= seen - reported <= named["unreported_at_most"] + 12, (served, reported, named)


def test_a_frozen_worker_is_lost_and_what_it_says_when_it_thaws_is_set_aside(runs):
    """SIGSTOP 2 s into step 2, SIGCONT 2 s into step 3: lost in step 2; when it thaws it is told to quit, and its
    late reports are set aside: no figure of it lands in step 3."""
    _, _, stderr, tmp_path, _ = runs["frozen"]
    assert "Traceback" not in stderr
    steps = by_step(read_csv(tmp_path / "run_llm_steps.csv"))
    assert steps[2]["workers_lost"] == "1" and "worker lost during the step" in steps[2]["invalid_reasons"]
    assert steps[3]["workers"] == "2" and steps[3]["workers_lost"] == "0", steps[3]
    workers = read_csv(tmp_path / "run_llm_workers.csv")
    (frozen,) = {w["worker"] for w in workers if w["lost_in_step"] == "2"}
    assert not [w for w in workers if w["worker"] == frozen and int(w["step"]) >= 3]
    assert f"worker {frozen} came back after it was lost in step 2: what it reports is set aside" in stderr


def test_a_worker_started_late_takes_users_at_the_next_step_boundary(runs):
    """Two workers, a third started 2 s into step 1 (a restarted pod): step 1 runs on the two, undisturbed; the
    third's first requests are in step 2."""
    code, stdout, stderr, tmp_path, _ = runs["late"]
    assert accepted(code, stdout) and "Traceback" not in stderr, stderr[-3000:]
    assert "joined during step 1; it takes users from the next step" in stderr
    steps = by_step(read_csv(tmp_path / "run_llm_steps.csv"))
    assert steps[1]["valid"] == "True" and steps[2]["workers"] == "3" and steps[3]["workers"] == "3", steps
    workers = read_csv(tmp_path / "run_llm_workers.csv")
    first = {}
    for w in workers:
        if int(w["requests"]):
            first[w["worker"]] = min(first.get(w["worker"], 99), int(w["step"]))
    assert sorted(first.values()) == [1, 1, 2], first


def test_below_min_workers_the_run_stops_invalid_with_every_file_written(runs):
    code, stdout, stderr, tmp_path, _ = runs["too-few"]
    assert code == 3 and "Traceback" not in stderr, stdout[-2000:]
    assert "1 workers left, fewer than --min-workers 2: the run was stopped" in stderr
    assert "1 workers left, fewer than --min-workers 2" in stdout  # the verdict names it
    for name in ("steps.csv", "workers.csv", "run.json", "summary.json", "report.html", "histograms.json"):
        assert (tmp_path / f"run_llm_{name}").stat().st_size > 0, name
    summary = json.loads((tmp_path / "run_llm_summary.json").read_text())
    assert not summary["valid"] and len(summary["steps"]) == 1  # only the first step ran


def test_processes_flag_runs_a_master_and_eight_forked_workers(tmp_path):
    """A master and 8 forked workers (the fleet bench/master.py checks against a real run): every step's row is the
    sum of the 8 workers' steady shares."""
    with sim(*SIM) as base:
        proc = run_locust(
            "--headless",
            "--processes",
            "8",
            "--master-bind-port",
            str(port := free_port()),
            "--master-port",
            str(port),
            "--host",
            base,
            "--csv",
            str(tmp_path / "run"),
            "--steps",
            "8,16",
            "--step-duration",
            "4s",
            "--warmup",
            "1s",
            "--model",
            "sim-llm",
            "--max-tokens",
            "16",
            cwd=tmp_path,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr  # nor Locust's CSV writer failing on its closed files at the end
    steps = read_csv(tmp_path / "run_llm_steps.csv")
    workers = read_csv(tmp_path / "run_llm_workers.csv")
    assert [int(r["users"]) for r in steps] == [8, 16]
    assert len({w["worker"] for w in workers}) == 8
    for row in steps:
        shares = [w for w in workers if w["step"] == row["step"] and w["phase"] == "steady"]
        assert row["workers"] == "8" and int(row["requests"]) == sum(int(w["requests"]) for w in shares) > 0
        assert int(row["completion_tokens"]) == sum(int(w["completion_tokens"]) for w in shares)


def test_two_masters_runs_merge_exactly_into_one_report(runs, tmp_path):
    """Two runs of the same plan at once (each its own master: shards of a fleet), merged by ``locust-llm report``:
    each step's counts are the two runs' sums and its percentiles those of the two runs' histograms together."""
    prefixes = [str(runs[name][3] / "run") for name in ("distributed", "single")]
    cli = (sys.executable, "-m", "locust_llm.cli", "report")
    refused = subprocess.run([*cli, *prefixes], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "give --out DIR" in refused.stderr
    proc = subprocess.run([*cli, *prefixes, "--out", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert accepted(proc.returncode, proc.stdout), proc.stderr  # 3 only when a shard's step was disturbed
    merged = by_step(json.loads((tmp_path / "summary.json").read_text())["steps"])
    shard_rows = [by_step(read_csv(Path(p + "_llm_steps.csv"))) for p in prefixes]
    tables = [shards.load(json.loads(Path(p + "_llm_histograms.json").read_text()), p)[0] for p in prefixes]
    for step, row in merged.items():
        assert row["requests"] == sum(int(s[step]["requests"]) for s in shard_rows) > 0
        assert row["users"] == sum(int(s[step]["users"]) for s in shard_rows)
        ttft = Histogram()
        for table in tables:
            ttft.merge(table.get(StatsKey(step, "sim-llm", STEADY)).hist["ttft"])
        assert row["ttft_p50_ms"] == round(ttft.quantile(0.5) / 1e6, 3)
