"""Every API end to end against a simulator whose truth is known: the same figures, counts and knee as chat.

One pacing simulator per run: every TTFT 150 ms, every gap 10 ms, four requests served at once (``--capacity 4``:
the fifth waits a whole answer). At 2 and 4 users nothing queues, so each step's TTFT and ITL are the pacing truth
(``assert_pacing_truth``); at 8 users each request waits an answer of 150 + 31 x 10 = 460 ms, a TTFT of 610 ms, four
times the 150 ms at 4 users where the knee rule asks for twice (methodology), so the tail bends there whatever
a stall of the shared machine adds at 4 users (up to 150 ms): the latency knee is 4, the simulator's analytic knee.
Each API runs on both HTTP paths (the SDK user on the Responses API), all at once.
"""

import json

import pytest

from tests.support.procs import ROOT, accepted, at_once, read_csv, run_locust
from tests.support.truth import assert_pacing_truth

pytestmark = pytest.mark.slow  # end-to-end runs: deselected by -m 'not slow'

TTFT_MS, ITL_MS, MAX_TOKENS, SLOTS = 150.0, 10.0, 32, 4
SWEEP = (
    "--headless", "--steps", "2,4,8", "--step-duration", "4s", "--warmup", "1s", "--max-tokens", str(MAX_TOKENS),
    "--output-length", "exact", "--sim-args", f"--ttft-ms {TTFT_MS:g} --itl-ms {ITL_MS:g} --capacity {SLOTS}",
)  # fmt: skip
APIS = ("chat", "responses", "messages", "completions")
RUNS = [(api, path) for api in APIS for path in ("auto", "off") if (api, path) != ("chat", "off")] + [
    ("responses", "sdk")
]


def run(out, api, path):
    out.mkdir()
    flags = ("--fast-path", path) if path != "sdk" else ()
    extra = {"locustfile": ROOT / "locustfile_sdk.py"} if path == "sdk" else {}
    proc = run_locust(*SWEEP, "--api", api, *flags, "--csv", str(out / "run"), cwd=out, **extra)
    return proc, out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("apis")
    return at_once({(api, path): lambda a=api, p=path: run(root / f"{a}-{p}", a, p) for api, path in RUNS})


@pytest.mark.parametrize("api, path", RUNS)
def test_every_api_measures_the_pacing_truth_and_its_usage(runs, api, path):
    proc, out = runs[api, path]
    assert accepted(proc.returncode, proc.stdout), proc.stdout[-3000:] + proc.stderr[-3000:]
    meta = json.loads((out / "run_llm_run.json").read_text())
    assert meta["settings"]["api"] == api
    rows = read_csv(out / "run_llm_steps.csv")
    assert [int(r["users"]) for r in rows] == [2, 4, 8]
    for row in rows:
        assert int(row["errors"]) == 0 and int(row["protocol_errors"]) == 0, row
        # the usage came from each API's own final event: exactly the tokens asked for, none estimated
        assert int(row["completion_tokens"]) == int(row["ok"]) * MAX_TOKENS > 0, row
        assert int(row["prompt_tokens"]) > int(row["ok"]) * 8, row
    for row in rows[:2]:  # below the slots nothing waits: the pacing truth
        if path == "sdk":  # the SDK's cost per token is several times ours (docs/performance.md): its medians only
            assert TTFT_MS - 2 <= float(row["ttft_p50_ms"]) <= TTFT_MS + 5, row
            assert ITL_MS - 0.6 <= float(row["itl_p50_ms"]) <= ITL_MS + 1.5, row
        else:
            assert_pacing_truth(row, TTFT_MS, ITL_MS, MAX_TOKENS)


def test_the_knee_is_the_same_on_every_api_and_path(runs):
    """The same engine behind every API: each run's latency knee is the simulator's analytic knee (4 slots)."""
    knees = {}
    for key, (proc, out) in runs.items():
        if key[1] == "sdk":
            continue  # its tail is the SDK's own cost on a shared machine (above)
        summary = json.loads((out / "run_llm_summary.json").read_text())
        knees[key] = summary["knee"]["latency_knee_users"]
        assert "simulator's analytic knee: 4 users" in proc.stdout, proc.stdout[-2000:]
    assert set(knees.values()) == {SLOTS}, knees


@pytest.mark.parametrize("api", APIS[1:])
def test_both_paths_read_each_api_alike(runs, api):
    """As the chat paths (tests/integration/test_headless_run.py): medians within the pacing truth's allowance,
    counts within one request per user."""
    fast, library = (read_csv(runs[api, path][1] / "run_llm_steps.csv") for path in ("auto", "off"))
    for a, b in zip(fast, library, strict=True):
        if int(a["users"]) > SLOTS:
            continue  # past the slots the wait depends on where each request fell in the queue
        assert abs(float(a["ttft_p50_ms"]) - float(b["ttft_p50_ms"])) <= 7, (a, b)
        assert abs(float(a["itl_p50_ms"]) - float(b["itl_p50_ms"])) <= 2.1, (a, b)
        assert abs(int(a["ok"]) - int(b["ok"])) <= int(a["users"]), (a, b)
