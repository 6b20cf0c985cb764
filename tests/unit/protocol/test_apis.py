"""Each API's body and its events, read into the same chunk fields, against the formats each publishes."""

import orjson
import pytest

from locust_llm.protocol import api_chat, api_completions, api_messages, api_responses
from locust_llm.protocol.apis import API_NAMES, api_for
from locust_llm.protocol.metrics import RequestResult, ratelimit_headers
from locust_llm.protocol.sse import DONE_CHUNK, EMPTY_CHUNK, REASONING_CHUNK, TOKEN_CHUNK, MalformedChunk

MESSAGES = [
    {"role": "system", "content": "be brief", "cache_control": {"type": "ephemeral"}},
    {"role": "user", "content": "hello"},
    {"role": "assistant", "content": "hi"},
    {"role": "user", "content": "again"},
]


def test_every_api_is_named_and_an_unknown_name_lists_the_choices():
    assert API_NAMES == ("chat", "responses", "messages", "completions")
    with pytest.raises(ValueError, match="unknown API 'grpc': choose one of chat, responses, messages, completions"):
        api_for("grpc")


def test_each_body_carries_the_messages_the_length_and_the_stream_in_its_api_s_fields():
    chat = orjson.loads(api_chat.API.body("m", MESSAGES, 64, None, False))
    assert (
        chat["messages"] == MESSAGES and chat["max_tokens"] == 64 and chat["stream_options"] == {"include_usage": True}
    )
    responses = orjson.loads(api_responses.API.body("m", MESSAGES, 64, None, False))
    assert responses == {"model": "m", "input": MESSAGES, "max_output_tokens": 64, "stream": True, "store": False}
    messages = orjson.loads(api_messages.API.body("m", MESSAGES, 64, None, False))
    assert messages["messages"] == MESSAGES[1:] and messages["max_tokens"] == 64 and messages["stream"] is True
    assert messages["system"] == [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}]
    plain = orjson.loads(api_messages.API.body("m", [{"role": "system", "content": "s"}, MESSAGES[1]], 8, None, False))
    assert plain["system"] == "s"
    completions = orjson.loads(api_completions.API.body("m", MESSAGES, 64, None, False))
    assert completions["prompt"] == "be brief\n\nhello\n\nhi\n\nagain" and completions["max_tokens"] == 64


@pytest.mark.parametrize("name", API_NAMES)
def test_exact_lengths_and_extra_fields_are_merged_alike_in_every_api(name):
    api = api_for(name)
    body = orjson.loads(api.body("m", MESSAGES[1:2], 32, {"store": True, "stream_options": None, "top_p": 0.5}, True))
    assert (body["min_tokens"], body["ignore_eos"], body["top_p"]) == (32, True, 0.5)
    assert "stream_options" not in body
    if name == "responses":
        assert body["store"] is True  # the user may keep what a load test stores


def test_the_key_goes_in_each_api_s_own_header():
    assert api_chat.API.auth_headers("sk-1") == {"Authorization": "Bearer sk-1"}
    assert api_messages.API.auth_headers("sk-1") == {"x-api-key": "sk-1", "anthropic-version": "2023-06-01"}
    assert api_messages.API.auth_headers(None) == {"anthropic-version": "2023-06-01"}


def event(obj):
    return orjson.dumps(obj)


def test_responses_events():
    parse = api_responses.parse_event
    assert parse(event({"type": "response.output_text.delta", "delta": "Hi", "sequence_number": 4})) is TOKEN_CHUNK
    assert parse(event({"type": "response.output_text.delta", "delta": ""})) is EMPTY_CHUNK
    arguments = parse(event({"type": "response.function_call_arguments.delta", "delta": '{"a'}))
    assert arguments.has_token and arguments.tool_call and arguments.arguments == '{"a'
    assert parse(event({"type": "response.reasoning_summary_text.delta", "delta": "hmm"})) is REASONING_CHUNK
    assert parse(event({"type": "response.reasoning_text.delta", "delta": "hmm"})) is REASONING_CHUNK
    for kind in ("response.created", "response.output_item.added", "response.content_part.done", "response.new.kind"):
        assert parse(event({"type": kind, "response": {}})) is EMPTY_CHUNK
    usage = {
        "input_tokens": 40,
        "input_tokens_details": {"cached_tokens": 32},
        "output_tokens": 9,
        "output_tokens_details": {"reasoning_tokens": 4},
    }
    end = parse(event({"type": "response.completed", "response": {"status": "completed", "usage": usage}}))
    assert end.done and end.finish_reason == "completed"
    assert (end.prompt_tokens, end.cached_tokens, end.completion_tokens, end.reasoning_tokens) == (40, 32, 9, 4)
    cut = {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "usage": usage}
    assert parse(event({"type": "response.incomplete", "response": cut})).finish_reason == "max_output_tokens"
    failed = parse(
        event({"type": "response.failed", "response": {"error": {"code": "server_error", "message": "boom"}}})
    )
    assert failed.error == "boom (code server_error)" and failed.error_status is None
    limited = parse(event({"type": "error", "code": "rate_limit_exceeded", "message": "slow down", "param": None}))
    assert limited.error_status == 429 and "slow down" in limited.error
    for bad in (b"{", b"[1]", b'{"delta": "x"}', b'{"type": "response.completed"}'):
        with pytest.raises(MalformedChunk):
            parse(bad)


