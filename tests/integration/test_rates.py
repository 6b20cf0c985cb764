"""Open-loop arrival rates against the simulator: requests go out on schedule whatever the server does; below its
capacity the rate is delivered and TTFT is the simulator's; above it, the backlog grows and the report says so."""

import json

import pytest

from locust_llm.reports.console import sim_kept_up
from tests.integration.test_web_ui import fetch, wait_for, web_ui
from tests.support.procs import distributed_run, read_csv, run_locust, sim

pytestmark = pytest.mark.slow  # end-to-end runs: deselected by -m 'not slow'

# pacing: TTFT 100 ms, 15 gaps of 10 ms: a request lasts 250 ms; 8 at once: 32 requests/s at most
SIM = "--ttft-ms 100 --itl-ms 10 --capacity 8"
TTFT_MS = 100.0
MAX_LAG_MS = 40.0
"""The scheduling lag a step may have and stay valid: the default 10 ms marked a step invalid (and the run failed)
when a loaded CI machine stalled the generator (13.4 ms at 16 requests/s); 40 is still far below a request's 250."""


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("rates")
    proc = run_locust(
        "--headless",
        "--rates",
        "8,16,48",
        "--arrivals",
        "constant",
        "--step-duration",
        "8s",
        "--max-tokens",
        "16",
        "--max-in-flight",
        "40",
        "--seed",
        "3",
        "--sim-args",
        SIM,
        "--max-sched-lag",
        f"{MAX_LAG_MS:g}ms",
        "--stop-timeout",
        "20s",
        "--csv",
        str(out / "run"),
        cwd=out,
    )
    rows = {float(r["offered_req_s"]): r for r in read_csv(out / "run_llm_steps.csv")}
    return proc, out, rows


def test_below_capacity_the_offered_rate_is_delivered_on_schedule(sweep):
    proc, _, rows = sweep
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    for rate in (8.0, 16.0):
        row = rows[rate]
        # constant arrivals: the window holds rate * duration completions, give or take one at each edge
        assert float(row["req_s"]) == pytest.approx(rate, abs=2 / float(row["duration_s"]) + 0.03 * rate), row
        assert float(row["served_req_s"]) == pytest.approx(float(row["req_s"]))  # no error, no retry below capacity
        assert int(row["dropped"]) == 0 and float(row["sched_lag_p99_ms"]) < MAX_LAG_MS and row["valid"] == "True"
        # in flight: Little's law, rate x the time a request took (250 ms when the simulator keeps its pacing), and
        # one for an arrival's lag (< 40 ms) or a request just ending; users holds its p99. CI saw 7 and 8 at 16
        # requests/s (4 live): requests that never returned stayed counted (test_every_request_sent_ends_...)
        e2e_p50_s, e2e_p99_s = float(row["e2e_p50_ms"]) / 1000, float(row["e2e_p99_ms"]) / 1000
        assert float(row["in_flight_p50"]) <= rate * e2e_p50_s + 1, row
        assert int(row["users"]) <= rate * e2e_p99_s + 3, row


def test_every_request_sent_ends_and_the_in_flight_count_comes_back_to_zero(sweep):
    """A pooled connection handed on inside the read callback once stopped its new owner's wait: that request never
    returned, stayed counted in flight to the end (in_flight_p50 7 where Little's law gives 4) and was cancelled at
    the stop. With --stop-timeout the drain lets every request finish, so none may be left."""
    proc, out, rows = sweep
    totals = json.loads((out / "run_llm_run.json").read_text())["totals"]
    loop = totals["open_loop"]
    steady_dropped = sum(int(r["dropped"]) for r in rows.values())
    assert loop["sent"] == loop["arrivals"] - loop["dropped"] > 0 and loop["dropped"] >= steady_dropped > 0, loop
    assert loop["unended"] == 0 and loop["ended"] == loop["sent"], loop
    assert totals["by_phase"]["drain"]["requests"] > 0  # above capacity, requests were in flight at the end
    assert "were cancelled" not in proc.stdout


