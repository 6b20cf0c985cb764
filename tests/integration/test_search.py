"""--search against the simulator, whose answer is known from its rules.

The pacing simulator admits C requests at once (FIFO beyond): a request holds a slot for S = TTFT + (n - 1) ITL.
With u > C closed-loop users, a request waits at most ceil((u - C) / C) whole services, and on average (Little's
law) TTFT = u S / C - (n - 1) ITL (:meth:`PacingParams.steady_ttft_s`). So the p99 lies between that mean and
TTFT + ceil((u - C) / C) S, and for a TTFT limit L = TTFT + k S + S / 5 the SLA capacity u* is bracketed by
C (k + 1) <= u* <= C (k + 1.2).
"""

import json
import math
import re
from functools import partial

import pytest

from tests.integration.test_report_browser import chromium, headless
from tests.integration.test_web_ui import fetch, wait_for, web_ui
from tests.support.procs import at_once, distributed_run, read_csv, run_locust, sim

pytestmark = pytest.mark.slow  # end-to-end runs: deselected by -m 'not slow'

TTFT_MS, ITL_MS, TOKENS = 100.0, 10.0, 16
SERVICE_MS = TTFT_MS + (TOKENS - 1) * ITL_MS  # 250 ms
FAST = ("--search-min-requests", "60", "--warmup", "2s", "--max-tokens", str(TOKENS), "--step-duration", "20s")


def sim_args(capacity: int) -> str:
    return f"--ttft-ms {TTFT_MS:g} --itl-ms {ITL_MS:g} --capacity {capacity}"


def run_sla_search(out):
    capacity, k = 4, 1
    limit = TTFT_MS + k * SERVICE_MS + SERVICE_MS / 5  # 400 ms
    proc = run_locust(
        "--headless",
        "--search",
        "sla",
        "--sla-ttft-p99-ms",
        f"{limit:g}",
        "--steps",
        "4",
        *FAST,
        "--sim-args",
        sim_args(capacity),
        "--csv",
        str(out / "run"),
        cwd=out,
    )
    bounds = (capacity * (k + 1), capacity * (k + 1.2))
    return proc, out, bounds


# The knee search's pacing server: C = 2 slots, a TTFT of T = 20 ms, then 19 tokens 12 ms apart (S = 248 ms a
# request). Up to 2 users the TTFT is T; a 3rd waits for a slot, up to S (measured: p50 100, p99 188 ms), and at 4
# requests queue at the server. A probe bends past max(2 p99_a, p99_a + 4 x 12 ms) (measure/knee.py): 2 users stay
# flat against 1 unless a stall adds 48 ms to their p99, and 3 bend against 2 unless one adds over 70 ms to the
# 2-user p99 (a p99 of 60-80 samples: one stalled request sets it). With C = 3, T = 100 and S = 250 ms, 4 users'
# p99 was T + S / 3 and that margin 26 ms: one stall of a shared machine moved the answer to 4.
KNEE_CAPACITY, KNEE_TTFT_MS, KNEE_ITL_MS, KNEE_TOKENS = 2, 20.0, 12.0, 20


def run_knee_search(out, capacity):
    args = f"--ttft-ms {KNEE_TTFT_MS:g} --itl-ms {KNEE_ITL_MS:g} --capacity {capacity}"
    with sim(*args.split()) as base:
        sweep = ("--model", "sim-llm", "--search", "knee", "--steps", "2", *FAST, "--max-tokens", str(KNEE_TOKENS))
        code, _, err = distributed_run(out, base, 2, sweep)
    return code, err, out


def run_budget(out):
    """A knee search cut by its time budget, on the library path (``--fast-path off``): the search's rules do not
    depend on how streams are read. Each probe lasts its whole step (5 s: it never holds 10,000 requests), so the
    budget of 12 s ends the search during its third probe, after the second decided the first: incomplete, with a
    bracket."""
    return run_locust(
        "--headless",
        "--fast-path",
        "off",
        "--search",
        "knee",
        "--steps",
        "2",
        "--search-max-duration",
        "12s",
        *FAST,
        "--step-duration",
        "5s",
        "--search-min-requests",
        "10000",
        "--sim-args",
        sim_args(2),
        "--csv",
        str(out / "run"),
        cwd=out,
    ), out


@pytest.fixture(scope="module")
def searches(tmp_path_factory):
    """Four searches at once (one started from the web UI's form), each against its own pacing simulator of a few
    slots (light loads)."""
    return at_once(
        {
            "sla": partial(run_sla_search, tmp_path_factory.mktemp("search")),
            "knee": partial(run_knee_search, tmp_path_factory.mktemp("knee"), KNEE_CAPACITY),
            "budget": partial(run_budget, tmp_path_factory.mktemp("budget")),
            "webui": partial(web_ui_rate_search, tmp_path_factory.mktemp("webui") / "run"),
        }
    )


@pytest.fixture(scope="module")
def sla_search(searches):
    return searches["sla"]


def test_the_sla_search_finds_the_simulators_sla_capacity(sla_search):
    proc, out, (lowest, highest) = sla_search
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((out / "run_llm_summary.json").read_text())
    search = summary["search"]
    assert search["complete"] and lowest <= search["answer"] <= math.floor(highest)
    low, high = search["bracket"]
    assert high - low <= max(1, 0.1 * low)
    assert summary["knee"]["sla_max_users"] == search["answer"] and summary["knee"]["search"] is True
    assert summary["knee"]["latency_knee_users"] is None  # an SLA search does not claim a knee
    assert summary["valid"]


