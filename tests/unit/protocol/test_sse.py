import json

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from locust_llm.protocol.sse import (
    ChatChunk,
    MalformedChunk,
    SSEDecoder,
    SSEEvent,
    content_json,
    parse_chunk,
    reply_text,
)


def decode_all(*chunks: bytes) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events = []
    for chunk in chunks:
        events += decoder.feed(chunk)
    return events + decoder.finish()


def test_one_event_per_blank_line():
    assert decode_all(b"data: a\n\ndata: b\n\n") == [SSEEvent(b"a"), SSEEvent(b"b")]


def test_crlf_and_lone_cr_line_endings():
    assert decode_all(b"data: a\r\n\r\ndata: b\r\rdata: c\n\n") == [
        SSEEvent(b"a"),
        SSEEvent(b"b"),
        SSEEvent(b"c"),
    ]


def test_crlf_split_between_feeds_is_one_line_ending():
    assert decode_all(b"data: a\r", b"\n", b"\r\n") == [SSEEvent(b"a")]


def test_comments_are_ignored():
    assert decode_all(b": keep-alive\n\n: ping\ndata: x\n\n") == [SSEEvent(b"x")]


def test_multi_line_data_is_joined_with_newlines():
    assert decode_all(b"data: line1\ndata: line2\ndata\n\n") == [SSEEvent(b"line1\nline2\n")]


def test_event_and_id_fields():
    assert decode_all(b"event: error\nid: 7\ndata: {}\n\n") == [SSEEvent(b"{}", "error", "7")]


def test_only_one_leading_space_is_dropped():
    assert decode_all(b"data:  two\n\ndata:none\n\n") == [SSEEvent(b" two"), SSEEvent(b"none")]


def test_event_without_data_is_not_dispatched():
    assert decode_all(b"event: ping\n\n\n\n") == []


def test_finish_dispatches_an_unterminated_last_event():
    decoder = SSEDecoder()
    assert decoder.feed(b"data: [DONE]") == []
    assert decoder.finish() == [SSEEvent(b"[DONE]")]


def test_feed_line_accepts_lines_with_their_terminator():
    decoder = SSEDecoder()
    assert decoder.feed_line(b"data: x\r\n") is None
    assert decoder.feed_line(b"\r\n") == SSEEvent(b"x")


STREAM = (
    b": comment\r\n"
    b'data: {"a": 1}\n\n'
    b"event: e\r\nid: 9\r\ndata: l1\r\ndata: l2\r\n\r\n"
    b"data: \xf0\x9f\x98\x80 emoji\r\r"
    b"data: [DONE]\n\n"
)


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
def test_any_split_of_a_byte_stream_yields_the_same_events(cuts):
    points = sorted(set(cuts))
    pieces = [STREAM[a:b] for a, b in zip([0, *points], [*points, len(STREAM)], strict=True)]
    assert decode_all(*pieces) == decode_all(STREAM)
    assert len(decode_all(STREAM)) == 4


@given(st.binary(max_size=200), st.lists(st.integers(min_value=0, max_value=200), max_size=8))
def test_any_split_of_arbitrary_bytes_yields_the_same_events(data, cuts):
    points = sorted({c for c in cuts if c <= len(data)})
    pieces = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    assert decode_all(*pieces) == decode_all(data)


def chunk(delta=None, finish=None, usage=None, choices=True):
    obj = {"id": "c1", "object": "chat.completion.chunk", "model": "m"}
    obj["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish}] if choices else []
    if usage is not None:
        obj["usage"] = usage
    return orjson.dumps(obj)


def test_content_delta_is_a_token():
    assert parse_chunk(chunk({"content": "Hi"})) == ChatChunk(has_token=True)


def test_role_only_first_chunk_is_not_a_token():
    assert parse_chunk(chunk({"role": "assistant", "content": ""})) == ChatChunk()


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning", "tool_calls"])
def test_reasoning_and_tool_call_deltas_are_tokens(field):
    value = [{"index": 0, "function": {"arguments": "{"}}] if field == "tool_calls" else "thinking"
    assert parse_chunk(chunk({field: value})).has_token


def test_a_tool_call_s_start_without_arguments_is_no_token_but_a_call():
    start = [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}}]
    parsed = parse_chunk(chunk({"tool_calls": start}))
    assert not parsed.has_token and parsed.tool_call and parsed.tool_name == "f"


def test_finish_reason():
    assert parse_chunk(chunk({}, "length")) == ChatChunk(finish_reason="length")


def test_final_usage_chunk_with_empty_choices():
    parsed = parse_chunk(chunk(usage={"prompt_tokens": 12, "completion_tokens": 34}, choices=False))
    assert (parsed.prompt_tokens, parsed.completion_tokens, parsed.has_token) == (12, 34, False)


def test_null_usage_on_ordinary_chunks_is_ignored():
    assert parse_chunk(chunk({"content": "x"}, usage=None)) == ChatChunk(has_token=True)


def test_done_marker():
    assert parse_chunk(b"[DONE]").done


