import json
import random
import re
import statistics

import pytest

from locust_llm.workload.prompts import (
    Length,
    PromptError,
    Workload,
    estimate_prompt_tokens,
    load_prompts,
    parse_length,
    synthetic_text,
)


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_plain_text_one_prompt_per_line(tmp_path):
    prompts = load_prompts(write(tmp_path, "p.txt", "first\n\n  second  \n"))
    assert [p.messages[0]["content"] for p in prompts] == ["first", "second"]


def test_jsonl_messages_prompt_and_max_tokens(tmp_path):
    rows = [
        {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}], "max_tokens": 7},
        {"prompt": "plain"},
    ]
    prompts = load_prompts(write(tmp_path, "p.jsonl", "\n".join(json.dumps(r) for r in rows)))
    assert prompts[0].messages[1]["content"] == "u" and prompts[0].max_tokens == 7
    assert prompts[1].messages == ({"role": "user", "content": "plain"},) and prompts[1].max_tokens is None


def test_sharegpt_keeps_the_turns_up_to_the_last_human_one(tmp_path):
    data = [
        {
            "conversations": [
                {"from": "system", "value": "s"},
                {"from": "human", "value": "q1"},
                {"from": "gpt", "value": "a1"},
                {"from": "human", "value": "q2"},
                {"from": "gpt", "value": "a2"},
            ]
        },
        {"conversations": [{"from": "human", "value": "only"}]},
    ]
    multi, single = load_prompts(write(tmp_path, "p.json", json.dumps(data)))
    assert [m["role"] for m in multi.messages] == ["system", "user", "assistant", "user"]
    assert multi.messages[-1]["content"] == "q2"
    assert multi.turns == ("q1", "q2") and multi.system == ({"role": "system", "content": "s"},)
    assert single.turns == () and single.user_turns == ("only",)


def test_jsonl_turns_are_a_conversation(tmp_path):
    rows = [{"turns": ["q1", {"role": "user", "content": "q2"}], "system": "be brief", "max_tokens": 9}]
    (prompt,) = load_prompts(write(tmp_path, "p.jsonl", json.dumps(rows[0])))
    assert prompt.turns == ("q1", "q2") and prompt.max_tokens == 9
    assert prompt.system == ({"role": "system", "content": "be brief"},)
    assert prompt.messages == ({"role": "system", "content": "be brief"}, {"role": "user", "content": "q2"})


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("p.jsonl", '{"prompt": "ok"}\n{"prompt": \n', "p.jsonl: line 2: invalid JSON"),
        ("p.jsonl", '["a"]\n', "line 1: expected a JSON object, got list"),
        ("p.jsonl", '{"messages": [{"content": "x"}]}\n', "line 1: 'messages' must be a non-empty list"),
        ("p.jsonl", '{"prompt": "x", "max_tokens": 0}\n', "line 1: max_tokens must be an integer >= 1, got 0"),
        ("p.jsonl", '{"text": "x"}\n', "line 1: needs 'messages' (a list), 'prompt' (a string) or 'turns' (a list)"),
        ("p.jsonl", '{"turns": ["a"]}\n{"turns": []}\n', "line 2: 'turns' must be a non-empty list of user messages"),
        ("p.jsonl", '{"turns": ["a", 3]}\n', "line 1: 'turns' must be a non-empty list of user messages"),
        ("p.jsonl", '{"turns": "a"}\n', "line 1: 'turns' must be a non-empty list"),
        ("p.jsonl", '{"turns": ["a"], "system": 5}\n', "line 1: 'system' must be a non-empty string, got 5"),
        ("p.jsonl", '{"turns": [{"role": "assistant", "content": "a"}]}\n', "line 1: 'turns' must be"),
        ("p.json", '{"a": 1}', "expected a JSON list of conversations"),
        ("p.json", '[{"conversations": [{"from": "alien", "value": "x"}]}]', "conversation 0: each turn needs"),
        ("p.txt", "\n\n", "has no prompts"),
    ],
)
def test_malformed_prompt_files_name_the_file_line_and_problem(tmp_path, name, text, message):
    with pytest.raises(PromptError, match=re.escape(message)) as info:
        load_prompts(write(tmp_path, name, text))
    assert str(info.value).startswith(f"--prompts {tmp_path / name}")


