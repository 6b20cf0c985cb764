import errno

import gevent
import orjson
import pytest
from geventhttpclient.response import HTTPConnectionClosed

from locust_llm.http.stream import run_stream
from locust_llm.protocol.metrics import Outcome


class FakeResponse:
    """A response whose body is ``lines``, one per read: by ``readline`` (scripted clocks) or, as the real clock's loop
    reads it, by its socket's ``recv`` into ``feed`` (an exception is raised, a callable called, by either)."""

    def __init__(self, status=200, headers=None, lines=(), body=b""):
        self.status_code = status
        self.status_message = {200: "OK", 401: "Unauthorized", 429: "Too Many Requests"}.get(status, "")
        self.headers = {k.lower(): v for k, v in (headers or {"Content-Type": "text/event-stream"}).items()}
        self.lines = list(lines)
        self.body = body
        self.released = False
        self._body_buffer = bytearray()
        self.message_complete = False
        self.block_size = 65536
        self._sock = self

    def get(self, name):
        return self.headers.get(name.lower())

    def readline(self, sep):
        assert sep == b"\n"
        return self.recv(self.block_size)

    def recv(self, _size):
        if not self.lines:
            return b""
        item = self.lines.pop(0)
        if isinstance(item, BaseException):
            raise item
        if callable(item):
            return item()
        return item

    def feed(self, data):
        self.message_complete = self.message_complete or not data
        self._body_buffer.extend(data)

    def read(self, n):
        return self.body[:n]

    def release(self):
        self.released = True


class FakeHTTP:
    def __init__(self, response=None, error=None):
        self.response, self.error, self.calls = response, error, []

    def request(self, method, uri, body, headers):
        self.calls.append((method, uri, body, headers))
        if self.error:
            raise self.error
        return self.response


def clock_from(values):
    it = iter(values)
    return lambda: next(it)


def sse(obj):
    return [b"data: " + (obj if isinstance(obj, bytes) else orjson.dumps(obj)) + b"\n", b"\n"]


def content(text):
    return sse({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]})