def test_error_object_inside_the_stream():
    parsed = parse_chunk(b'{"error": {"message": "overloaded", "type": "server_error", "code": 503}}')
    assert parsed.error == "overloaded (code 503)"


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b'{"choices": [', "invalid JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"id": "x"}', "neither 'choices' nor 'usage'"),
        (b'{"choices": {"a": 1}}', "'choices' is not a list"),
    ],
)
def test_malformed_chunks_are_rejected_with_a_readable_message(payload, message):
    with pytest.raises(MalformedChunk, match=message):
        parse_chunk(payload)


def test_a_bare_data_line_is_a_keep_alive_not_an_event():
    decoder = SSEDecoder()
    assert decoder.feed(b"data:\n\ndata: \n\n: ping\n\n") == []
    assert [e.data for e in decoder.feed(b'data: {"a": 1}\n\n')] == [b'{"a": 1}']


def test_cr_only_line_endings_make_the_same_events():
    lf = b'data: {"choices": []}\n\ndata: [DONE]\n\n'
    for stream in (lf, lf.replace(b"\n", b"\r\n"), lf.replace(b"\n", b"\r")):
        decoder = SSEDecoder()
        assert [e.data for e in decoder.feed(stream) + decoder.finish()] == [b'{"choices": []}', b"[DONE]"], stream


def test_whitespace_data_is_ignored_not_malformed():
    assert parse_chunk(b" ") == ChatChunk() and parse_chunk(b"\n") == ChatChunk()


@pytest.mark.parametrize("usage", [b'"12"', b"[1, 2]", b"3"])
def test_a_usage_that_is_not_an_object_is_malformed(usage):
    with pytest.raises(MalformedChunk, match="'usage' is not an object"):
        parse_chunk(b'{"choices": [], "usage": ' + usage + b"}")


@pytest.mark.parametrize(
    "error",
    [
        {"message": "Rate limit reached for requests", "type": "requests", "code": "rate_limit_exceeded"},
        {"message": "slow down", "type": "rate_limit_error"},
        {"message": "Too Many Requests", "status": 429},
        "rate limit exceeded",
    ],
)
def test_a_rate_limit_inside_the_stream_is_a_429(error):
    chunk = parse_chunk(orjson.dumps({"error": error}))
    assert chunk.error and chunk.error_status == 429


def test_an_in_stream_rate_limit_carries_its_retry_after():
    assert parse_chunk(b'{"error": {"code": "rate_limit_exceeded", "retry_after": 2}}').retry_after_s == 2.0
    assert parse_chunk(b'{"error": {"code": "rate_limit_exceeded", "retry_after_ms": 250}}').retry_after_s == 0.25
    assert parse_chunk(b'{"error": {"code": "rate_limit_exceeded", "retry_after": -1}}').retry_after_s is None


def test_other_in_stream_errors_are_not_429s():
    assert parse_chunk(b'{"error": {"message": "engine overloaded", "code": "server_error"}}').error_status is None


@pytest.mark.parametrize(
    ("delta", "reasoning"),
    [
        ({"reasoning_content": "hmm"}, True),
        ({"reasoning": "hmm"}, True),
        ({"content": "answer"}, False),
        ({"tool_calls": [{"index": 0, "function": {"arguments": "{"}}]}, False),
        ({"reasoning_content": "hmm", "content": "answer"}, False),  # an answer token, whatever else it carries
    ],
)
def test_reasoning_deltas_are_told_from_answer_deltas(delta, reasoning):
    parsed = parse_chunk(chunk(delta))
    assert parsed.has_token and parsed.reasoning is reasoning
    multi = orjson.loads(chunk(delta))
    multi["choices"] = [{"index": 1, "delta": {}}, *multi["choices"]]
    parsed = parse_chunk(orjson.dumps(multi))  # the slow path of several choices says the same
    assert parsed.has_token and parsed.reasoning is reasoning


def test_a_usage_chunk_with_cached_and_reasoning_tokens_parses():
    usage = {
        "prompt_tokens": 1200,
        "completion_tokens": 300,
        "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 256},
    }
    parsed = parse_chunk(chunk(usage=usage, choices=False))
    assert (parsed.prompt_tokens, parsed.cached_tokens, parsed.completion_tokens, parsed.reasoning_tokens) == (
        1200,
        1024,
        300,
        256,
    )


@pytest.mark.parametrize(
    "details",
    [{}, {"prompt_tokens_details": None}, {"prompt_tokens_details": {"x": 1}}, {"completion_tokens_details": "n/a"}],
)
def test_a_usage_chunk_without_details_still_works(details):
    parsed = parse_chunk(chunk(usage={"prompt_tokens": 5, "completion_tokens": 6, **details}, choices=False))
    assert (parsed.prompt_tokens, parsed.completion_tokens, parsed.cached_tokens, parsed.reasoning_tokens) == (
        5,
        6,
        None,
        None,
    )