def test_length_distribution_is_within_tolerance_and_deterministic():
    length = parse_length("512:128", "--input-tokens")
    draws = [length.draw(random.Random(f"7:{i}")) for i in range(4000)]
    assert statistics.mean(draws) == pytest.approx(512, rel=0.02)
    assert statistics.stdev(draws) == pytest.approx(128, rel=0.05)
    assert draws == [length.draw(random.Random(f"7:{i}")) for i in range(4000)]
    assert Length(5).draw(random.Random()) == 5 and min(Length(1, 50).draw(random.Random(i)) for i in range(99)) >= 1


@pytest.mark.parametrize("tokens", [1, 16, 512, 3000])
def test_synthetic_text_has_about_the_requested_tokens(tokens):
    text = synthetic_text(tokens, random.Random(1))
    assert estimate_prompt_tokens([{"content": text}]) - 7 == pytest.approx(tokens, abs=1)


def test_salt_system_prompt_and_cache_control():
    workload = Workload(input_tokens=Length(20), system_prompt="Be brief.", cache_control=True)
    messages, max_tokens = workload.messages(random.Random(3))
    assert messages[0] == {"role": "system", "content": "Be brief.", "cache_control": {"type": "ephemeral"}}
    assert messages[1]["content"].startswith("[") and max_tokens == 128  # synthetic prompts are salted
    other, _ = workload.messages(random.Random(4))
    assert other[1]["content"][:14] != messages[1]["content"][:14]
    plain, _ = Workload().messages(random.Random(3))
    assert not plain[0]["content"].startswith("[")  # built-in prompts are not salted by default


def test_a_rows_max_tokens_wins_and_extra_body_is_merged(tmp_path):
    prompts = tuple(load_prompts(write(tmp_path, "p.jsonl", '{"prompt": "x", "max_tokens": 9}\n')))
    workload = Workload(max_tokens=Length(100), prompts=prompts, extra_body={"route": {"x": 1}})
    messages, max_tokens = workload.messages(random.Random(0))
    assert max_tokens == 9
    body = json.loads(workload.body("m2", messages, max_tokens))
    assert body["model"] == "m2" and body["route"] == {"x": 1} and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


def test_a_null_field_of_the_extra_body_is_left_out_of_the_request():
    """For a server that refuses ``stream_options`` (``--extra-body '{"stream_options": null}'``): the field goes, the
    others stay, and a field the body does not have is no error."""
    workload = Workload(extra_body={"stream_options": None, "top_k": 20, "absent": None})
    body = json.loads(workload.body("m", [{"role": "user", "content": "hi"}], 8))
    assert "stream_options" not in body and "absent" not in body and body["top_k"] == 20 and body["stream"] is True


def test_exact_lengths_ask_for_a_minimum_the_extra_body_may_leave_out():
    """``--output-length exact``: ``min_tokens`` (vLLM, SGLang) and ``ignore_eos`` (llama.cpp) ask for every token of
    ``max_tokens``; ``--extra-body '{"ignore_eos": null}'`` leaves one out; cap sends neither."""
    messages = [{"role": "user", "content": "hi"}]
    exact = json.loads(Workload().body("m", messages, 24, None, exact=True))
    assert exact["max_tokens"] == exact["min_tokens"] == 24 and exact["ignore_eos"] is True
    capped = json.loads(Workload().body("m", messages, 24))
    assert "min_tokens" not in capped and "ignore_eos" not in capped
    left_out = json.loads(Workload(extra_body={"ignore_eos": None}).body("m", messages, 24, None, exact=True))
    assert left_out["min_tokens"] == 24 and "ignore_eos" not in left_out
