"""The Unchunker against geventhttpclient's parser alone: after every read, the same body buffer, the same state, and
the same exception raised by the same read, for valid and broken chunked bodies split anywhere."""

import random

import pytest
from geventhttpclient.response import HTTPParseError, HTTPResponse
from hypothesis import given, settings
from hypothesis import strategies as st

from locust_llm.http.chunked import CHUNK_LIMIT, Unchunker

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def parser() -> HTTPResponse:
    response = HTTPResponse()
    response.feed(HEAD)
    assert response.headers_complete and not response._body_buffer
    return response


def outcome(read):
    try:
        read()
    except HTTPParseError as exc:
        return ("raised", exc.args)
    return None


def replay(reads: list[bytes]) -> list:
    """Feed ``reads`` to the parser alone and through the Unchunker: the states after each read (until one raises)."""
    alone, ours = parser(), parser()
    unchunker = Unchunker(ours)

    def through(data: bytes) -> None:
        if data:
            ours._body_buffer += unchunker.unframe(data)
        else:
            unchunker.end_of_file()

    states = []
    for data in reads:
        a = outcome(lambda data=data: alone.feed(data) if data else None)  # end of file: the parser has it all
        b = outcome(lambda data=data: through(data))
        states.append((a, b))
        assert a == b, f"read {data!r}: parser {a}, unchunker {b}"
        assert bytes(alone._body_buffer) == bytes(ours._body_buffer)
        assert (alone.message_complete, alone.should_keep_alive()) == (ours.message_complete, ours.should_keep_alive())
        if a is not None:
            break
    return states


def frame(payload: bytes, size: str | None = None) -> bytes:
    return (size or f"{len(payload):x}").encode() + b"\r\n" + payload + b"\r\n"


def split(wire: bytes, rng: random.Random, cuts: int) -> list[bytes]:
    points = sorted(rng.sample(range(1, len(wire)), min(cuts, len(wire) - 1))) if len(wire) > 1 else []
    return [wire[a:b] for a, b in zip([0, *points], [*points, len(wire)], strict=True)]


EVENTS = [b'data: {"choices":[{"delta":{"content":"%d"}}]}\n\n' % i for i in range(6)]
VALID = b"".join(frame(e) for e in EVENTS) + b"0\r\n\r\n"


def test_one_chunk_per_read_is_unframed_without_the_parser():
    response = parser()
    unchunker = Unchunker(response)
    pieces = [unchunker.unframe(frame(e)) for e in EVENTS]
    assert pieces == EVENTS and not unchunker.handed and not response._body_buffer


def test_the_last_chunk_is_the_parsers_and_completes_the_message():
    states = replay([frame(EVENTS[0]), b"0\r\n\r\n"])
    assert states == [(None, None), (None, None)]
    response = parser()
    unchunker = Unchunker(response)
    unchunker.unframe(b"0\r\n\r\n")
    assert unchunker.handed and response.message_complete and response.should_keep_alive()


@pytest.mark.parametrize("seed", range(40))
def test_any_split_of_a_valid_body_reads_as_the_parser_reads_it(seed):
    rng = random.Random(seed)
    replay(split(VALID, rng, rng.randint(1, 30)))


