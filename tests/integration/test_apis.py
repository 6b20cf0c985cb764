"""Every API end to end against a simulator whose truth is known: the same figures, counts and knee as chat.

One pacing simulator per run: every TTFT 150 ms, every gap 10 ms, four requests served at once (``--capacity 4``:
the fifth waits a whole answer). At 4 users nothing queues, so the step's TTFT and ITL are the pacing truth
(``assert_pacing_truth``); at 8 users each request waits an answer of 150 + 31 x 10 = 460 ms, a TTFT of 610 ms, four
times the 150 ms at 4 users where the knee rule asks for twice (methodology), so the tail bends there whatever
a stall of the shared machine adds at 4 users (up to 150 ms): the latency knee is 4, the simulator's analytic knee.
Each API sweeps on the fast path; on the library path (``--fast-path off``) it runs the step at 4 users, where both
paths must read alike; the SDK user runs on the Responses API; all at once, then the conversations below.
"""

import json
import urllib.request

import pytest

from tests.support.procs import ROOT, accepted, at_once, read_csv, run_locust, sim
from tests.support.truth import assert_pacing_truth

pytestmark = pytest.mark.slow  # end-to-end runs: deselected by -m 'not slow'

TTFT_MS, ITL_MS, MAX_TOKENS, SLOTS = 150.0, 10.0, 32, 4
SWEEP = (
    "--headless", "--steps", "4,8", "--step-duration", "4s", "--warmup", "2s", "--max-tokens", str(MAX_TOKENS),
    "--output-length", "exact", "--sim-args", f"--ttft-ms {TTFT_MS:g} --itl-ms {ITL_MS:g} --capacity {SLOTS}",
)  # fmt: skip
"""A user's first request waits up to 1 s (``first_request_spread_s``) after it spawns: a 2 s warm-up leaves a
second for spawning on a busy machine, so every user is at work when the window opens and each user's count in it
is within one of any other run's (with 1 s, a user spawned late on a starved machine started inside the window)."""
APIS = ("chat", "responses", "messages", "completions")
RUNS = [(api, path) for api in APIS[1:] for path in ("auto", "off")] + [("responses", "sdk")]
"""Chat's own runs are in test_headless_run.py; the SDK user's (several times our CPU per token) is one step of 2
users for 7 s, to hold the 10 requests a valid step needs while the other runs share the machine."""


def run(out, api, path):
    out.mkdir()
    flags = {
        "auto": (),
        "off": ("--fast-path", "off", "--steps", "4"),
        "sdk": ("--steps", "2", "--step-duration", "7s"),
    }
    flags = flags[path]
    extra = {"locustfile": ROOT / "locustfile_sdk.py"} if path == "sdk" else {}
    proc = run_locust(*SWEEP, "--api", api, *flags, "--csv", str(out / "run"), cwd=out, **extra)
    return proc, out


TOOL_SHARE = 0.5
AGENTS = {  # name: (--api, flags): three-turn conversations
    "server": ("responses", ("--conversation-state", "server")),
    **{
        f"{api}-tools": (api, ("--tools", str(ROOT / "tests" / "support" / "tools.json"), "--tool-call-share", "50%"))
        for api in ("responses", "messages")  # chat's tools are --tools as they are: the unit tests' subject
    },
}
REFUSALS = ("--max-concurrent-per-key", "2", "--retry-after-s", "1", "--fault", "503:0.1")
"""The Messages API run's simulator: a cap of 2 requests in flight per key (429, stated in anthropic-ratelimit-*
headers) and one request in ten refused as overloaded (529, Anthropic's 503)."""


