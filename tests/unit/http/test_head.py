"""The plain head's response against ``geventhttpclient``'s: a head is taken only when the parser reads it the same
way (status, every header, chunked framing, kept alive), and the response lives and ends as the parser's would."""

import pytest
from geventhttpclient.response import HTTPParseError, HTTPResponse, HTTPSocketPoolResponse
from hypothesis import given, settings
from hypothesis import strategies as st

from locust_llm.http.chunked import Unchunker
from locust_llm.http.head import StreamResponse, plain_head
from locust_llm.http.post import header, is_event_stream

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nX-Id: a\r\n\r\n"
KWARGS = {"block_size": 4096, "method": "POST"}


class Pool:
    def __init__(self):
        self.returned, self.released = [], []

    def return_socket(self, sock):
        self.returned.append(sock)

    def release_socket(self, sock):
        self.released.append(sock)


class Sock:
    """Never read: a head read in full is given to the parser with it."""


def parsed(head: bytes) -> HTTPResponse:
    response = HTTPResponse(method="POST")
    response.feed(head)
    return response


def ours(head: bytes, pool: Pool | None = None, sock=None) -> StreamResponse:
    plain = plain_head(head)
    assert plain is not None
    return StreamResponse(sock or Sock(), pool or Pool(), head, plain, dict(KWARGS))


NAMES = [
    "Content-Type",
    "content-type",
    "Connection",
    "X-Request-Id",
    "x-request-id",
    "Retry-After",
    "Set-Cookie",
    "A",
    "Date",
]
VALUES = [
    "text/event-stream",
    "text/event-stream; charset=utf-8",
    "keep-alive",
    "Keep-Alive",
    "",
    "5",
    "a\tb",
    "no-cache",
]
ODD_NAMES = ["Transfer-Encoding", "TRANSFER-ENCODING", "Content-Length", "Upgrade", "Proxy-Connection", "X Y", "\u00e9"]
ODD_VALUES = [
    "chunked",
    "Chunked",
    "chunked ",
    "gzip, chunked",
    "close",
    "application/json",
    "\u00e9",
    "x\x7fy",
    "x\x00y",
    "keep-alive, Upgrade",
]


def odd(draw, usual, unusual):
    """Mostly a usual part, sometimes one the parser may read otherwise (so both kinds of head are drawn)."""
    return draw(st.sampled_from(unusual)) if draw(st.integers(0, 9)) == 0 else draw(usual)


@st.composite
def heads(draw) -> bytes:
    version = odd(draw, st.just("HTTP/1.1"), ["HTTP/1.0", "HTTP/2", "http/1.1"])
    status = odd(draw, st.just("200"), ["201", "429", "2000"])
    reason = odd(draw, st.sampled_from([" OK", " ", " Fine then"]), ["", " Fine\tthen", " \u00c9"])
    lines = [f"{version} {status}{reason}", odd(draw, st.just("Transfer-Encoding: chunked"), ["A: b"])]
    for _ in range(draw(st.integers(0, 6))):
        name = odd(draw, st.sampled_from(NAMES) | st.text("abcXYZ-_!~'", min_size=1, max_size=6), ODD_NAMES)
        value = odd(draw, st.sampled_from(VALUES) | st.text(" \tabc;=,", max_size=6), ODD_VALUES)
        before, after = draw(st.sampled_from(["", " ", "  ", "\t"])), draw(st.sampled_from(["", "", " ", "\t"]))
        sep = odd(draw, st.just(":"), [" :"])
        lines.insert(draw(st.integers(1, len(lines))), f"{name}{sep}{before}{value}{after}")
    if draw(st.booleans()):
        kept = ["Connection: keep-alive", "connection:Keep-Alive", "CONNECTION: \tkeep-alive"]
        lines.insert(draw(st.integers(1, len(lines))), odd(draw, st.sampled_from(kept), ["Connection: close"]))
    if draw(st.integers(0, 9)) == 0:
        lines.insert(draw(st.integers(1, len(lines))), draw(st.sampled_from([" folded", "\tfolded", "no colon"])))
    eol = odd(draw, st.just("\r\n"), ["\n"])
    return (eol.join(lines) + eol + eol).encode("latin-1")