def test_below_capacity_ttft_is_the_simulators_open_loop_truth(sweep):
    _, out, rows = sweep
    truth = {t["rate_req_s"]: t for t in json.loads((out / "run_llm_run.json").read_text())["simulator"]["open_loop"]}
    for rate in (8.0, 16.0):
        expected = truth[rate]["ttft_p50_ms"]
        assert expected == pytest.approx(TTFT_MS, abs=2)  # the engine's own answer: no queue below capacity
        # bounds as in test_headless_run: the simulator's 0.5 ms, the histogram's 0.8 %, loopback and the client
        assert expected - 2 <= float(rows[rate]["ttft_p50_ms"]) <= expected + 5, rows[rate]
        # from the scheduled time: request by request TTFT plus the scheduling lag (checked < MAX_LAG_MS at p99 above).
        # Compared at p50: a client request is filed at its end and TTFT at its first token, so at a window's edge
        # one request can be in one set and not the other, and at p99 of ~100 requests that one moves the figure
        # (CI: client TTFT p99 107.6 against TTFT + lag p99 114.1; before, a stall put it 25 ms over the truth)
        row = rows[rate]
        ttft_p50, lag_p99 = float(row["ttft_p50_ms"]), float(row["sched_lag_p99_ms"])
        assert ttft_p50 - 2 <= float(row["client_ttft_p50_ms"]) <= ttft_p50 + lag_p99 + 3, row


def test_above_capacity_the_backlog_grows_arrivals_are_dropped_and_saturation_is_called(sweep):
    proc, out, rows = sweep
    over = rows[48.0]
    assert int(over["dropped"]) > 0 and float(over["in_flight_max"]) >= 39  # the cap of 40 in flight was reached
    assert float(over["served_req_s"]) < 0.8 * 48  # it cannot serve more than about 32 requests/s
    assert float(over["ttft_p99_ms"]) > 3 * TTFT_MS  # queueing
    summary = json.loads((out / "run_llm_summary.json").read_text())
    assert summary["mode"] == "rate" and summary["knee"]["throughput_saturation_rate_req_s"] == 16
    # the known answer: 8 slots x 250 ms = 32 req/s at most, and the simulator's own replay of the same arrivals
    assert sim_kept_up(summary["run"]["simulator"]["open_loop"]) == 16
    assert summary["knee"]["recommended_rate_req_s"] <= 16
    assert "recommended max rate: " in proc.stdout and "req/s" in proc.stdout


def test_a_master_with_two_workers_delivers_the_offered_rate(tmp_path):
    """On the library path (``--fast-path off``): the open loop's schedule is the same on both paths."""
    sweep = (
        "--fast-path",
        "off",
        "--model",
        "sim-llm",
        "--rates",
        "20",
        "--arrivals",
        "constant",
        "--step-duration",
        "8s",
        "--max-tokens",
        "16",
    )
    with sim(*SIM.split()) as base:
        code, _, err = distributed_run(tmp_path, base, 2, sweep)
    assert code == 0, err[-3000:]
    (row,) = read_csv(tmp_path / "run_llm_steps.csv")
    assert row["workers"] == "2" and float(row["req_s"]) == pytest.approx(20, abs=2 / float(row["duration_s"]) + 0.6)
    shares = [w for w in read_csv(tmp_path / "run_llm_workers.csv") if w["phase"] == "steady"]
    assert len(shares) == 2 and all(abs(int(w["requests"]) - int(row["requests"]) / 2) <= 2 for w in shares)


def test_rates_and_steps_exclude_each_other(tmp_path):
    proc = run_locust("--headless", "--rates", "2,4", "--steps", "4,8", cwd=tmp_path, timeout_s=60)
    assert proc.returncode == 2 and "--rates and --steps exclude each other" in proc.stderr


def test_the_web_ui_start_form_can_choose_rates(tmp_path):
    with web_ui(tmp_path, "--step-duration", "4s", "--max-tokens", "8", "--min-step-requests", "1") as base:
        assert json.loads(fetch(base + "/swarm", {"rates": "5,10", "arrivals": "constant"}))["success"]
        data = wait_for(base, "finished")
    assert [r["offered_req_s"] for r in data["rows"]] == [5.0, 10.0]
    assert data["summary"]["mode"] == "rate" and data["summary"]["run"]["settings"]["arrivals"] == "constant"
    # the live page draws against the offered rate and shows the console's words
    assert data["load"]["key"] == "offered_req_s" and "recommended max rate: " in data["text"]