def conversation(out, api, flags, sim_args=()):
    """Three-turn conversations against the default engine (its prefix cache on); the simulator's own counts of
    chained requests and of tool results sent back."""
    out.mkdir()
    with sim(*sim_args) as base:
        proc = run_locust(
            "--headless", "--host", base, "--model", "sim-llm", "--api", api, *flags, "--turns", "3", "--steps", "4",
            "--step-duration", "4s", "--warmup", "1s", "--max-tokens", "16", "--output-length", "exact",
            "--csv", str(out / "run"), cwd=out,
        )  # fmt: skip
        with urllib.request.urlopen(base.rsplit("/v1", 1)[0] + "/sim/stats", timeout=10) as resp:
            stats = json.load(resp)
    return proc, out, stats


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The sweeps (:data:`RUNS`), at once: each light (2-8 users against a simulator of its own)."""
    root = tmp_path_factory.mktemp("apis")
    return at_once({(api, path): lambda a=api, p=path: run(root / f"{a}-{p}", a, p) for api, path in RUNS})


@pytest.fixture(scope="module")
def conversations(tmp_path_factory):
    """The conversations (:data:`AGENTS`, and the Messages API's refusals), at once, apart from the sweeps: eleven
    runs starting at once starve the first steps on two cores."""
    root = tmp_path_factory.mktemp("agents")
    jobs = {name: lambda n=name: conversation(root / n, *AGENTS[n]) for name in AGENTS}
    jobs["messages-refused"] = lambda: conversation(root / "refused", "messages", (), REFUSALS)
    return at_once(jobs)


@pytest.mark.parametrize("api, path", RUNS)
def test_every_api_measures_the_pacing_truth_and_its_usage(runs, api, path):
    proc, out = runs[api, path]
    assert accepted(proc.returncode, proc.stdout), proc.stdout[-3000:] + proc.stderr[-3000:]
    meta = json.loads((out / "run_llm_run.json").read_text())
    assert meta["settings"]["api"] == api
    rows = read_csv(out / "run_llm_steps.csv")
    assert [int(r["users"]) for r in rows] == {"auto": [4, 8], "off": [4], "sdk": [2]}[path]
    for row in rows:
        assert int(row["errors"]) == 0 and int(row["protocol_errors"]) == 0, row
        # the usage came from each API's own final event: exactly the tokens asked for, none estimated
        assert int(row["completion_tokens"]) == int(row["ok"]) * MAX_TOKENS > 0, row
        assert int(row["prompt_tokens"]) > int(row["ok"]) * 8, row
    for row in rows[:1]:  # at the slots nothing waits: the pacing truth
        if path == "sdk":  # its medians, by the chat SDK user's allowance (test_client.py): it adds its own
            # overhead to TTFT (under 25 ms), not to the gaps between tokens
            assert TTFT_MS - 2 <= float(row["ttft_p50_ms"]) < TTFT_MS + 25, row
            assert abs(float(row["itl_p50_ms"]) - ITL_MS) < 1.5, row
        else:
            assert_pacing_truth(row, TTFT_MS, ITL_MS, MAX_TOKENS)


def test_the_knee_is_the_same_on_every_api_and_path(runs):
    """The same engine behind every API: each API's latency knee, on either path, is the simulator's analytic knee
    (4 slots)."""
    knees = {}
    for key, (proc, out) in runs.items():
        if key[1] != "auto":
            continue  # one step (library path), or the SDK's tail: its own cost on a shared machine (above)
        summary = json.loads((out / "run_llm_summary.json").read_text())
        knees[key] = summary["knee"]["latency_knee_users"]
        assert "simulator's analytic knee: 4 users" in proc.stdout, proc.stdout[-2000:]
    assert set(knees.values()) == {SLOTS}, knees


@pytest.mark.parametrize("api", APIS[1:])
def test_both_paths_read_each_api_alike(runs, api):
    """As the chat paths (tests/integration/test_headless_run.py): medians within the pacing truth's allowance,
    counts within one request per user."""
    fast, library = (read_csv(runs[api, path][1] / "run_llm_steps.csv") for path in ("auto", "off"))
    for a, b in zip(fast[:1], library, strict=True):  # at the slots (past them, the wait depends on the queue)
        assert a["users"] == b["users"] == str(SLOTS), (a, b)
        assert abs(float(a["ttft_p50_ms"]) - float(b["ttft_p50_ms"])) <= 7, (a, b)
        assert abs(float(a["itl_p50_ms"]) - float(b["itl_p50_ms"])) <= 2.1, (a, b)
        assert abs(int(a["ok"]) - int(b["ok"])) <= int(a["users"]), (a, b)


def test_server_side_state_sends_each_later_turn_alone_and_the_cache_grows_as_with_the_history(conversations):
    """Turn k names the answer before it (``previous_response_id``) and sends only its new input (the simulator
    counts the chained requests); it rebuilds the history, so the prompt each turn is charged for, and the part of it
    found in the cache, grow with the turns as they do when the client resends the history (a client-side run of
    the same conversations: the tools runs below, whose simulator chained nothing)."""
    per_turn = {}
    for name in ("server", "responses-tools"):
        proc, out, stats = conversations[name]
        chained = stats["responses_chained"]
        assert accepted(proc.returncode, proc.stdout), proc.stdout[-3000:] + proc.stderr[-3000:]
        turns = {int(r["turn"]): r for r in read_csv(out / "run_llm_turns.csv")}
        assert set(turns) == {1, 2, 3}, turns
        per_turn[name] = turns
        later = sum(int(turns[k]["requests"]) for k in (2, 3))
        if name == "server":
            assert later <= chained <= later + 2 * 4 * 2, (later, chained)  # + the warm-up's, at most 2 per user
        else:
            assert chained == 0
    for state, turns in per_turn.items():
        prompts = [float(turns[k]["prompt_tokens_p50"]) for k in (1, 2, 3)]
        cached = [float(turns[k]["cached_prompt_tokens_p50"]) for k in (1, 2, 3)]
        # each later turn is charged for the history: at least the answer before it (16 tokens) more than the turn
        # before, whoever holds the history
        assert prompts[0] + 16 <= prompts[1] and prompts[1] + 16 <= prompts[2], (state, prompts)
        assert cached[0] == 0 < cached[1] < cached[2], (state, cached)


@pytest.mark.parametrize("api", ["responses", "messages"])
def test_a_share_of_turns_calls_a_tool_and_its_result_goes_back(conversations, api):
    """Each client request asks for a tool call with probability 0.5 (the simulator calls one when asked, never
    otherwise): the share of answers with a call is within a 99.9 % binomial interval of 0.5; each call streams its
    16 tokens of arguments; calls are followed by turns that send their results back (the simulator counts them)."""
    from scipy.stats import binomtest

    proc, out, stats = conversations[f"{api}-tools"]
    assert accepted(proc.returncode, proc.stdout), proc.stdout[-3000:] + proc.stderr[-3000:]
    (row,) = read_csv(out / "run_llm_steps.csv")
    ok, calls = int(row["ok"]), int(row["tool_calls"])
    assert int(row["errors"]) == 0 and ok > 30, row
    interval = binomtest(calls, ok, TOOL_SHARE).proportion_ci(0.999)
    assert interval.low <= TOOL_SHARE <= interval.high, (calls, ok)
    assert int(row["tool_call_tokens"]) == calls * 16, row
    assert 0 < stats["tool_results"] <= stats["requests_by_status"]["200"], stats
    turns = {int(r["turn"]): int(r["requests"]) for r in read_csv(out / "run_llm_turns.csv")}
    assert set(turns) == {1, 2, 3}, turns


def test_the_messages_api_s_refusals_are_counted_retried_and_its_caps_read(conversations):
    """429s with Retry-After are waited out (honor), 529s are retried as 503s, and the cap the anthropic-ratelimit-*
    headers state fills the same columns as x-ratelimit-*."""
    proc, out, stats = conversations["messages-refused"]
    assert accepted(proc.returncode, proc.stdout), proc.stdout[-3000:] + proc.stderr[-3000:]
    (row,) = read_csv(out / "run_llm_steps.csv")
    assert stats["requests_by_status"].get("429", 0) > 0 and stats["requests_by_status"].get("529", 0) > 0, stats
    assert int(row["retries"]) > 0 and int(row["client_ok"]) > 0, row
    assert int(row["status_5xx"]) > 0, row  # a 529 is a server-side refusal
    assert row["ratelimit_limit_requests"] == "2", row
