import orjson
import pytest

from locust_llm.protocol.tokens import estimate_prompt_tokens
from locust_llm.sim.prefix import chain_keys, next_key, prefix_key
from locust_llm.sim.request import BadRequest, parse_chat_request

CONTEXTS = {"m": 100}
USER = {"role": "user", "content": "x" * 40}  # 10 tokens + 4 + 3 = 17 prompt tokens


def parse(body, mode="auto"):
    return parse_chat_request(orjson.dumps(body) if not isinstance(body, bytes) else body, CONTEXTS, mode)


def test_a_streaming_request_with_usage():
    chat = parse(
        {"model": "m", "messages": [USER], "max_tokens": 8, "stream": True, "stream_options": {"include_usage": True}}
    )
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


def test_every_earlier_boundary_is_a_lookup_in_auto_mode_longest_first():
    system = {"role": "system", "content": "s" * 40}
    turn = [system, USER, {"role": "assistant", "content": "a" * 8}, {"role": "user", "content": "next"}]
    chat = parse({"model": "m", "messages": turn})
    keys = chain_keys(turn)
    assert [k for k, _ in chat.lookups] == [keys[2], keys[1], keys[0]]
    assert [t for _, t in chat.lookups] == [14 + 14 + 6, 14 + 14, 14]  # 4 per message plus its text's tokens
    assert chat.history == (keys[3], 14 + 14 + 6 + 5)
    assert chat.prefix_key == keys[0] and chat.prefix_tokens == 14  # the shared part: the system prompt
    hint = parse({"model": "m", "messages": turn}, mode="hint")
    assert hint.lookups == () and hint.history is None and hint.prefix_key is None


def test_the_next_turn_finds_the_history_the_reply_completed():
    """The simulator caches (request + its reply) under next_key; the next turn's lookups contain that key."""
    first = [{"role": "user", "content": "q1"}]
    chat = parse({"model": "m", "messages": first})
    reply = " the of and"
    cached = next_key(chat.history[0], {"role": "assistant", "content": reply})
    second = parse(
        {"model": "m", "messages": [*first, {"role": "assistant", "content": reply}, {"role": "user", "content": "q2"}]}
    )
    assert second.lookups[0] == (cached, chat.history[1] + 4 + 3)
