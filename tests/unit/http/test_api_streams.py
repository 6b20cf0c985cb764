"""The Responses, Messages and completions streams, as the simulator writes them, through every reader (the pump,
the library's parser, the readline loop: ``test_pump.both``) over real loopback sockets: the same figures as a chat
stream, and the hostile endings of chat (no end event, a malformed event, errors in the stream, a reset, a stall)."""

import random

import orjson
import pytest

import locust_llm.http.pump as pump_module
from locust_llm.protocol.apis import api_for
from locust_llm.protocol.metrics import Outcome
from locust_llm.sim.chunks import ChunkFormat
from locust_llm.sim.serve_completions import CompletionsFormat
from locust_llm.sim.serve_messages import MessagesFormat
from locust_llm.sim.serve_responses import ResponsesFormat
from tests.unit.http.test_pump import END, HEAD, Script, both, frame, shipped, timed

FORMATS = {"responses": ResponsesFormat, "messages": MessagesFormat, "completions": CompletionsFormat}
WORDS = ("He", "llo", ' "wor"', "ld")
PROMPT, CACHED = 40, 32


def events(name, words=WORDS, done=True, reasoning=0, tool=None):
    """The simulator's events of one answer of ``words`` (the first ``reasoning`` of them reasoning; with ``tool``,
    a call of it, the words its arguments): the opening, one event per token, the end (``done``: with its end
    event)."""
    fmt = {**FORMATS, "chat": ChunkFormat}[name](7, "m", True, PROMPT, tool)
    out = [fmt.role_chunk()]
    for i, word in enumerate(words):
        head = fmt.reasoning_head if i < reasoning else fmt.head
        tail = fmt.tail + (b"%d}\n\n" % (fmt.FIRST_DELTA + i) if fmt.numbered else b"")
        out.append(head + orjson.dumps(word) + tail)
    out.append(fmt.final_chunks("length", PROMPT, len(words), done, CACHED, reasoning))
    return out


def through(name, pieces, monkeypatch, **kw):
    return both(timed(pieces), monkeypatch, api=api_for(name), **kw)


@pytest.mark.parametrize("name", list(FORMATS))
def test_each_api_gives_the_same_figures_as_chat(monkeypatch, name):
    result = through(name, [HEAD, *map(frame, events(name)), END], monkeypatch)
    assert result.outcome is Outcome.OK and result.error == ""
    assert result.token_ns == [3 * 10**6, 4 * 10**6, 5 * 10**6, 6 * 10**6]  # each token stamped by its own piece
    assert result.reply == 'Hello "wor"ld' and result.completion_tokens == 4 and not result.tokens_estimated
    assert (result.prompt_tokens, result.cached_tokens) == (PROMPT, CACHED)
    assert result.finish_reason == {"responses": "max_output_tokens", "messages": "max_tokens"}.get(name, "length")


@pytest.mark.parametrize("name", ["responses", "messages"])
def test_reasoning_is_timed_apart_from_the_answer(monkeypatch, name):
    result = through(name, [HEAD, *map(frame, events(name, reasoning=2)), END], monkeypatch)
    assert result.outcome is Outcome.OK and result.reasoning_chunks == 2 and result.reply == ' "wor"ld'
    assert result.answer_ns == 5 * 10**6 and result.token_ns[0] == 3 * 10**6  # TTFT the first delta, TTFA the answer
    if name == "responses":
        assert result.reasoning_tokens == 2


@pytest.mark.parametrize("name, seed", [(name, seed) for name in FORMATS for seed in range(3)])
def test_any_split_of_the_bytes_gives_the_same_result_through_every_reader(monkeypatch, name, seed):
    rng = random.Random(seed)
    wire = HEAD + b"".join(map(frame, events(name))) + END
    cuts = sorted(rng.sample(range(1, len(wire)), 12))
    pieces = [wire[a:b] for a, b in zip([0, *cuts], [*cuts, len(wire)], strict=True)]
    result = through(name, pieces, monkeypatch)
    assert result.outcome is Outcome.OK and len(result.token_ns) == 4 and result.reply == 'Hello "wor"ld'


@pytest.mark.parametrize("name", list(FORMATS))
def test_a_token_read_alone_is_taken_in_one_step(monkeypatch, name):
    """The pump's single-token read: an ``event:`` line first for the APIs that name their events, and the digits
    left free for the Responses API, which numbers each event."""
    taken = []
    real = pump_module.is_content_literal
    monkeypatch.setattr(pump_module, "is_content_literal", lambda literal: taken.append(literal) or real(literal))
    script = Script(timed([HEAD, *map(frame, events(name)), END]))
    try:
        result = script.run("own", monkeypatch, api=api_for(name))
    finally:
        script.close()
    assert result.outcome is Outcome.OK and result.reply == 'Hello "wor"ld'
    assert taken == [b'"llo"', b'" \\"wor\\""', b'"ld"']  # the first token teaches


def test_a_numbered_token_event_with_other_bytes_changed_is_parsed_whole(monkeypatch):
    """Only digits may differ from the learned event: another event type with the same length of bytes is no token."""
    opening, first, second, *rest = events("responses")
    other = second.replace(b"output_text", b"output_xext", 2)  # an event type we do not know: nothing measured
    result = through(
        "responses", [HEAD, frame(opening), frame(first), frame(other), *map(frame, rest), END], monkeypatch
    )
    assert result.outcome is Outcome.OK and len(result.token_ns) == 3 and result.reply == 'He "wor"ld'