@pytest.mark.parametrize(
    "wire",
    [
        frame(EVENTS[0], "0" * 10 + f"{len(EVENTS[0]):X}"),  # leading zeros, upper-case hex
        frame(EVENTS[0], f"{len(EVENTS[0]):x};name=value"),  # a chunk extension
        frame(EVENTS[0], f"{len(EVENTS[0]):x} "),  # whitespace after the size
        frame(EVENTS[0], "1" * 17),  # a size of 17 hex digits
        frame(EVENTS[0], f"{len(EVENTS[0]) + 1:x}"),  # a size one too large: data runs into the CRLF
        frame(EVENTS[0], f"{len(EVENTS[0]) - 1:x}"),  # one too small: no CRLF after the data
        frame(EVENTS[0], "zz"),
        b"%x\r\n%b\n" % (len(EVENTS[0]), EVENTS[0]),  # LF alone after the data
        b"%x\n%b\r\n" % (len(EVENTS[0]), EVENTS[0]),  # LF alone after the size
        b"0\r\nTrailer: x\r\n\r\n",  # trailers
        b"0\r\n\r\nHTTP/1.1 200 OK\r\n",  # bytes after the message
        frame(b"x" * (CHUNK_LIMIT + 1)),  # a chunk too large to hold
    ],
)
def test_unusual_or_broken_framing_is_the_parsers_to_judge(wire):
    body = frame(EVENTS[1]) + wire + frame(EVENTS[2]) + b"0\r\n\r\n"
    for seed in range(8):
        rng = random.Random(seed)
        replay(split(body, rng, rng.randint(1, 12)) if seed else [body])


@pytest.mark.parametrize("cut", [0, 1, 3, 5, 40, len(frame(EVENTS[0])) - 1])
def test_the_end_of_the_file_hands_the_parser_what_it_has_not_seen(cut):
    first = frame(EVENTS[0])
    states = replay([first + first[:cut], b""])
    assert states[-1] == (None, None)


KINDS = st.sampled_from(["plain", "upper", "zeros", "ext", "broken-size", "broken-tail", "trailer"])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.binary(min_size=0, max_size=40), min_size=1, max_size=6),
    st.lists(KINDS, min_size=6, max_size=6),
    st.randoms(use_true_random=False),
    st.booleans(),
)
def test_any_body_in_any_split_reads_as_the_parser_reads_it(payloads, kinds, rng, eof):
    parts = []
    for payload, kind in zip(payloads, kinds, strict=False):
        size = f"{len(payload):x}"
        if kind == "upper":
            size = size.upper()
        elif kind == "zeros":
            size = "00" + size
        elif kind == "ext":
            size += ";e=1"
        elif kind == "broken-size":
            size = "g" + size
        chunk = frame(payload, size)
        if kind == "broken-tail":
            chunk = chunk[:-2] + b"\rx"
        parts.append(chunk)
    wire = b"".join(parts) + (b"0\r\nX-Trailer: 1\r\n\r\n" if kinds[-1] == "trailer" else b"0\r\n\r\n")
    if eof:
        wire = wire[: rng.randint(1, len(wire))]
    reads = split(wire, rng, rng.randint(0, 10)) + ([b""] if eof else [])
    replay(reads)


BODIES = st.one_of(
    st.builds(lambda v: b"data: " + v + b"\n\n", st.binary(max_size=12)),
    st.binary(max_size=20),
    st.sampled_from([b"data: a\r\n\r\n", b"data: a\n\ndata: b\n\n", b"data:a\n\n", b": c\n\n", b"data: a\n", b""]),
)


@settings(max_examples=400, deadline=None)
@given(BODIES, st.sampled_from(["", "0", "upper"]), st.sampled_from([b"", b"\r\n", b"x", b"0\r\n\r\n"]))
def test_the_one_step_read_is_the_unframed_body_of_one_whole_chunk(body, size_kind, after):
    size = f"{len(body):x}"
    size = size.upper() if size_kind == "upper" else size_kind + size
    data = frame(body, size) + after
    piece = Unchunker(parser()).whole(data)
    if piece is not None:
        assert Unchunker(parser()).unframe(data) == body == piece
    else:
        assert after or not body


def test_the_one_step_read_waits_for_a_chunk_boundary():
    unchunker = Unchunker(parser())
    first = frame(EVENTS[0])
    assert unchunker.whole(first) == EVENTS[0]
    data_from = first.index(b"\r\n") + 2
    assert unchunker.unframe(first[: data_from + 1]) == first[data_from : data_from + 1]
    assert unchunker.whole(first) is None  # mid-chunk: not at a boundary