def test_reply_text_joins_the_answer_contents_exactly():
    parts = ["Hel", 'lo, "wor', 'ld"\n', "✓ \\ done"]
    payloads = [chunk({"content": p}) for p in parts] + [chunk({"tool_calls": [{"index": 0}]})]
    assert reply_text([content_json(p) for p in payloads]) == "".join(parts)
    assert reply_text([]) == ""


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(), min_size=1, max_size=8), st.lists(st.booleans(), min_size=8, max_size=8))
def test_reply_text_of_any_contents_in_any_chunk_layout(parts, spaced):
    """The sliced fast path and the parsed one agree with the contents, whatever the text (quotes, backslashes,
    unicode) and whatever the layout (compact, spaced, role first)."""
    payloads = []
    for i, part in enumerate(parts):
        delta = {"role": "assistant", "content": part} if spaced[i] else {"content": part}
        obj = {"id": "c", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        payloads.append(json.dumps(obj).encode() if spaced[(i + 1) % 8] else orjson.dumps(obj))
    assert reply_text([content_json(p) for p in payloads]) == "".join(parts)


# -- TokenShape: a token chunk recognised without parsing it whole ------------------------------------------------

from locust_llm.protocol.sse import TOKEN_CHUNK, TokenShape  # noqa: E402


def token_chunk(content, **extra) -> bytes:
    choice = {"index": 0, "delta": {"content": content}, "logprobs": None, "finish_reason": None}
    obj = {"id": "c1", "object": "chat.completion.chunk", **extra, "choices": [choice]}
    return orjson.dumps(obj)


def learned(template: bytes) -> TokenShape:
    assert parse_chunk(template) is TOKEN_CHUNK
    shape = TokenShape()
    shape.learn(template)
    return shape


def test_the_tokens_of_a_stream_are_recognised_after_the_first():
    shape = learned(token_chunk("Hello"))
    for text in [" world", "\n", 'a "quoted" \\ word', "é😀", "x" * 500]:
        assert shape.content(token_chunk(text)) == orjson.dumps(text) == content_json(token_chunk(text))


@pytest.mark.parametrize(
    "payload",
    [
        token_chunk(""),  # no token: the full parse decides
        token_chunk("a", created=1),  # another shape
        token_chunk("a", finish_reason="stop"),
        token_chunk(None),
        b"[DONE]",
        token_chunk("a")[:-1],
        token_chunk("a").replace(b'"a"', b'"a" '),  # whitespace around the literal
        token_chunk("a").replace(b'"a"', b'"a\\x"'),  # an invalid escape
        token_chunk("a").replace(b'"a"', b'"a","b"'),
        token_chunk("a").replace(b'"a"', b"1"),
    ],
)
def test_anything_else_is_left_to_the_full_parse(payload):
    assert learned(token_chunk("Hello")).content(payload) is None


def test_nothing_is_recognised_before_a_shape_is_learned():
    assert TokenShape().content(token_chunk("a")) is None


literals = st.one_of(
    st.text(max_size=8).map(orjson.dumps),
    st.binary(max_size=8).map(lambda b: b'"' + b + b'"'),
    st.sampled_from([b'""', b'"\\"', b'"\\u00e9"', b'"\\ud800"', b'"a\\nb"', b'"\\\\"', b"null", b'"a"}']),
)


@settings(max_examples=400, deadline=None)
@given(st.text(min_size=1, max_size=6), literals, st.sampled_from([{}, {"created": 7}, {"usage": None}]))
def test_a_recognised_payload_is_a_token_chunk_with_that_literal(first, literal, extra):
    template = token_chunk(first, **extra)
    shape = learned(template)
    at = template.index(b'"content":') + len(b'"content":')
    prefix, suffix = template[:at], template[at + len(orjson.dumps(first)) :]
    payload = prefix + literal + suffix
    got = shape.content(payload)
    if got is not None:
        assert got == literal
        assert parse_chunk(payload) is TOKEN_CHUNK and content_json(payload) == literal
    else:
        try:
            value = orjson.loads(literal)
        except orjson.JSONDecodeError:
            value = None
        assert not (isinstance(value, str) and value), "a valid, non-empty literal must be recognised"


def test_a_numbered_shape_leaves_only_digits_free():
    from locust_llm.protocol.api_responses import DELTA

    def delta(text, number, index=0):
        return orjson.dumps(
            {"type": "response.output_text.delta", "output_index": index, "delta": text, "sequence_number": number}
        )

    shape = TokenShape(DELTA, numbered=True)
    shape.learn(delta("a", 3))
    assert shape.content(delta('b "c"', 1234)) == b'"b \\"c\\""'
    assert shape.content(delta("d", 5, index=12)) == b'"d"'
    assert shape.content(delta("", 6)) is None  # no text: for the full parse
    assert shape.content(delta("e", 7).replace(b"output_text", b"reasoning_t")) is None
    assert shape.content(delta("e", 7).replace(b'"e"', b'"e" ')) is None
    exact = TokenShape(DELTA)
    exact.learn(delta("a", 3))
    assert exact.content(delta("b", 4)) is None and exact.content(delta("b", 3)) == b'"b"'
