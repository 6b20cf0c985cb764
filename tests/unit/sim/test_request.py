import orjson
import pytest

from locust_llm.sim.prefix import prefix_key
from locust_llm.sim.request import BadRequest, parse_chat_request
from locust_llm.tokens import estimate_prompt_tokens

CONTEXTS = {"m": 100}
USER = {"role": "user", "content": "x" * 40}  # 10 tokens + 4 + 3 = 17 prompt tokens


def parse(body, mode="auto"):
    return parse_chat_request(orjson.dumps(body) if not isinstance(body, bytes) else body, CONTEXTS, mode)


def test_a_streaming_request_with_usage():
    chat = parse({"model": "m", "messages": [USER], "max_tokens": 8, "stream": True,
                  "stream_options": {"include_usage": True}})  # fmt: skip
    assert (chat.model, chat.max_tokens, chat.stream, chat.include_usage) == ("m", 8, True, True)
    assert chat.prompt_tokens == estimate_prompt_tokens([USER]) == 17
    assert chat.prefix_key is None and chat.prefix_tokens == 0


def test_defaults_and_max_completion_tokens():
    chat = parse({"model": "m", "messages": [USER]})
    assert (chat.max_tokens, chat.stream, chat.include_usage) == (16, False, False)
    assert parse({"model": "m", "messages": [USER], "max_completion_tokens": 5, "max_tokens": 9}).max_tokens == 5


def test_a_system_prompt_is_a_cached_prefix():
    system = {"role": "system", "content": "y" * 20}
    chat = parse({"model": "m", "messages": [system, USER]})
    assert chat.prefix_key == prefix_key([system]) and chat.prefix_tokens == 5 + 4  # its text and its message
    assert parse({"model": "m", "messages": [system, USER]}, mode="off").prefix_key is None


@pytest.mark.parametrize(
    ("body", "status", "param", "message"),
    [
        (b"{not json", 400, None, "could not parse the JSON body"),
        (b"[1]", 400, None, "must be a JSON object"),
        ({"model": "m"}, 400, "messages", "'messages' is a required property"),
        ({"model": "m", "messages": []}, 400, "messages", "non-empty array"),
        ({"model": "m", "messages": ["hi"]}, 400, "messages", "array of objects"),
        ({"messages": [USER]}, 400, "model", "'model' is a required property"),
        ({"model": "gpt-9", "messages": [USER]}, 404, "model", "The model 'gpt-9' does not exist"),
        ({"model": "m", "messages": [USER], "max_tokens": 0}, 400, "max_tokens", "must be an integer >= 1"),
        ({"model": "m", "messages": [USER], "max_tokens": True}, 400, "max_tokens", "must be an integer >= 1"),
        ({"model": "m", "messages": [USER], "stream": "yes"}, 400, "stream", "must be a boolean"),
        ({"model": "m", "messages": [USER], "max_tokens": 84}, 400, "messages", "maximum context length is 100"),
    ],
)
def test_bad_requests_are_answered_like_the_api(body, status, param, message):
    with pytest.raises(BadRequest) as info:
        parse(body)
    assert (info.value.status, info.value.param) == (status, param) and message in str(info.value)


def test_the_context_limit_is_inclusive():
    assert parse({"model": "m", "messages": [USER], "max_tokens": 83}).max_tokens == 83  # 17 + 83 = 100
    with pytest.raises(BadRequest) as info:
        parse({"model": "m", "messages": [USER], "max_tokens": 84})
    assert info.value.code == "context_length_exceeded"