@settings(max_examples=400, deadline=None)
@given(heads())
def test_a_plain_head_is_read_as_the_parser_reads_it(head):
    plain = plain_head(head)
    if plain is None:
        return  # the parser's (post builds it as before)
    theirs = parsed(head)  # raises if the parser refuses a head we took: the test fails
    assert theirs.headers_complete and not theirs.message_complete
    assert theirs.status_code == 200 and theirs.get_http_version() == "HTTP/1.1"
    assert theirs.should_keep_alive() and header(theirs, "transfer-encoding") == "chunked"
    assert is_event_stream(theirs)
    response = ours(head)
    assert response.status_code == 200 and response.status_message == theirs.status_message
    for name in {*NAMES, *(name for name, _ in theirs.items()), "missing"}:
        assert response.get(name) == theirs.get(name)
        assert header(response, name) == header(theirs, name)


def test_the_heads_drawn_include_plain_ones_with_many_kinds_of_header():
    drawn = []

    @settings(max_examples=300, deadline=None, database=None, derandomize=True)
    @given(heads())
    def collect(head):
        drawn.append(head)

    collect()
    plain = [h for h in drawn if plain_head(h) is not None]
    assert 30 < len(plain) < len(drawn) - 30  # both kinds: the property above compares something
    assert any(b"Set-Cookie" in h for h in plain) and any(b"Connection" in h for h in plain)


@pytest.mark.parametrize(
    "old, new",
    [
        (b"chunked", b"Chunked"),
        (b"chunked", b"chunked "),
        (b"chunked", b"gzip, chunked"),
        (b"X-Id: a", b"Transfer-Encoding: chunked"),  # twice
        (b"X-Id: a", b"Content-Length: 5"),
        (b"X-Id: a", b"Connection: close"),
        (b"X-Id: a", b"Connection: keep-alive, Upgrade"),
        (b"X-Id: a", b"Upgrade: h2c"),
        (b"X-Id: a", b"Proxy-Connection: keep-alive"),
        (b"text/event-stream", b"application/json"),
        (b"X-Id: a", b"X-Id: a\r\n folded"),
        (b"X-Id: a", b"X-Id : a"),
        (b"X-Id: a", b"X-Id: \xe9"),
        (b"HTTP/1.1", b"HTTP/1.0"),
        (b"200 OK", b"200"),
        (b"200", b"201"),
        (b"\r\n", b"\n"),
        (b"\r\n\r\n", b"\r\n"),  # no end
    ],
)
def test_every_other_head_is_left_to_the_parser(old, new):
    head = HEAD.replace(old, new)
    assert head != HEAD and plain_head(head) is None


def test_the_simulators_head_and_a_providers_are_plain():
    sim = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nCache-Control: no-cache\r\n"
        b"Transfer-Encoding: chunked\r\nDate: Wed, 02 Dec 2026 02:55:51 GMT\r\n"
        b"Server: Python/3.11 aiohttp/3.14.5\r\n\r\n"
    )
    vllm = (
        b"HTTP/1.1 200 OK\r\ndate: Wed, 02 Dec 2026 02:55:51 GMT\r\nserver: uvicorn\r\n"
        b"content-type: text/event-stream; charset=utf-8\r\nx-request-id: 3f2a\r\nconnection: keep-alive\r\n"
        b"transfer-encoding: chunked\r\n\r\n"
    )
    for head in (sim, vllm):
        assert plain_head(head) is not None
        assert ours(head).get("Content-Type") == parsed(head).get("Content-Type")


def test_the_last_chunk_ends_the_message_and_gives_the_connection_back_without_a_parser():
    pool, sock = Pool(), Sock()
    response = ours(HEAD, pool, sock)
    unchunker = Unchunker(response)
    body = unchunker.unframe(b"5\r\nhello\r\n0\r\n\r\n")
    assert body == b"hello" and response.message_complete and response._sock is None
    assert pool.returned == [sock] and not pool.released and response._parser is None
    response.release()  # what run_stream does at the end: nothing more
    assert pool.returned == [sock] and not pool.released