def test_every_probe_is_a_step_row_in_the_order_run_and_logged_as_it_happens(sla_search):
    proc, out, _ = sla_search
    summary = json.loads((out / "run_llm_summary.json").read_text())
    probes = summary["search"]["probes"]
    rows = read_csv(out / "run_llm_steps.csv")
    assert [int(r["step"]) for r in rows] == list(range(1, len(rows) + 1))
    assert [p["steps"][-1] for p in probes] == [int(r["step"]) for r in rows]  # one row per probe, in order
    assert [float(r["users"]) for r in rows] == [p["load"] for p in probes]
    assert probes[0]["load"] == 4 and probes[1]["load"] == 8  # the start, then doubling
    for probe in probes:
        assert f"search probe {probe['order']} " in proc.stderr
        p99 = probe["client_ttft_p99_ms"]
        assert probe["verdict"] == ("pass" if p99 <= 400 else "fail")
    assert "locust-llm search: the crossing lies between" in proc.stderr
    assert "search [SLA: TTFT p99 <= 400 ms" in proc.stdout
    html = (out / "run_llm_report.html").read_text()
    assert "Search path [SLA: TTFT p99 &lt;= 400 ms" in html or "Search path [SLA: TTFT p99 <= 400 ms" in html


def test_the_search_report_renders_in_chromium_with_its_path(sla_search, tmp_path):
    _, out, _ = sla_search
    proc = headless(chromium(), tmp_path / "profile", "--dump-dom", (out / "run_llm_report.html").as_uri())
    status = re.search(r'id="render-status">rendered (\d+) charts, (\d+) errors<', proc.stdout)
    assert status, proc.stderr[-2000:]
    assert int(status.group(1)) >= 6 and status.group(2) == "0"  # the search path above the usual charts
    assert "Search path" in proc.stdout


def test_a_master_with_two_workers_finds_the_knee(searches):
    code, err, tmp_path = searches["knee"]
    capacity = KNEE_CAPACITY
    assert code == 0, err[-3000:]
    summary = json.loads((tmp_path / "run_llm_summary.json").read_text())
    assert summary["search"]["answer"] == capacity and summary["knee"]["latency_knee_users"] == capacity
    assert summary["knee"]["latency_knee_bracket"] == [capacity, capacity + 1]
    rows = read_csv(tmp_path / "run_llm_steps.csv")
    assert all(r["workers"] == "2" for r in rows)
    assert "search probe 1 " in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--search", "sla"), "--search sla needs an SLA"),
        (("--search", "knee", "--steps", "8,16"), "--search starts from one load: give --steps a single value"),
        (("--search", "knee", "--search-precision", "0"), "--search-precision must be a share above 0"),
        (("--search", "knee", "--search-precision=-5%"), "--search-precision must be a share above 0"),
    ],
)
def test_bad_search_input_is_one_line_and_exit_2(tmp_path, args, message):
    proc = run_locust("--headless", *args, cwd=tmp_path, timeout_s=60)
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if line.startswith("locust-llm: error:")]
    assert len(errors) == 1 and message in errors[0]


def test_the_time_budget_ends_the_search_and_says_so(searches):
    proc, tmp_path = searches["budget"]
    summary = json.loads((tmp_path / "run_llm_summary.json").read_text())
    search = summary["search"]
    assert not search["complete"] and "--search-max-duration" in search["reason"]
    assert [p["verdict"] for p in search["probes"]][:2] == ["pass", "pass"]  # decided before the budget ran out
    assert search["bracket"][0] == 2 and search["answer"] == 2  # 1 user to 2: flat; nothing yet above
    assert proc.returncode == 0 and "(incomplete)" in proc.stdout


def web_ui_rate_search(cwd):
    """One SLA rate search started from the web UI's form; the run's /llm/steps.json when it has finished."""
    cwd.mkdir()
    # the scheduling lag a probe may have before it is invalid, from the SLA's margin: below capacity the truth's
    # TTFT is 100 ms against the 400 ms limit, so a send up to 250 ms late (less 50 ms of loopback and jitter) cannot
    # turn a pass into a fail; this machine's stalls reached a lag p99 of 78.5 ms, twice at one load (at 40 ms allowed)
    with web_ui(cwd, *FAST, "--sim-args", sim_args(4), "--max-sched-lag", "250ms") as base:
        form = {
            "search": "sla",
            "rates": "12",
            "arrivals": "constant",
            "sla_ttft_p99_ms": "400",
            "search_precision": "25%",
        }  # 12, 24, 18, 15: four probes
        assert json.loads(fetch(base + "/swarm", form))["success"]
        return wait_for(base, "finished", timeout_s=150)


def test_the_web_ui_can_start_a_rate_search_and_shows_its_probes(searches):
    # constant arrivals at C = 4 slots of 250 ms: no wait below 16 req/s; above it the queue grows without bound
    capacity_req_s = 4 / (SERVICE_MS / 1000)
    data = searches["webui"]
    search = data["search"]
    assert search["unit"] == "req/s" and not search["running"] and search["complete"], search["reason"]
    # the loads the search chose, from 12 doubling: an invalid probe (a stall of a shared machine past the 40 ms
    # allowed) is retried at its load, a borderline one repeated, each by the search's rules (shapes/search.py)
    chosen = [p["load"] for p in search["probes"] if p["kind"] == "probe"]
    assert chosen[:2] == [12, 24], search["probes"]
    low, high = search["bracket"]
    assert capacity_req_s * 0.75 <= low <= capacity_req_s and high <= capacity_req_s * 1.25  # within the precision
    assert data["summary"]["knee"]["sla_max_rate_req_s"] == low and data["summary"]["knee"]["search"] is True
    assert "search [SLA: TTFT p99 <= 400 ms" in data["text"] and "req/s" in data["text"]
