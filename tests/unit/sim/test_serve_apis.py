"""The simulator's APIs: each request taken in chat form (the same engine serves all four), refused as each API
refuses it."""

import orjson
import pytest

from locust_llm.protocol.tokens import estimate_prompt_tokens
from locust_llm.sim import serve_completions, serve_messages, serve_responses
from locust_llm.sim.request import BadRequest, parse_chat_request
from locust_llm.sim.server import _anthropic_headers

CONTEXTS = {"m": 4096}


def chat(body):
    return parse_chat_request(orjson.dumps(body), CONTEXTS)


def test_a_responses_request_is_its_input_as_messages():
    given = [{"role": "user", "content": [{"type": "input_text", "text": "hello"}]}]
    body = {"model": "m", "input": given, "instructions": "be brief", "max_output_tokens": 9, "stream": True}
    request = chat(serve_responses.as_chat(body))
    assert request.messages == [{"role": "system", "content": "be brief"}, given[0]]
    assert (request.max_tokens, request.stream, request.include_usage) == (9, True, True)
    assert request.prompt_tokens == estimate_prompt_tokens(request.messages)
    text = chat(serve_responses.as_chat({"model": "m", "input": "hi", "stream": True}))
    assert text.messages == [{"role": "user", "content": "hi"}]
    pinned = serve_responses.as_chat({"model": "m", "input": "hi", "max_output_tokens": 8, "min_tokens": 8})
    assert chat(pinned).min_tokens == 8
    for bad in (
        {"model": "m"},
        {"model": "m", "input": [3]},
        {"model": "m", "input": "x", "previous_response_id": "r"},
    ):
        with pytest.raises(BadRequest):
            serve_responses.as_chat(bad)


def test_a_messages_request_needs_its_version_and_max_tokens_and_puts_the_system_first():
    body = {"model": "m", "max_tokens": 5, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    system = [{"type": "text", "text": "rules", "cache_control": {"type": "ephemeral"}}]
    request = chat(serve_messages.as_chat({**body, "system": system}, "2023-06-01"))
    assert request.messages[0] == {"role": "system", "content": "rules", "cache_control": {"type": "ephemeral"}}
    assert chat(serve_messages.as_chat({**body, "system": "s"}, "2023-06-01")).messages[0]["content"] == "s"
    with pytest.raises(BadRequest, match="anthropic-version: header is required"):
        serve_messages.as_chat(body, None)
    with pytest.raises(BadRequest, match="max_tokens"):
        serve_messages.as_chat({k: v for k, v in body.items() if k != "max_tokens"}, "2023-06-01")


def test_a_completions_request_is_its_prompt_as_one_message():
    request = chat(serve_completions.as_chat({"model": "m", "prompt": ["a", "b"], "max_tokens": 3}))
    assert request.messages == [{"role": "user", "content": "ab"}] and request.max_tokens == 3
    with pytest.raises(BadRequest):
        serve_completions.as_chat({"model": "m"})


def test_the_messages_api_states_its_caps_under_anthropic_s_names():
    renamed = _anthropic_headers(lambda key: {"x-ratelimit-limit-requests": "4", "x-ratelimit-remaining-tokens": "9"})
    assert renamed("k") == {"anthropic-ratelimit-requests-limit": "4", "anthropic-ratelimit-tokens-remaining": "9"}


def test_a_responses_request_chained_to_a_kept_response_carries_its_history():
    kept = {"resp_1": [{"role": "user", "content": "first"}, {"role": "assistant", "content": "answer"}]}
    body = {"model": "m", "input": [{"role": "user", "content": "second"}], "previous_response_id": "resp_1"}
    request = chat(serve_responses.as_chat(body, kept.get))
    assert [m["content"] for m in request.messages] == ["first", "answer", "second"]
    with pytest.raises(BadRequest, match="Previous response with id 'resp_9' not found"):
        serve_responses.as_chat({**body, "previous_response_id": "resp_9"}, kept.get)
