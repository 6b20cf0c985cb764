"""Conversations, prompt caches and reasoning models, end to end against the simulator (whose truth is known)."""

import json
import re
from functools import partial

import pytest

from tests.support.procs import LOCUSTFILE, ROOT, at_once, read_csv, run_locust, sim

pytestmark = pytest.mark.slow  # end-to-end runs: deselected by -m 'not slow'

REASONING = 48  # the reasoning preset's thinking tokens per answer


def sweep(path, base, *args, locustfile=LOCUSTFILE, users="4", seconds="10s"):
    """A one-step run against ``base`` (None: the embedded simulator)."""
    host = ("--host", base) if base else ()
    proc = run_locust(
        "--headless",
        *host,
        "--steps",
        users,
        "--step-duration",
        seconds,
        "--warmup",
        "2s",
        "--csv",
        str(path / "run"),
        *args,
        cwd=path,
        locustfile=locustfile,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    return proc


def system_prompt(path, tokens):
    file = path / "system.txt"
    file.write_text(("Answer as a careful engineer. " * tokens)[: 4 * tokens])
    return str(file)


def converse(path, locustfile, users):
    """Three-turn conversations with a reasoning model, against a simulator of its own."""
    with sim("--preset", "reasoning", "--kv-blocks", "1024", "--context-tokens", "8192") as base:
        sweep(
            path,
            base,
            "--model",
            "sim-reasoner",
            "--turns",
            "3",
            "--max-tokens",
            "64",
            "--system-prompt",
            system_prompt(path, 400),
            locustfile=locustfile,
            users=users,
        )
    return path


def cached(path, mark):
    """16 users, a 1,000-token system prompt, the embedded simulator caching only what is marked (--cache-control
    ``mark``)."""
    sweep(
        path,
        None,
        "--sim-args",
        "--prefix-cache hint",
        "--system-prompt",
        system_prompt(path, 1000),
        "--cache-control",
        mark,
        "--max-tokens",
        "64",
        users="16",
        seconds="12s",
    )
    return read_csv(path / "run_llm_steps.csv")[0], json.loads((path / "run_llm_run.json").read_text())


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """At once, each against a simulator of its own: conversations through both user classes, and the prompt cache
    with --cache-control off and on."""
    jobs = {
        "fast": partial(converse, tmp_path_factory.mktemp("fast"), LOCUSTFILE, "4"),
        "sdk": partial(converse, tmp_path_factory.mktemp("sdk"), ROOT / "locustfile_sdk.py", "2"),
        **{f"cache-{m}": partial(cached, tmp_path_factory.mktemp(f"cache-{m}"), m) for m in ("off", "on")},
    }
    return at_once(jobs)


@pytest.fixture(scope="module")
def conversations(runs):
    return {"fast": runs["fast"], "sdk": runs["sdk"]}


@pytest.fixture(scope="module")
def hinted(runs):
    return {"off": runs["cache-off"], "on": runs["cache-on"]}


def turns(path):
    return {int(r["turn"]): r for r in read_csv(path / "run_llm_turns.csv") if r["step"] == "1"}


@pytest.mark.parametrize("name", ["fast", "sdk"])
def test_prompts_grow_turn_by_turn_and_the_cache_serves_the_history(conversations, name):
    by_turn = turns(conversations[name])
    assert sorted(by_turn) == [1, 2, 3], by_turn
    prompt = {t: float(r["prompt_tokens_p50"]) for t, r in by_turn.items()}
    cached = {t: float(r["cached_prompt_tokens_p50"]) for t, r in by_turn.items()}
    assert prompt[1] < prompt[2] < prompt[3]
    # the system prompt is cached from the first request on; a later turn finds the previous turn and its reply
    assert cached[1] >= 400 and all(cached[t] >= 0.98 * (prompt[t - 1] - 3) for t in (2, 3)), (prompt, cached)
    (row,) = read_csv(conversations[name] / "run_llm_steps.csv")
    assert float(row["cache_hit_share"]) > 0.8 and int(row["cached_prompt_tokens"]) > 0


@pytest.mark.parametrize("name", ["fast", "sdk"])
def test_the_answer_comes_the_reasoning_tokens_after_the_first_token(conversations, name):
    (row,) = read_csv(conversations[name] / "run_llm_steps.csv")
    assert int(row["ok"]) > 5 and int(row["errors"]) == 0
    assert int(row["reasoning_tokens"]) == REASONING * int(row["ok"])  # from the usage chunk, exactly
    assert row["tokens_estimated"] == "False"
    # the simulator's truth: the first answer token is REASONING decode steps after the first token, and each
    # step is one ITL gap; the bounds are the step's own median and p99 gap
    delay = float(row["answer_ttft_p50_ms"]) - float(row["ttft_p50_ms"])
    assert REASONING * float(row["itl_p50_ms"]) * 0.85 <= delay <= REASONING * float(row["itl_p99_ms"]) * 1.1, row


def test_locust_shows_the_answer_ttft_as_its_own_row(conversations):
    rows = {r["Type"]: r for r in read_csv(conversations["fast"] / "run_stats.csv")}
    assert {"TTFT", "TTFA", "ITL", "E2E"} <= set(rows)
    assert float(rows["TTFA"]["Median Response Time"]) > float(rows["TTFT"]["Median Response Time"]) + 200


def test_a_shared_cached_prefix_saves_kv_memory_not_only_prefill(hinted):
    (off, off_meta), (on, on_meta) = hinted["off"], hinted["on"]
    assert float(off["cache_hit_share"]) == 0 and float(on["cache_hit_share"]) > 0.8
    # unmarked, every sequence holds the whole prompt: two fit in the cache; marked, the prefix is held once
    knee_off, knee_on = off_meta["simulator"]["saturation_users"], on_meta["simulator"]["saturation_users"]
    assert knee_off <= 3 < 8 <= knee_on, (knee_off, knee_on)
    assert float(on["output_tok_s"]) > 2.5 * float(off["output_tok_s"]), (on, off)
    assert float(on["ttft_p50_ms"]) * 4 < float(off["ttft_p50_ms"])


def test_a_malformed_multi_turn_file_names_the_file_and_line(tmp_path):
    bad = tmp_path / "convs.jsonl"
    bad.write_text('{"turns": ["hello", "and then?"]}\n{"turns": ["ok", ""]}\n')
    proc = run_locust("--headless", "--prompts", str(bad), "--steps", "2", "--step-duration", "2s", cwd=tmp_path)
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if "error" in line]
    assert errors and f"--prompts {bad}: line 2: 'turns' must be a non-empty list of user messages" in errors[0]
    assert "Traceback" not in proc.stderr


def test_the_report_draws_ttft_by_turn_in_a_real_browser(conversations, tmp_path):
    from tests.integration.test_report_browser import chromium, headless

    report = conversations["fast"] / "run_llm_report.html"
    proc = headless(chromium(), tmp_path / "profile", "--dump-dom", report.as_uri())
    status = re.search(r'id="render-status">([^<]*)<', proc.stdout)
    assert status, proc.stderr[-2000:]
    # TTFT, ITL, throughput, the server's evidence, outcomes, TTFT by turn, timeline
    assert status.group(1) == "rendered 7 charts, 0 errors"
    assert "Time to first token by conversation turn" in proc.stdout