ROLE = sse({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]})
FINISH = sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
USAGE = sse({"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 3}})
DONE = sse(b"[DONE]")


def run(response=None, error=None, clock=None, **kw):
    http = FakeHTTP(response, error)
    kw.setdefault("secrets", ("sk-test-SECRET",))
    result = run_stream(
        http,
        "/v1/chat/completions",
        b"{}",
        {},
        model="m",
        timeout_s=5,
        intended_ns=0,
        clock=clock or clock_from(range(0, 10**9, 1000)),
        **kw,
    )
    return result, http


def test_a_complete_stream_is_timed_per_token_with_usage():
    lines = ROLE + content("a") + content("b") + content("c") + FINISH + USAGE + DONE
    # clock: sent, then one reading per dispatched event (role, a, b, c, finish, usage, done)
    clock = clock_from([0, 50, 200, 220, 245, 246, 247, 250])
    response = FakeResponse(lines=lines)
    result, http = run(response, clock=clock)
    assert result.outcome is Outcome.OK and result.error == ""
    assert result.token_ns == [200, 220, 245]
    assert (result.ttft_ns, result.itl_gaps_ns(), result.e2e_ns) == (200, [20, 25], 250)
    assert (result.prompt_tokens, result.completion_tokens, result.tokens_estimated) == (11, 3, False)
    assert result.finish_reason == "length"
    assert response.released and http.calls[0][0] == "POST"


def test_without_usage_tokens_are_counted_chunks_marked_estimated():
    result, _ = run(FakeResponse(lines=content("a") + content("b") + FINISH + DONE), prompt_tokens_estimate=42)
    assert (result.completion_tokens, result.prompt_tokens, result.tokens_estimated) == (2, 42, True)


def test_http_401_shows_the_body_without_the_key():
    body = b'{"error": {"message": "Incorrect API key provided: sk-test-SECRET.", "code": "invalid_api_key"}}'
    result, _ = run(FakeResponse(401, {"Content-Type": "application/json"}, body=body))
    assert result.outcome is Outcome.HTTP_4XX and result.http_status == 401
    assert result.error.startswith("HTTP 401 Unauthorized: {") and "Incorrect API key provided: ***" in result.error
    assert "SECRET" not in result.error


def test_http_429_records_retry_after():
    result, _ = run(FakeResponse(429, {"Retry-After": "2", "retry-after-ms": "1500"}, body=b"slow down"))
    assert result.outcome is Outcome.HTTP_429 and result.retry_after_s == 1.5


def test_long_error_bodies_are_truncated():
    result, _ = run(FakeResponse(500, {}, body=b"x" * 5000))
    assert result.outcome is Outcome.HTTP_5XX and len(result.error) < 400 and result.error.endswith("...")


def test_malformed_chunk_is_a_protocol_failure():
    result, _ = run(FakeResponse(lines=content("a") + sse(b'{"choices": [oops')))
    assert result.outcome is Outcome.MALFORMED and "invalid JSON" in result.error and "mid-stream" in result.error


def test_stream_cut_without_done_is_truncated():
    result, _ = run(FakeResponse(lines=ROLE + content("a") + content("b")))
    assert result.outcome is Outcome.TRUNCATED and "[DONE]" in result.error
    assert len(result.token_ns) == 2  # the tokens that did arrive are kept


def test_a_stream_ended_cleanly_after_a_finish_reason_is_complete_without_done():
    """Older TGI and llama.cpp servers end a stream after its finish and usage chunks, with no ``[DONE]``."""
    result, _ = run(FakeResponse(lines=ROLE + content("a") + content("b") + FINISH + USAGE))
    assert result.ok and result.no_done and result.finish_reason == "length" and result.completion_tokens == 3


def test_a_stream_with_done_is_not_counted_as_ending_without_it():
    result, _ = run(FakeResponse(lines=ROLE + content("a") + FINISH + USAGE + DONE))
    assert result.ok and not result.no_done


def test_a_stream_ended_without_done_or_a_finish_reason_is_truncated_even_with_usage():
    result, _ = run(FakeResponse(lines=ROLE + content("a") + USAGE))
    assert result.outcome is Outcome.TRUNCATED and not result.no_done
    assert result.error == "stream ended without 'data: [DONE]' or a finish_reason (mid-stream)"


def test_done_without_tokens_is_an_empty_stream():
    result, _ = run(FakeResponse(lines=ROLE + FINISH + DONE))
    assert result.outcome is Outcome.EMPTY


def test_error_object_in_the_stream():
    result, _ = run(FakeResponse(lines=content("a") + sse({"error": {"message": "engine overloaded"}})))
    assert result.outcome is Outcome.STREAM_ERROR and "engine overloaded" in result.error


def test_non_sse_200_response():
    body = b'{"choices": [{"message": {"content": "hi"}}]}'
    result, _ = run(FakeResponse(200, {"Content-Type": "application/json"}, body=body))
    assert result.outcome is Outcome.NOT_SSE and "application/json" in result.error


def test_connection_closed_mid_stream():
    result, _ = run(FakeResponse(lines=[*content("a"), HTTPConnectionClosed("closed")]))
    assert result.outcome is Outcome.CONNECTION and "mid-stream" in result.error


def test_connection_refused():
    result, _ = run(error=ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"))
    assert (
        result.outcome is Outcome.CONNECTION
        and result.error == "connection error: Connection refused (before any response)"
    )


def test_socket_timeout_is_a_timeout():
    result, _ = run(FakeResponse(lines=[TimeoutError("timed out")]))
    assert result.outcome is Outcome.TIMEOUT


def test_overall_deadline_interrupts_a_stalled_stream():
    stalled = FakeResponse(lines=[*content("a"), lambda: gevent.event.Event().wait() or b""])
    http = FakeHTTP(stalled)
    result = run_stream(http, "/", b"{}", {}, model="m", timeout_s=0.05, intended_ns=0)
    assert result.outcome is Outcome.TIMEOUT and "within 0.05 s" in result.error and stalled.released


def test_errors_never_contain_the_key_even_in_exceptions():
    result, _ = run(error=OSError("cannot reach host with Bearer sk-test-SECRET"))
    assert "SECRET" not in result.error


@pytest.mark.parametrize("header", ["text/event-stream; charset=utf-8", ""])
def test_event_stream_content_types_are_accepted(header):
    result, _ = run(FakeResponse(headers={"Content-Type": header} if header else {}, lines=content("a") + DONE))
    assert result.outcome is Outcome.OK


def test_connection_dropped_inside_the_body_is_a_connection_error():
    from geventhttpclient.response import HTTPParseError

    result, _ = run(FakeResponse(lines=[*content("a"), HTTPParseError("Incomplete response.")]))
    assert result.outcome is Outcome.CONNECTION and "closed the connection (mid-stream)" in result.error


def test_other_http_parse_errors_are_malformed():
    from geventhttpclient.response import HTTPParseError

    result, _ = run(FakeResponse(lines=[HTTPParseError("Invalid header value char")]))
    assert result.outcome is Outcome.MALFORMED


class BufferedResponse(FakeResponse):
    """Like geventhttpclient: readline returns nothing for bytes without a newline, which stay in the buffer."""

    def __init__(self, body):
        super().__init__(lines=[])
        self._body_buffer = bytearray(body)


def test_cr_only_line_endings_are_decoded():
    body = b"".join(ROLE + content("a") + content("b") + FINISH + DONE).replace(b"\n", b"\r")
    result, _ = run(BufferedResponse(body))
    assert result.outcome is Outcome.OK and len(result.token_ns) == 2


def test_keep_alive_data_lines_are_not_protocol_errors():
    result, _ = run(FakeResponse(lines=[b"data:\n", b"\n", *content("a"), b"data: \n", b"\n", *DONE]))
    assert result.outcome is Outcome.OK and len(result.token_ns) == 1


def test_a_usage_that_is_not_an_object_is_a_recorded_protocol_error():
    result, _ = run(FakeResponse(lines=content("a") + sse({"choices": [], "usage": "12"}) + DONE))
    assert result.outcome is Outcome.MALFORMED and result.outcome.status_class.value == "protocol_errors"


def test_a_rate_limit_inside_a_200_stream_counts_as_429_with_its_retry_after():
    error = {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}
    response = FakeResponse(headers={"Content-Type": "text/event-stream", "Retry-After": "7"}, lines=sse(error))
    result, _ = run(response)
    assert result.outcome is Outcome.HTTP_429 and result.status == 429 and result.http_status == 200
    assert result.retry_after_s == 7.0 and result.error.startswith("error in stream: Rate limit reached")


def test_server_text_echoing_the_key_is_redacted_in_stream_errors_and_malformed_chunks():
    echo = {"error": {"message": "bad key sk-test-SECRET for this model"}}
    result, _ = run(FakeResponse(lines=content("a") + sse(echo)))
    assert result.outcome is Outcome.STREAM_ERROR and "SECRET" not in result.error and "***" in result.error
    result, _ = run(FakeResponse(lines=content("a") + sse(b'{"oops sk-test-SECRET')))
    assert result.outcome is Outcome.MALFORMED and "SECRET" not in result.error


@pytest.mark.parametrize(
    ("error", "cause"),
    [
        (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), "refused"),
        (__import__("socket").gaierror(-2, "Name or service not known"), "dns"),
        (__import__("ssl").SSLCertVerificationError(1, "certificate verify failed"), "tls"),
        (ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"), ""),
    ],
)
def test_systematic_network_failures_are_tagged(error, cause):
    result, _ = run(error=error)
    assert result.outcome is Outcome.CONNECTION and result.cause == cause


@pytest.mark.parametrize(
    ("status", "cause"), [(400, "http_400"), (401, "http_401"), (404, "http_404"), (429, ""), (500, ""), (422, "")]
)
def test_systematic_http_failures_are_tagged(status, cause):
    result, _ = run(FakeResponse(status, {"Content-Type": "application/json"}, body=b"{}"))
    assert result.cause == cause


def reasoning(text):
    return sse({"choices": [{"index": 0, "delta": {"reasoning_content": text}, "finish_reason": None}]})


DETAILED_USAGE = sse(
    {
        "choices": [],
        "usage": {
            "prompt_tokens": 900,
            "completion_tokens": 4,
            "prompt_tokens_details": {"cached_tokens": 768},
            "completion_tokens_details": {"reasoning_tokens": 2},
        },
    }
)


@pytest.mark.parametrize("keep_reply", [False, True])
def test_a_reasoning_stream_times_the_answer_and_keeps_the_reply_without_changing_the_samples(keep_reply):
    """The same scripted stream gives the same TTFT, ITL and E2E samples whether the reply is kept or not."""
    lines = ROLE + reasoning("think") + reasoning("ing") + content('He said "hi"') + content(" \\o/") + FINISH
    lines += DETAILED_USAGE + DONE
    clock = clock_from([0, 50, 200, 220, 300, 320, 330, 331, 340])
    result, _ = run(FakeResponse(lines=lines), clock=clock, keep_reply=keep_reply)
    assert result.outcome is Outcome.OK
    assert (result.ttft_ns, result.itl_gaps_ns(), result.e2e_ns) == (200, [20, 80, 20], 340)
    assert (result.answer_ttft_ns, result.reasoning_chunks) == (300, 2)
    assert (result.cached_tokens, result.reasoning_tokens, result.reasoning_estimated) == (768, 2, False)
    assert result.reply == ('He said "hi" \\o/' if keep_reply else "")


def test_reasoning_without_usage_details_is_counted_and_marked_estimated():
    result, _ = run(FakeResponse(lines=reasoning("a") + content("b") + FINISH + USAGE + DONE))
    assert (result.reasoning_tokens, result.reasoning_estimated, result.cached_tokens) == (1, True, 0)