def test_messages_events():
    parse = api_messages.parse_event
    start = {"type": "message_start", "message": {"usage": {"input_tokens": 8, "cache_read_input_tokens": 30}}}
    first = parse(event(start))
    assert (first.prompt_tokens, first.cached_tokens, first.completion_tokens) == (38, 30, None)
    delta = {"type": "content_block_delta", "index": 0}
    assert parse(event({**delta, "delta": {"type": "text_delta", "text": "Hi"}})) is TOKEN_CHUNK
    tool_input = parse(event({**delta, "delta": {"type": "input_json_delta", "partial_json": '{"c'}}))
    assert tool_input.has_token and tool_input.tool_call and tool_input.arguments == '{"c'
    assert parse(event({**delta, "delta": {"type": "thinking_delta", "thinking": "so"}})) is REASONING_CHUNK
    assert parse(event({**delta, "delta": {"type": "signature_delta", "signature": "x"}})) is EMPTY_CHUNK
    assert parse(event({"type": "ping"})) is EMPTY_CHUNK
    usage = {"output_tokens": 12, "input_tokens": 8, "cache_read_input_tokens": 30, "cache_creation_input_tokens": 2}
    end = parse(event({"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": usage}))
    assert (end.finish_reason, end.completion_tokens, end.prompt_tokens, end.cached_tokens) == (
        "max_tokens",
        12,
        40,
        30,
    )
    assert parse(event({"type": "message_stop"})) is DONE_CHUNK
    overloaded = parse(event({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}))
    assert overloaded.error == "Overloaded" and overloaded.error_status is None
    limited = parse(event({"type": "error", "error": {"type": "rate_limit_error", "message": "cap"}}))
    assert limited.error_status == 429
    with pytest.raises(MalformedChunk):
        parse(event({"type": "content_block_delta", "delta": "x"}))


def test_completions_chunks():
    parse = api_completions.parse_chunk
    assert parse(event({"choices": [{"index": 0, "text": "Hi", "finish_reason": None}]})) is TOKEN_CHUNK
    assert parse(event({"choices": [{"index": 0, "text": "", "finish_reason": None}]})) is EMPTY_CHUNK
    assert parse(event({"choices": [{"index": 0, "text": "", "finish_reason": "length"}]})).finish_reason == "length"
    usage = parse(event({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3}}))
    assert (usage.prompt_tokens, usage.completion_tokens) == (5, 3)
    assert parse(b"[DONE]") is DONE_CHUNK
    assert parse(event({"error": {"message": "Rate limit reached", "code": 429}})).error_status == 429
    with pytest.raises(MalformedChunk):
        parse(event({"choices": "x"}))


@pytest.mark.parametrize(
    "name, data, text",
    [
        ("responses", {"type": "response.output_text.delta", "delta": 'a "b"'}, 'a "b"'),
        ("responses", {"type": "response.function_call_arguments.delta", "delta": "{}"}, ""),
        ("messages", {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "é\n"}}, "é\n"),
        ("messages", {"type": "content_block_delta", "delta": {"type": "input_json_delta", "partial_json": "{"}}, ""),
        ("completions", {"choices": [{"index": 0, "text": "x\ty"}]}, "x\ty"),
    ],
)
def test_the_reply_text_is_the_answer_s_own(name, data, text):
    assert orjson.loads(api_for(name).text_json(orjson.dumps(data))) == text


def test_a_529_is_acted_on_as_a_503_and_anthropic_s_rate_limit_headers_are_read():
    assert RequestResult(model="m", intended_ns=0, sent_ns=0, http_status=529).status == 503
    head = {"anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-tokens-remaining": "1000"}
    assert ratelimit_headers(lambda name: head.get(name, "")) == (50, None, None, 1000)


def test_a_responses_stream_names_its_response_for_the_next_turn():
    created = {"type": "response.created", "response": {"id": "resp_42", "status": "in_progress"}}
    assert api_responses.parse_event(event(created)).response_id == "resp_42"
    assert api_responses.parse_event(event({"type": "response.created", "response": {}})) is EMPTY_CHUNK


def test_a_tool_call_is_its_start_then_its_arguments_in_every_api():
    from locust_llm.protocol.sse import parse_chunk

    start = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}
    chat_start = parse_chunk(event({"choices": [{"index": 0, "delta": {"tool_calls": [start]}}]}))
    piece = {"index": 0, "function": {"arguments": '{"city"'}}
    chat_piece = parse_chunk(event({"choices": [{"index": 0, "delta": {"tool_calls": [piece]}}]}))
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather", "arguments": ""}
    responses_start = api_responses.parse_event(event({"type": "response.output_item.added", "item": item}))
    responses_piece = api_responses.parse_event(
        event({"type": "response.function_call_arguments.delta", "delta": '{"city"'})
    )
    block = {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {}}
    messages_start = api_messages.parse_event(
        event({"type": "content_block_start", "index": 0, "content_block": block})
    )
    messages_piece = api_messages.parse_event(
        event({"type": "content_block_delta", "delta": {"type": "input_json_delta", "partial_json": '{"city"'}})
    )
    for first, then in ((chat_start, chat_piece), (responses_start, responses_piece), (messages_start, messages_piece)):
        assert first.tool_call and not first.has_token and (first.tool_id, first.tool_name) == ("call_1", "get_weather")
        assert then.tool_call and then.has_token and then.arguments == '{"city"' and then.tool_id is None
    message_item = {"type": "message", "id": "msg_1"}
    assert api_responses.parse_event(event({"type": "response.output_item.added", "item": message_item})) is EMPTY_CHUNK