def test_a_responses_stream_without_its_end_event_is_truncated(monkeypatch):
    result = through("responses", [HEAD, *map(frame, events("responses", done=False)), END], monkeypatch)
    assert result.outcome is Outcome.TRUNCATED and len(result.token_ns) == 4
    assert "stream ended without 'response.completed' or a finish_reason (mid-stream)" in result.error


def test_a_messages_stream_without_message_stop_is_complete_after_its_stop_reason(monkeypatch):
    """As a chat stream without ``[DONE]`` after a finish_reason (older TGI, llama.cpp): ``no_done``."""
    result = through("messages", [HEAD, *map(frame, events("messages", done=False)), END], monkeypatch)
    assert result.outcome is Outcome.OK and result.no_done and result.completion_tokens == 4


@pytest.mark.parametrize("name", ["responses", "messages"])
def test_a_malformed_event_fails_the_attempt(monkeypatch, name):
    opening, first, *_ = events(name)
    bad = b"event: x\ndata: {not json\n\n"
    result = through(name, [HEAD, frame(opening), frame(first), frame(bad), END], monkeypatch)
    assert result.outcome is Outcome.MALFORMED and len(result.token_ns) == 1
    assert result.error.startswith("malformed stream: invalid JSON in stream event")


FAILED = {"type": "response.failed", "response": {"error": {"code": "server_error", "message": "boom"}}}
ERRORS = {
    ("responses", "failed"): (FAILED, Outcome.STREAM_ERROR),
    ("responses", "rate limit"): ({"type": "error", "code": "rate_limit_exceeded", "message": "s"}, Outcome.HTTP_429),
    ("messages", "overloaded"): ({"type": "error", "error": {"type": "overloaded_error"}}, Outcome.STREAM_ERROR),
    ("messages", "rate limit"): ({"type": "error", "error": {"type": "rate_limit_error"}}, Outcome.HTTP_429),
}


@pytest.mark.parametrize("name, kind", list(ERRORS))
def test_an_error_event_in_the_stream_is_counted_as_chat_s(monkeypatch, name, kind):
    obj, outcome = ERRORS[name, kind]
    opening, first, *_ = events(name)
    error = b"event: " + obj["type"].encode() + b"\ndata: " + orjson.dumps(obj) + b"\n\n"
    result = through(name, [HEAD, frame(opening), frame(first), frame(error), END], monkeypatch)
    assert result.outcome is outcome and result.error.startswith("error in stream: ") and len(result.token_ns) == 1
    assert result.status == (429 if outcome is Outcome.HTTP_429 else 200)


@pytest.mark.parametrize("name", ["responses", "messages"])
def test_a_reset_mid_stream_is_a_connection_error(monkeypatch, name):
    opening, first, *_ = events(name)
    result = through(name, [HEAD, frame(opening), frame(first), None], monkeypatch)
    assert result.outcome is Outcome.CONNECTION and len(result.token_ns) == 1


@pytest.mark.parametrize("name", ["responses", "messages"])
def test_a_stalled_stream_times_out(monkeypatch, name):
    opening, first, *_ = events(name)
    script = Script(timed([HEAD, frame(opening), frame(first), "stall"]))
    try:
        result = script.run("own", monkeypatch, timeout_s=0.3, api=api_for(name))
    finally:
        script.close()
    assert result.outcome is Outcome.TIMEOUT and len(result.token_ns) == 1


def test_a_529_is_a_5xx_acted_on_as_a_503(monkeypatch):
    head = b"HTTP/1.1 529 Overloaded\r\nContent-Type: application/json\r\nRetry-After: 2\r\nContent-Length: 2\r\n\r\n{}"
    result = shipped(timed([head]), monkeypatch)
    assert result.outcome is Outcome.HTTP_5XX and result.status == 503 and result.retry_after_s == 2


def test_tool_calls_are_counted_timed_as_answer_tokens_and_kept_for_a_conversation(monkeypatch):
    def sse_event(obj):
        return b"event: " + obj["type"].encode() + b"\ndata: " + orjson.dumps(obj) + b"\n\n"

    block = {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}}
    pieces = [
        sse_event({"type": "message_start", "message": {"usage": {"input_tokens": 9, "output_tokens": 1}}}),
        sse_event({"type": "content_block_start", "index": 0, "content_block": block}),
        *(
            sse_event(
                {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": p}}
            )
            for p in ('{"q": ', '"x"', "}")
        ),
        sse_event({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 3}}),
        sse_event({"type": "message_stop"}),
    ]
    result = through("messages", [HEAD, *map(frame, pieces), END], monkeypatch)
    assert result.outcome is Outcome.OK and result.finish_reason == "tool_use"
    assert (result.tool_calls, result.tool_call_chunks, len(result.token_ns)) == (1, 3, 3)
    assert result.answer_ns == result.token_ns[0] == 4 * 10**6  # TTFT: the first piece of arguments (4th piece)
    assert result.tools == [{"id": "toolu_1", "name": "lookup", "arguments": '{"q": "x"}'}]


@pytest.mark.parametrize("name", ["chat", "responses", "messages"])
def test_the_simulator_s_tool_calls_are_read_as_calls_in_every_api(monkeypatch, name):
    result = through(name, [HEAD, *map(frame, events(name, tool="lookup")), END], monkeypatch)
    assert result.outcome is Outcome.OK and (result.tool_calls, result.tool_call_chunks) == (1, 4)
    assert result.reply == "" and len(result.token_ns) == 4 and result.completion_tokens == 4
    assert result.tools == [{"id": "call_000000000007", "name": "lookup", "arguments": 'Hello "wor"ld'}]
    assert result.finish_reason == {"chat": "tool_calls", "responses": "completed", "messages": "tool_use"}[name]