@pytest.mark.parametrize("end", [b"0\r\nTrailer: x\r\n\r\n", b"0\r\n\r\nHTTP/1.1 200 OK\r\n"])
def test_a_last_chunk_with_anything_after_it_is_the_parsers(end):
    pool, sock = Pool(), Sock()
    response = ours(HEAD, pool, sock)
    alone = parsed(HEAD)
    unchunker = Unchunker(response)
    try:
        alone.feed(b"5\r\nhello\r\n" + end)
        expected = None
    except HTTPParseError as exc:
        expected = exc.args
    try:
        response._body_buffer += unchunker.unframe(b"5\r\nhello\r\n" + end)
        got = None
    except HTTPParseError as exc:
        got = exc.args
    assert got == expected and response._parser is not None
    assert bytes(response._body_buffer) == bytes(alone._body_buffer)
    assert response.message_complete == alone.message_complete


def test_a_message_left_unfinished_closes_its_connection_on_release():
    pool, sock = Pool(), Sock()
    response = ours(HEAD, pool, sock)
    assert not response.message_complete and response._sock is sock
    response.release()
    assert pool.released == [sock] and not pool.returned and response._sock is None
    with pytest.raises(Exception, match="connection closed"):
        response.readline()  # as the parser's released response: no socket to read


def test_anything_else_asked_builds_the_parsers_response_from_the_same_head_and_buffer():
    pool, sock = Pool(), Sock()
    response = ours(HEAD, pool, sock)
    buffer = response._body_buffer
    response.feed(b"5\r\nhello\r\n")
    assert isinstance(response._parser, HTTPSocketPoolResponse) and response._body_buffer is buffer
    assert bytes(buffer) == b"hello" and list(response.items()) == list(parsed(HEAD).items())
    assert response._sock is sock and response._parser._pool is pool  # the parser's from now on
    response.feed(b"0\r\n\r\n")  # the parser ends the message and gives the connection back, as always
    assert response.message_complete and pool.returned == [sock] and response.read() == b"hello"
    assert not response.finish()  # the parser has it: the Unchunker hands the last chunk over


def test_after_the_end_lines_left_are_read_and_a_parser_built_late_has_no_connection():
    pool, sock = Pool(), Sock()
    response = ours(HEAD, pool, sock)
    response._body_buffer += b"data: a\n\nrest"
    assert response.finish() and pool.returned == [sock]
    assert response.readline(b"\n") == b"data: a\n" and response.readline(b"\n") == b"\n"
    assert response.readline(b"\n") == b"" and response._parser is None  # no separator left: as the parser's
    assert response.read() == b"rest" and response._parser is not None and response._sock is None
    assert response.message_complete and pool.returned == [sock] and not pool.released


def test_a_head_read_before_is_given_its_kept_reading_and_the_kept_heads_are_bounded():
    from locust_llm.http.head import HEADS_KEPT

    fresh = plain_head.__wrapped__  # the reading itself, nothing kept
    plain_head.cache_clear()
    first = plain_head(HEAD)
    assert plain_head(bytes(HEAD)) is first  # the same bytes: the kept reading, not a new one
    assert first == fresh(HEAD)
    assert plain_head(HEAD.replace(b"X-Id: a", b"X-Id: b")) is not first  # other bytes: read afresh
    others = [HEAD.replace(b"X-Id: a", b"X-Id: %d" % i) for i in range(HEADS_KEPT + 5)]
    for head in others:
        assert plain_head(head) == fresh(head)
    assert plain_head.cache_info().currsize == HEADS_KEPT
    latest = plain_head(others[-1])
    assert plain_head(others[-1]) is latest and plain_head(HEAD) is not first  # the oldest went first
    assert plain_head(b"HTTP/1.1 500 Oops\r\n\r\n") is None and plain_head(b"HTTP/1.1 500 Oops\r\n\r\n") is None


def test_responses_sharing_a_kept_reading_do_not_share_a_repeated_headers_list():
    head = HEAD.replace(b"X-Id: a\r\n", b"Set-Cookie: a\r\nSet-Cookie: b\r\n")
    one, two = ours(head), ours(head)
    one.get("set-cookie").append("c")
    assert two.get("set-cookie") == ["a", "b"] == parsed(head).get("set-cookie")
