"""The pump (the body read in the hub's callback) against the readline loop, over real loopback sockets.

A gevent server in the test's process writes a scripted response piece by piece; before each piece it sets the
clock both readers use to that piece's scripted time, so a sample is exact: the time of the piece that completed its
event. Each scenario runs through both readers and must give the same result, field for field.
"""

import fcntl
import random
import termios
import time
from dataclasses import asdict

import gevent
import gevent.event
import gevent.ssl
import orjson
import pytest
from gevent.server import StreamServer
from geventhttpclient import HTTPClient

import locust_llm.http.pump as pump_module
import locust_llm.http.stamps as stamps_module
import locust_llm.http.stream as stream_module
from locust_llm.http.post import ResponseStart
from locust_llm.http.stream import run_stream
from locust_llm.protocol import api_chat
from locust_llm.protocol.metrics import Outcome
from locust_llm.sim.certs import make_certificates

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def frame(payload: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(payload), payload)


def event(obj) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else orjson.dumps(obj)) + b"\n\n"


def token(text: str) -> bytes:
    return event({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]})


ROLE = event({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]})
USAGE = event({"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 4}})
DONE = event(b"[DONE]")
EVENTS = [ROLE, token("He"), token("llo"), token(" wor"), token("ld"), USAGE, DONE]
END = b"0\r\n\r\n"


class Script:
    """A server that answers every request with ``pieces``: (bytes, scripted time in ns) written in order, each once
    the client has read the one before (:func:`read`); ``None`` as bytes closes the connection, ``"stall"`` stops
    writing."""

    def __init__(self, pieces):
        self.pieces = pieces
        self.now = 0
        self.connections = 0
        self.server = StreamServer(("127.0.0.1", 0), self.handle)
        self.server.start()

    def clock(self) -> int:
        return self.now

    def handle(self, sock, _address):
        self.connections += 1
        while self.answer(sock):  # keep-alive: one request after the other until the client closes
            pass

    def answer(self, sock) -> bool:
        data = b""
        while b"\r\n\r\n" not in data:
            more = sock.recv(65536)
            if not more:
                return False
            data += more
        head, _, body = data.partition(b"\r\n\r\n")
        length = int(
            next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
        )
        while len(body) < length:
            body += sock.recv(65536)
        for piece, at in self.pieces:
            if piece is None:
                sock.close()
                return False
            if piece == "stall":
                gevent.sleep(5)
                return False
            self.now = at
            sock.sendall(piece)
            read(sock)
        return True

    def run(self, mode: str, monkeypatch, timeout_s: float = 5.0, keep_reply: bool = True, api=api_chat.API):
        """``own``: as shipped (our head read and unframing, pumped); ``parser``: sent by ``HTTPClient.request``,
        its parser unframes, pumped; ``readline``: sent by ``HTTPClient.request``, the readline loop alone."""
        self.now = 0
        if mode != "own":

            def library_post(http, uri, body, headers, clock, result=None):
                result.wrote = True  # as post() marks it once the request is sent
                return ResponseStart(http.request("POST", uri, body=body, headers=headers), None)

            monkeypatch.setattr(stream_module, "post", library_post)
        if mode == "readline":
            monkeypatch.setattr(stream_module, "pumpable", lambda response: False)
        http = HTTPClient("127.0.0.1", self.server.server_port, network_timeout=None, connection_timeout=5)
        try:
            return run_stream(
                http,
                "/v1/chat/completions",
                b"{}",
                {},
                model="m",
                timeout_s=timeout_s,
                intended_ns=0,
                clock=self.clock,
                keep_reply=keep_reply,
                api=api,
            )
        finally:
            http.close()
            monkeypatch.undo()

    def close(self):
        self.server.stop()


def both(pieces, monkeypatch, **kw):
    """The result through each reader (``Script.run``), which must be equal field for field."""
    script = Script(pieces)
    try:
        own, parser, plain = (script.run(mode, monkeypatch, **kw) for mode in ("own", "parser", "readline"))
    finally:
        script.close()
    assert asdict(own) == asdict(plain)
    assert asdict(parser) == asdict(plain)
    return own


def shipped(pieces, monkeypatch):
    """The result through the shipped reader alone (``Script.run`` ``own``; it undoes ``monkeypatch`` after)."""
    script = Script(pieces)
    try:
        return script.run("own", monkeypatch)
    finally:
        script.close()


def timed(chunks):
    """Pieces ``chunks`` at 1 ms, 2 ms, ... of scripted time."""
    return [(piece, (i + 1) * 10**6) for i, piece in enumerate(chunks)]


def test_one_event_per_piece_is_stamped_with_its_piece(monkeypatch):
    result = both(timed([HEAD] + [frame(e) for e in EVENTS] + [END]), monkeypatch)
    assert result.outcome is Outcome.OK
    assert result.token_ns == [3 * 10**6, 4 * 10**6, 5 * 10**6, 6 * 10**6]
    assert (result.prompt_tokens, result.completion_tokens, result.reply) == (11, 4, "Hello world")


def test_events_in_the_same_piece_as_the_headers_are_read(monkeypatch):
    result = both(timed([HEAD + b"".join(frame(e) for e in EVENTS) + END]), monkeypatch)
    assert result.outcome is Outcome.OK and result.token_ns == [10**6] * 4 and result.reply == "Hello world"


@pytest.mark.parametrize("seed", range(6))
def test_any_split_of_the_bytes_gives_the_same_result_through_both_readers(monkeypatch, seed):
    rng = random.Random(seed)
    framed = b"".join(frame(e) for e in EVENTS[:2]) + frame(b"".join(EVENTS[2:5])) + b"".join(map(frame, EVENTS[5:]))
    wire = HEAD + framed + END
    cuts = sorted(rng.sample(range(1, len(wire)), 12))
    pieces = [wire[a:b] for a, b in zip([0, *cuts], [*cuts, len(wire)], strict=True)]
    result = both(timed(pieces), monkeypatch)
    assert result.outcome is Outcome.OK and len(result.token_ns) == 4 and result.reply == "Hello world"


def test_a_connection_closed_mid_body_is_a_connection_error(monkeypatch):
    result = both(timed([HEAD, frame(ROLE), frame(token("a")), None]), monkeypatch)
    assert result.outcome is Outcome.CONNECTION and len(result.token_ns) == 1


def test_broken_chunk_framing_is_malformed(monkeypatch):
    result = both(timed([HEAD, frame(ROLE), b"zz\r\nnot a chunk\r\n"]), monkeypatch)
    assert result.outcome is Outcome.MALFORMED


def test_a_malformed_chunk_fails_the_attempt_the_same_way(monkeypatch):
    result = both(
        timed([HEAD, frame(ROLE), frame(token("a")), frame(b"data: {not json\n\n"), frame(DONE), END]), monkeypatch
    )
    assert result.outcome is Outcome.MALFORMED and len(result.token_ns) == 1


def test_a_last_line_without_a_newline_is_decoded_at_the_end(monkeypatch):
    result = both(timed([HEAD, frame(ROLE), frame(token("a")), frame(USAGE), frame(b"data: [DONE]"), END]), monkeypatch)
    assert result.outcome is Outcome.OK and result.completion_tokens == 4


@pytest.mark.parametrize(
    ("mode", "pieces", "rest"),
    [
        pytest.param("own", [HEAD, *(frame(e) for e in EVENTS), END], False, id="pumped to the end, our unframing"),
        pytest.param("parser", [HEAD, *(frame(e) for e in EVENTS), END], False, id="pumped to the end, the parser's"),
        pytest.param("readline", [HEAD, *(frame(e) for e in EVENTS), END], True, id="not pumped"),
        pytest.param(
            "own",
            [HEAD, frame(ROLE), frame(token("a")), frame(USAGE), frame(b"data: [DONE]"), END],
            True,
            id="a last line without its newline left",
        ),
    ],
)
def test_the_rest_of_the_body_is_read_only_when_the_pump_left_some(monkeypatch, mode, pieces, rest):
    """After a body the pump read to its end, with nothing left in the buffer, the readline loop is not entered (it
    would find nothing); anything else still goes through it, with the same result."""
    calls = []
    real = stream_module._read_rest
    monkeypatch.setattr(stream_module, "_read_rest", lambda *args: calls.append(1) or real(*args))
    script = Script(timed(pieces))
    try:
        result = script.run(mode, monkeypatch)
    finally:
        script.close()
    assert result.outcome is Outcome.OK and result.completion_tokens == 4 and len(result.token_ns) >= 1
    assert bool(calls) is rest


def test_the_deadline_interrupts_a_stalled_pump_and_the_loop_is_left_clean(monkeypatch):
    script = Script(timed([HEAD, frame(ROLE), frame(token("a")), "stall"]))
    try:
        result = script.run("own", monkeypatch, timeout_s=0.3)
        assert result.outcome is Outcome.TIMEOUT and len(result.token_ns) == 1
        script.pieces = timed([HEAD] + [frame(e) for e in EVENTS] + [END])
        again = script.run("own", monkeypatch)  # a new connection; the stalled one's watcher is gone
        assert again.outcome is Outcome.OK and len(again.token_ns) == 4
    finally:
        script.close()


def test_keep_alive_reuses_the_connection_after_a_pumped_body(monkeypatch):
    script = Script(timed([HEAD] + [frame(e) for e in EVENTS] + [END]))
    http = HTTPClient("127.0.0.1", script.server.server_port, network_timeout=None, connection_timeout=5)
    try:
        results = [
            run_stream(
                http, "/v1/chat/completions", b"{}", {}, model="m", timeout_s=5, intended_ns=0, clock=script.clock
            )
            for _ in range(2)
        ]
    finally:
        http.close()
        script.close()
    assert [r.outcome for r in results] == [Outcome.OK, Outcome.OK]
    assert [len(r.token_ns) for r in results] == [4, 4]
    assert script.connections == 1


def test_the_waits_use_the_socket_s_own_read_watcher_and_leave_it_idle(monkeypatch):
    script = Script(timed([HEAD] + [frame(e) for e in EVENTS] + [END]))
    http = HTTPClient("127.0.0.1", script.server.server_port, network_timeout=None, connection_timeout=5)
    used = []
    real = pump_module._read_watcher

    def spy(sock, hub):
        watcher, made = real(sock, hub)
        used.append((sock, watcher, made))
        return watcher, made

    monkeypatch.setattr(pump_module, "_read_watcher", spy)
    try:
        results = [
            run_stream(
                http, "/v1/chat/completions", b"{}", {}, model="m", timeout_s=5, intended_ns=0, clock=script.clock
            )
            for _ in range(2)
        ]
        assert [r.outcome for r in results] == [Outcome.OK, Outcome.OK]
        assert used and all(not made and watcher is sock._read_event for sock, watcher, made in used)
        sock = used[-1][0]
        assert sock._read_event.callback is None and not sock._read_event.active  # gevent's recv may wait on it
        assert {id(s) for s, _, _ in used} == {id(sock)}  # one connection, one watcher, never closed
    finally:
        http.close()
        script.close()


# -- the event cutter against the SSE decoder, without sockets ----------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from locust_llm.http.pump import decode_events  # noqa: E402
from locust_llm.protocol.sse import SSEDecoder  # noqa: E402

payloads = st.sampled_from([b"{}", b"STOP", b"x", b'{"a": 1}', b"[DONE]", b"", b" spaced", b"da:ta"])
lines_of_event = st.lists(
    st.one_of(
        payloads.map(lambda d: b"data: " + d),
        payloads.map(lambda d: b"data:" + d),
        st.just(b": a comment"),
        st.just(b"event: message"),
        st.just(b"id: 7"),
        st.just(b"data"),
    ),
    min_size=1,
    max_size=4,
)
streams = st.lists(
    st.tuples(lines_of_event, st.sampled_from([b"\n", b"\r\n"]), st.integers(0, 2)), min_size=1, max_size=12
).map(lambda events: b"".join(eol.join(lines) + eol + eol * (1 + extra) for lines, eol, extra in events))


def reference(stream: bytes) -> list[bytes]:
    """The decoder's events for the complete lines of ``stream`` (what readline(b"\\n") would give)."""
    complete = stream[: stream.rfind(b"\n") + 1]
    decoder = SSEDecoder()
    return [event.data for line in complete.split(b"\n")[:-1] if (event := decoder.feed_line(line)) is not None]


@settings(max_examples=400)
@given(streams, st.lists(st.integers(1, 40), max_size=30), st.booleans())
def test_the_cutter_gives_the_decoders_events_for_any_split_and_hand_back(stream, cuts, stop_at_stop):
    decoder, buffer, got = SSEDecoder(), bytearray(), []

    def on_data(data, _now):
        got.append(data)
        return stop_at_stop and data == b"STOP"

    position = 0
    for size in [*cuts, len(stream)]:
        buffer += stream[position : position + size]
        position += size
        while decode_events(buffer, decoder, on_data, 0):  # handed back: the rest is still in the buffer, in order
            pass
    assert got == reference(stream)


@pytest.mark.parametrize(
    "first, second",
    [
        (b"data: STOP\n\ndata: a\n", b"\n"),  # handed back before a tail: the tail's line is kept
        (b"data: STOP\n\ndata: b\n\ndata: a\n", b"\n"),  # and before whole events
        (b": c\ndata: STOP\n\ndata: b\n\n", b""),  # handed back from a line-by-line event
        (b"data: x\ndata: STOP\n", b"\ndata: a\n\n"),  # an event of two lines split across reads
    ],
)
def test_handing_back_keeps_every_undecoded_byte(first, second):
    decoder, buffer, got = SSEDecoder(), bytearray(first), []
    stopped = decode_events(buffer, decoder, lambda data, _now: got.append(data) or data == b"STOP", 0)
    buffer += second
    while decode_events(buffer, decoder, lambda data, _now: got.append(data) or False, 0):
        pass
    assert got == reference(first + second)
    assert stopped == (b"STOP" in got)


PARSER_HEAD = HEAD.replace(b"chunked", b"Chunked")  # the same framing, not plain (head.py): the parser's response


@pytest.mark.parametrize("head, handed_over, built", [(HEAD, [], 0), (PARSER_HEAD, [END], 1)], ids=["plain", "parser"])
def test_the_own_path_unframes_every_chunk_and_the_last_too_when_the_head_is_plain(
    monkeypatch, head, handed_over, built
):
    import geventhttpclient.response as gresponse

    import locust_llm.http.chunked as chunked
    import locust_llm.http.head as head_module
    import locust_llm.http.post as wire

    handed, parsers = [], []
    real = chunked.Unchunker._hand_over
    monkeypatch.setattr(chunked.Unchunker, "_hand_over", lambda self, rest: handed.append(rest) or real(self, rest))

    class Counted(gresponse.HTTPSocketPoolResponse):
        def __init__(self, *a, **k):
            parsers.append(self)
            super().__init__(*a, **k)

    monkeypatch.setattr(wire, "HTTPSocketPoolResponse", Counted)
    monkeypatch.setattr(head_module, "HTTPSocketPoolResponse", Counted)
    result = shipped(timed([head] + [frame(e) for e in EVENTS] + [END]), monkeypatch)
    assert result.outcome is Outcome.OK and result.reply == "Hello world"
    assert handed == handed_over and len(parsers) == built  # keep-alive after it: the next test


# -- the usual read taken in one step (pump step 2), against both other readers -----------------------------------


def upper(payload: bytes) -> bytes:
    return b"%X\r\n%b\r\n" % (len(payload), payload)


LEARNED = [HEAD, frame(ROLE), frame(token("He"))]  # the first token teaches the shape; what follows may be usual
AFTER = [frame(token("lo")), frame(USAGE), frame(DONE), END]
INNER = b"%x\r\n" % len(token("x")) + token("x")  # one chunk's data: an event, then bytes that look like a chunk
LOOKS_FRAMED = [frame(token("a") + INNER)[: -len(INNER) - 2], INNER + b"\r\n"]  # read in two, cut before them


@pytest.mark.parametrize(
    "tricky, tokens",
    [
        pytest.param(frame(token("a")), 1, id="usual"),
        pytest.param(upper(token("a")), 1, id="upper-case size"),
        pytest.param(b"00" + frame(token("a")), 1, id="zero-padded size"),
        pytest.param(frame(token("a" * 4000)), 1, id="a chunk of 4095 bytes or less"),
        pytest.param(frame(token("a" * 5000)), 1, id="a chunk of 4096 bytes or more"),
        pytest.param(frame(token("a")).replace(b"\r\n", b";x=1\r\n", 1), 1, id="chunk extension"),
        pytest.param(frame(token("")), 0, id="empty content"),
        pytest.param(frame(token('h\u00e9\n"\\ \u2603')), 1, id="escapes and non-ASCII"),
        pytest.param(frame(token("a").replace(b'"a"', b'"a","role":"x"')), 1, id="a second field"),
        pytest.param(frame(token("a").replace(b'"a"', b'"a\\q"')), 0, id="a literal with an invalid escape"),
        pytest.param(frame(token("a").replace(b'"a"', b'"a\x01"')), 0, id="a literal with a control character"),
        pytest.param(frame(token("a").replace(b'"a"', b'"a"b"')), 0, id="a quote inside the literal"),
        pytest.param(frame(token("a").replace(b'"a"', b'"\xff"')), 0, id="a literal that is not UTF-8"),
        pytest.param(frame(token("a").replace(b'"a"', b"null")), 0, id="a content that is not a string"),
        pytest.param(frame(token("a") + token("b")), 2, id="two events in one chunk"),
        pytest.param(frame(token("a")) + frame(token("b"))[:7], 2, id="a chunk and the next's start"),
        pytest.param(frame(token("a").replace(b"\n", b"\r\n")), 1, id="CRLF line ends"),
        pytest.param(frame(b"event: message\n" + token("a")), 1, id="an event field"),
        pytest.param(frame(b": keep-alive\n\n"), 0, id="a comment"),
        pytest.param(frame(b"data: \n\n"), 0, id="an event without data"),
        pytest.param(frame(token("a"))[:-2] + b"\n\n", 0, id="bad CRLF after the data"),
        pytest.param(b"%x\r\n" % (len(token("a")) - 1) + token("a") + b"\r\n", 0, id="wrong size"),
        pytest.param(frame(token("a"))[:40], 0, id="a partial chunk"),
        pytest.param(frame(token("a")[:20]), 0, id="a partial line"),
        pytest.param(frame(b"data: x\n"), 0, id="an event not ended"),
        pytest.param(LOOKS_FRAMED, 2, id="a chunk's data that looks like a chunk"),
    ],
)
def test_a_read_after_the_shape_is_learned_gives_the_same_result_through_every_reader(monkeypatch, tricky, tokens):
    result = both(timed([*LEARNED, *(tricky if isinstance(tricky, list) else [tricky]), *AFTER]), monkeypatch)
    if result.outcome is Outcome.OK:
        assert len(result.token_ns) == 2 + tokens


def test_a_shape_learned_from_a_multi_line_event_is_never_taken_as_one_line(monkeypatch):
    payload = orjson.dumps({"choices": [{"index": 0, "delta": {"content": "a"}}]}).replace(b"[", b"\n[", 1)
    first = b"data: " + payload.replace(b"\n", b"\ndata: ") + b"\n\n"  # its data: the payload, LF and all
    later = b"data: " + payload.replace(b'"a"', b'"b"') + b"\n\n"  # two lines, the second not a data field
    result = both(timed([HEAD, frame(first), frame(later), END]), monkeypatch)
    assert result.outcome is Outcome.MALFORMED and len(result.token_ns) == 1


def test_the_usual_read_is_taken_in_one_step_and_tokens_after_done_are_ignored(monkeypatch):
    import locust_llm.http.pump as pump_module

    taken = []
    real = pump_module.is_content_literal
    monkeypatch.setattr(pump_module, "is_content_literal", lambda literal: taken.append(literal) or real(literal))
    result = shipped(
        timed([*LEARNED, frame(token("l")), frame(token("o")), frame(DONE), frame(token("x")), END]), monkeypatch
    )
    assert (
        result.outcome is Outcome.OK and result.reply == "Helo" and result.token_ns == [3 * 10**6, 4 * 10**6, 5 * 10**6]
    )
    assert taken == [b'"l"', b'"o"']  # the first token teaches; after [DONE] nothing is tried


@pytest.mark.parametrize("size, usual", [(4095, True), (4096, False), (0x1000 + 7, False)])
def test_a_chunk_of_4096_bytes_or_more_is_not_the_usual_read_and_still_gives_its_token(monkeypatch, size, usual):
    import locust_llm.http.pump as pump_module

    taken = []
    real = pump_module.is_content_literal
    monkeypatch.setattr(pump_module, "is_content_literal", lambda literal: taken.append(literal) or real(literal))
    text = "b" * (size - len(token("")))  # a chunk of exactly `size` bytes
    chunk = frame(token(text))
    assert chunk.startswith(b"%x\r\n" % size) and len(chunk) == len(b"%x" % size) + 4 + size
    result = shipped(timed([*LEARNED, chunk, *AFTER]), monkeypatch)
    assert result.outcome is Outcome.OK and result.reply == "He" + text + "lo" and len(result.token_ns) == 3
    assert (len(taken) == 2) is usual  # the token and "lo", or "lo" alone


# -- the order of work in one turn of the event loop ---------------------------------------------------------------


class Turn:
    """Loopback streams whose next bytes the test writes all at once, so that the loop sees them in one turn. The
    first ``held`` requests get no answer (their sockets are in ``waiting``); the next ``answered`` get the head, the
    role and one token at once (their sockets are in ``served``). The clock is a counter, so the order of the stamps
    is exact (unless the test gives the real one)."""

    def __init__(self, answered: int, held: int = 0, clock=None, certs=None):
        self.clock = clock or iter(range(1, 10**6)).__next__
        self.answered, self.held = answered, held
        self.served, self.waiting, self.users, self.resumed, self.firsts = [], [], [], [], []
        self.started, self.asked, self.finish = gevent.event.Event(), gevent.event.Event(), gevent.event.Event()
        tls, self.client_tls = {}, {}
        if certs is not None:  # HTTPS with gevent's own contexts (this process is not monkey-patched)
            server = gevent.ssl.SSLContext(gevent.ssl.PROTOCOL_TLS_SERVER)
            server.load_cert_chain(certs.cert_path, certs.key_path)
            client = gevent.ssl.SSLContext(gevent.ssl.PROTOCOL_TLS_CLIENT)
            client.load_verify_locations(certs.ca_path)
            tls = {"ssl_context": server}
            self.client_tls = {"ssl": True, "ssl_context_factory": lambda *_a, **_k: client}
        self.server = StreamServer(("127.0.0.1", 0), self.handle, **tls)
        self.server.start()
        self.clients = []

    def handle(self, sock, _address):
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536)
        if len(self.waiting) < self.held:
            self.waiting.append(sock)
            self.asked.set()
        else:
            sock.sendall(HEAD + frame(ROLE) + frame(token("a")))
            self.served.append(sock)
        self.finish.wait(10)

    def first_token(self):  # called in the pump: its user waits on in it
        self.firsts.append(1)
        if len(self.firsts) == self.answered:
            self.started.set()

    def user(self, http):
        result = run_stream(
            http,
            "/v1/chat/completions",
            b"{}",
            {},
            model="m",
            timeout_s=10,
            intended_ns=0,
            clock=self.clock,
            on_first_token=self.first_token,
        )
        self.resumed.append(self.clock())
        return result

    def spawn(self, n):
        for _ in range(n):
            self.clients.append(
                HTTPClient(
                    "127.0.0.1", self.server.server_port, network_timeout=None, connection_timeout=5, **self.client_tls
                )
            )
            self.users.append(gevent.spawn(self.user, self.clients[-1]))

    def send_rest(self):
        """Write every served stream's rest (its next token, the usage and ``[DONE]``) at once, then wait (without
        yielding) until the peers' kernels have it all (:func:`delivered`): the loop's next poll sees them all."""
        for sock in self.served:
            sock.sendall(REST)
        delivered(self.served)

    def results(self):
        gevent.joinall(self.users, timeout=10, raise_error=True)
        return [u.value for u in self.users]

    def close(self):
        self.finish.set()
        for http in self.clients:
            http.close()
        self.server.stop()


REST = frame(token("b")) + frame(USAGE) + frame(DONE) + END


def test_tokens_ready_together_are_stamped_before_any_finished_stream_s_user_runs_on():
    """Five streams whose last bytes (a token, the usage, ``[DONE]``) arrive in one turn of the loop: every one of
    them is read and stamped before any of their users runs on (a user's own work, its recording and its next
    request, would otherwise delay the stamps of the bytes already there), whichever order the loop takes them in."""
    turn = Turn(answered=5)
    try:
        turn.spawn(5)
        assert turn.started.wait(10), "the five streams did not all get their first token"
        for sock in turn.served:  # the test's greenlet does not yield in between: the loop sees all five at once
            sock.sendall(REST)
        results = turn.results()
    finally:
        turn.close()
    assert [(r.outcome, len(r.token_ns)) for r in results] == [(Outcome.OK, 2)] * 5
    assert min(turn.resumed) > max(r.end_ns for r in results), (turn.resumed, [r.end_ns for r in results])


def test_a_head_that_arrives_with_other_streams_tokens_is_read_after_them():
    """A response head arriving in the same turn as four other streams' last bytes: its user (who then builds the
    response and starts the pump, stamping the tokens that came with the head) runs after those bytes are stamped,
    wherever the loop takes its socket."""
    turn = Turn(answered=4, held=1)
    try:
        turn.spawn(1)  # the first connection, held: a loop may well take its socket first
        assert turn.asked.wait(10), "the held request did not arrive"
        turn.spawn(4)
        assert turn.started.wait(10), "the four streams did not all get their first token"
        writes = [*turn.served[:2], *turn.waiting, *turn.served[2:]]
        for sock in writes:  # one turn; the head in the middle
            sock.sendall(HEAD + frame(ROLE) + frame(token("a")) + REST if sock in turn.waiting else REST)
        results = turn.results()
    finally:
        turn.close()
    assert [(r.outcome, len(r.token_ns)) for r in results] == [(Outcome.OK, 2)] * 5
    assert results[0].token_ns[0] > max(r.end_ns for r in results[1:]), [r.token_ns for r in results]


def read(sock, within_s: float = 10.0) -> None:
    """Return once the client has read what was written to ``sock``, yielding meanwhile: every byte is in its receive
    queue (nothing unacknowledged, as in :func:`delivered`), and that queue is empty (``/proc/net/tcp``), or the
    client's end is no longer connected. A client stamps what it read in the same greenlet run or read callback as
    the read, with no switch between, so the server sets the next piece's scripted time only after this piece was
    stamped. (A 2 ms sleep between pieces was not enough: under load a stall let the sleep's timer run before the
    client's read, and the next piece's time was set before this one was stamped.)"""
    deadline = time.monotonic() + within_s
    client, server = _proc_address(sock.getpeername()), _proc_address(sock.getsockname())
    while time.monotonic() < deadline:
        if not _unacknowledged(sock) and not _receive_queue(client, server):
            return
        gevent.sleep(0.0002)


def _proc_address(address) -> str:
    """An IPv4 ``(host, port)`` as ``/proc/net/tcp`` writes it."""
    host, port = address[:2]
    return f"{bytes(reversed([int(part) for part in host.split('.')])).hex().upper()}:{port:04X}"


def _receive_queue(local: str, remote: str) -> int:
    """The bytes not yet read from the established TCP connection ``local`` -> ``remote``; 0 when there is none (an
    earlier connection's socket in TIME_WAIT may hold the same local port, to another server)."""
    with open("/proc/net/tcp") as table:
        for line in table:
            fields = line.split()
            if fields[1] == local and fields[2] == remote and fields[3] == "01":
                return int(fields[4].split(":")[1], 16)
    return 0


def delivered(socks, within_s=10.0):
    """Wait, without yielding to the loop, until every byte written to ``socks`` is in its peer's receive queue (the
    send queue's unacknowledged bytes, ``SIOCOUTQ``, are none: on loopback the peer has them), so that the loop's
    next poll sees them all."""
    deadline = time.monotonic() + within_s
    for sock in socks:
        while _unacknowledged(sock):
            assert time.monotonic() < deadline, "loopback did not deliver"


def _unacknowledged(sock) -> int:
    """Bytes written to ``sock`` its peer has not acknowledged (``SIOCOUTQ``; on loopback: not yet in its queue)."""
    return int.from_bytes(fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"), "little")


def busy_for_20ms(worked):
    """A greenlet's body that holds the loop for 20 ms (as a user's recording and next request would, in a long
    turn), noting when it began in ``worked``."""

    def work():
        worked.append(time.perf_counter_ns())
        until = worked[0] + 20_000_000
        while time.perf_counter_ns() < until:
            pass

    return work


@pytest.fixture
def kernel_stamping():
    """Linux turns receive timestamps on for the whole system a moment after the first socket asks (a deferred
    switch) and off after the last one closes: a socket that asks, kept open, and a read that got its time."""
    if stamps_module.SO_TIMESTAMPNS is None:
        pytest.skip("the kernel's receive times are Linux's")
    import socket

    server = socket.create_server(("127.0.0.1", 0))
    sender = socket.create_connection(server.getsockname())
    receiver, _ = server.accept()
    assert stamps_module.kernel_stamps(receiver)
    deadline = time.monotonic() + 10
    while True:
        sender.send(b"x")
        _data, ancillary, _flags, _address = receiver.recvmsg(16, 64)
        if ancillary:
            break
        assert time.monotonic() < deadline, "the kernel gave no receive time in 10 s"
        time.sleep(0.01)
    yield
    for sock in (sender, receiver, server):
        sock.close()


@pytest.mark.usefixtures("kernel_stamping")
def test_a_plain_read_is_stamped_with_the_kernel_s_receive_time_however_late_it_is_read():
    """Over plain HTTP on Linux a read is stamped with the time the kernel received its last bytes
    (``SO_TIMESTAMPNS``), not when the loop got to it: five streams' last bytes, written 3 ms apart (each between
    two clock readings) while the loop waits, then a greenlet that holds the loop for 20 ms before any of them is
    read. Each stream's stamp lies within its own write (to 0.5 ms: the wall clock's offset to
    ``perf_counter_ns`` is read once per turn), so before the 20 ms of work; stamped with the turn's start, all
    five would be one moment after the last write."""
    turn = Turn(answered=5, clock=time.perf_counter_ns)
    worked, writes = [], []
    try:
        turn.spawn(5)
        assert turn.started.wait(10), "the five streams did not all get their first token"
        for sock in turn.served:  # 3 ms apart, without yielding: the loop reads none of them before the last
            before = time.perf_counter_ns()
            sock.sendall(REST)  # on loopback the peer's kernel receives it within this call
            writes.append((before, time.perf_counter_ns()))
            while time.perf_counter_ns() < before + 3_000_000:
                pass
        delivered(turn.served)
        gevent.spawn_later(0, busy_for_20ms(worked))
        results = turn.results()
    finally:
        turn.close()
    assert [(r.outcome, len(r.token_ns)) for r in results] == [(Outcome.OK, 2)] * 5
    stamps = sorted(r.token_ns[1] for r in results)  # the writes were one after another: so are their stamps
    for stamp, (before, after) in zip(stamps, writes, strict=True):
        assert before - 500_000 <= stamp <= after + 500_000, (stamps, writes)
    assert all(r.end_ns == r.token_ns[1] for r in results)  # the token, the usage and [DONE] came in one read
    assert stamps[-1] < worked[0]


class HeldHead(Turn):
    """One stream whose head, role and first token are written at once (between two clock readings, in
    ``windows``), after which the server, in the client's own process, holds the loop for 20 ms: the client reads
    them at least 20 ms after they arrived."""

    def __init__(self):
        super().__init__(answered=1, clock=time.perf_counter_ns)
        self.windows = []

    def handle(self, sock, _address):
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536)
        before = time.perf_counter_ns()
        sock.sendall(HEAD + frame(ROLE) + frame(token("a")))
        self.windows.append((before, time.perf_counter_ns()))
        while time.perf_counter_ns() < before + 20_000_000:
            pass
        self.served.append(sock)
        self.finish.wait(10)


@pytest.mark.usefixtures("kernel_stamping")
def test_a_token_that_comes_with_the_head_is_stamped_with_the_kernel_s_receive_time():
    """The head read (``wire.post``) takes the kernel's receive time too: a first token that came in the same read
    as the head is stamped within the write that sent it, not when the user got round to it (20 ms later)."""
    turn = HeldHead()
    try:
        turn.spawn(1)
        assert turn.started.wait(10), "the stream did not get its first token"
        turn.served[0].sendall(REST)
        (result,) = turn.results()
    finally:
        turn.close()
    assert result.outcome is Outcome.OK and len(result.token_ns) == 2
    (before, after), first = turn.windows[0], result.token_ns[0]
    assert before - 500_000 <= first <= after + 500_000, (first, turn.windows)


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_reads_in_one_turn_share_the_moment_the_poll_returned_not_the_moment_each_was_read(
    scheme, tmp_path, monkeypatch
):
    """Five streams' next token ready at one poll, and a timer's greenlet due in the same turn (as an open-loop
    arrival sending its request is) that works for 20 ms: with the real clock, every read of that turn is stamped
    with the turn's start, taken after the poll and before the timer's work. Stamped as each callback ran, they
    would differ and all come after the timer's work (libev runs a turn's timers before its reads). Over HTTPS each
    stream's greenlet, woken in that turn from its wait for the socket, reads and stamps its own bytes, one after
    the other: the same rule (``http/stream.py`` ``_read_rest``). Over plain HTTP it is the rule where the kernel
    gives no receive time (here: it is not asked to)."""
    monkeypatch.setattr(pump_module, "kernel_stamps", lambda raw: False)
    certs = make_certificates(str(tmp_path)) if scheme == "https" else None
    turn = Turn(answered=5, clock=time.perf_counter_ns, certs=certs)
    worked = []
    try:
        turn.spawn(5)
        assert turn.started.wait(10), "the five streams did not all get their first token"
        turn.send_rest()
        wrote = time.perf_counter_ns()
        gevent.spawn_later(0, busy_for_20ms(worked))
        results = turn.results()
    finally:
        turn.close()
    assert [(r.outcome, len(r.token_ns)) for r in results] == [(Outcome.OK, 2)] * 5
    stamps = {r.token_ns[1] for r in results}
    assert len(stamps) == 1, sorted(stamps)
    assert wrote < stamps.pop() < worked[0]


def test_an_https_read_that_did_not_wait_is_stamped_when_it_returned_not_with_its_turn_s_start(tmp_path):
    """Over HTTPS a stream's greenlet, woken in a turn, reads on without yielding while it has bytes: bytes that
    arrived after that turn's start (here written by its own first-token callback) are stamped when their read
    returned, never with the turn's start, which came before they were sent."""
    turn = Turn(answered=1, clock=time.perf_counter_ns, certs=make_certificates(str(tmp_path)))
    wrote = []

    def first_token():  # in the reading greenlet, after the turn it was woken in began
        turn.served[0].sendall(REST)
        delivered(turn.served)
        wrote.append(time.perf_counter_ns())

    turn.first_token = first_token
    try:
        turn.spawn(1)
        (result,) = turn.results()
    finally:
        turn.close()
    assert result.outcome is Outcome.OK and len(result.token_ns) == 2
    assert result.token_ns[1] > wrote[0], (result.token_ns, wrote)


def test_an_https_stream_with_a_plain_head_is_unframed_by_us_and_builds_no_parser(monkeypatch, tmp_path):
    """Over HTTPS too the head is read by ``wire.post`` and the chunked body unframed by the ``Unchunker``: with a
    plain head, ``geventhttpclient``'s response (its parser, a callback per chunk) is never built, and the last
    chunk ends the message."""
    import geventhttpclient.client as gclient
    import geventhttpclient.response as gresponse

    import locust_llm.http.head as head_module
    import locust_llm.http.post as wire

    parsers = []

    class Counted(gresponse.HTTPSocketPoolResponse):
        def __init__(self, *a, **k):
            parsers.append(self)
            super().__init__(*a, **k)

    for module in (wire, head_module, gclient):  # ours, and HTTPClient.request's (the path TLS took before)
        monkeypatch.setattr(module, "HTTPSocketPoolResponse", Counted)
    turn = Turn(answered=2, certs=make_certificates(str(tmp_path)))
    try:
        turn.spawn(2)
        assert turn.started.wait(10), "the two streams did not get their first token"
        for sock in turn.served:
            sock.sendall(REST)
        results = turn.results()
    finally:
        turn.close()
    assert [(r.outcome, len(r.token_ns)) for r in results] == [(Outcome.OK, 2)] * 2
    assert parsers == []


def test_a_receive_time_is_the_control_message_s_wall_time_less_the_offset_else_none():
    """``received_ns`` reads a ``struct timespec`` from an ``SO_TIMESTAMPNS`` control message and takes the turn's
    offset (wall clock minus ``clock()``) off it; anything else (no message, another type, another size) is None, and
    the read then takes its turn's start."""
    import struct

    if stamps_module.SO_TIMESTAMPNS is None:
        pytest.skip("the kernel's receive times are Linux's")
    level, kind = 1, stamps_module.SO_TIMESTAMPNS  # SOL_SOCKET
    message = struct.pack("@ll", 1_700_000_000, 123_456_789)
    offset = 1_699_999_000 * 10**9
    assert stamps_module.received_ns([(level, kind, message)], offset) == 1_000 * 10**9 + 123_456_789
    assert stamps_module.received_ns([], offset) is None
    assert stamps_module.received_ns([(level, kind + 1, message)], offset) is None
    assert stamps_module.received_ns([(level, kind, message[:8])], offset) is None
